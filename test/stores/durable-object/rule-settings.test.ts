// Rule-wide limits on DurableObjectStore across Workers: several stores (each a Worker's) on the same objects
// on workerd. A change resolves once every other Worker's lease on the limits has ended, and from then on every
// Worker decides on it; racing changes end the same everywhere; a decision sent on a lease that has ended is
// refused by the identity's object, nothing written; a `for` lives in the limits object's storage and ends on
// its clock, whichever Worker set it and across a restart of the isolate.
import { randomBytes } from 'node:crypto';
import { join } from 'node:path';
import { expect } from 'chai';
import { createLimiter, type Limiter, type RequestInfo, type Rule } from '../../../src/index.js';
import {
  type DurableObjectNamespaceLike,
  DurableObjectStore,
  type DurableObjectStoreOptions,
} from '../../../src/stores/durable-object/index.js';
import { ensureBuilt } from '../../support/pack.js';
import { type RunningWorker, startWorker } from '../../support/workerd.js';

const entry = join(import.meta.dirname, '../../runtimes/apps/durable-worker.ts');
const req = (id: string): RequestInfo => ({
  method: 'GET',
  path: '/',
  ip: '10.0.0.1',
  headers: {},
  user: { id },
});
const rules: Rule[] = [
  {
    name: 'r',
    key: (req) => (req.user as { id: string }).id,
    limit: 2,
    window: { type: 'fixed', size: '1h' },
  },
];

describe('DurableObjectStore rule-wide limits across Workers (objects on workerd)', function () {
  this.timeout(300_000);
  let worker: RunningWorker;
  const opened: Limiter[] = [];
  before(async () => {
    ensureBuilt();
    worker = await startWorker({
      entry,
      durableObjects: { RATE_LIMITER: 'InspectedRateLimitObject' },
      nodejsCompat: false,
    });
  });
  after(() => worker?.close());
  afterEach(async () => {
    for (const limiter of opened.splice(0)) await limiter.close();
  });

  const namespace: DurableObjectNamespaceLike<string> = {
    idFromName: (name) => name,
    get: (name) => ({
      fetch: async (request) =>
        worker.fetch(`/do/${encodeURIComponent(name)}`, { method: 'POST', body: await request.text() }),
    }),
  };
  /** `count` Workers' limiters on one prefix, each with a store of its own. */
  const workers = (count: number, options: DurableObjectStoreOptions = {}) => {
    const prefix = options.prefix ?? `rs${randomBytes(5).toString('hex')}`;
    return Array.from({ length: count }, () => {
      const store = new DurableObjectStore(namespace, { ruleLimits: { leaseMs: 300 }, ...options, prefix });
      const limiter = createLimiter({ store, rules, storeTimeout: 120_000 });
      opened.push(limiter);
      return limiter;
    });
  };
  const admitted = async (l: Limiter, id: string) => {
    let n = 0;
    while ((await l.check(req(id))).allowed) n++;
    return n;
  };

  it('a change made in one Worker is what every other Worker decides on once setLimit resolves', async () => {
    const [a, b] = workers(2) as [Limiter, Limiter];
    // b holds a lease on the limits (no rule-wide limit yet): a's change waits for it to end.
    expect(await admitted(b, 'x')).to.equal(2);
    await a.setLimit('r', 5);
    expect(await admitted(b, 'y'), 'b, at once').to.equal(5);
    expect(await admitted(b, 'x'), 'the rest of 5').to.equal(3);
    expect(await b.limits()).to.deep.equal([{ rule: 'r', limit: 5 }]);
    await b.setLimit('r', null);
    expect(await admitted(a, 'z'), 'a, back to 2').to.equal(2);
  });

  it('4 Workers racing setLimit: once all resolve, every Worker decides on the same one', async () => {
    const ls = workers(4);
    await Promise.all(ls.map((l) => l.check(req('warm'))));
    await Promise.all(ls.map((l, i) => l.setLimit('r', 10 + i)));
    const [inForce] = await (ls[0] as Limiter).limits();
    expect(inForce?.limit).to.be.within(10, 13);
    const figures = await Promise.all(ls.map(async (l, i) => (await l.check(req(`k${i}`))).limit));
    expect(figures).to.deep.equal([inForce?.limit, inForce?.limit, inForce?.limit, inForce?.limit]);
  });

  it("'for' is kept in the limits object and ends on its clock, after the isolate restarts", async () => {
    let now = Date.UTC(2026, 0, 1);
    const prefix = `rs${randomBytes(5).toString('hex')}`;
    const [a] = workers(1, { clock: () => now, prefix }) as [Limiter];
    await a.setLimit('r', 7, { for: '1h' });
    await worker.restart();
    // Another Worker of the same prefix, after the restart: the value and its end are the object's.
    const [b] = workers(1, { clock: () => now, prefix }) as [Limiter];
    expect(await b.limits()).to.deep.equal([{ rule: 'r', limit: 7, untilMs: now + 3_600_000 }]);
    expect((await b.check(req('before'))).limit).to.equal(7);
    now += 3_600_000;
    expect(await b.limits()).to.deep.equal([]);
    expect((await b.check(req('after'))).limit).to.equal(2);
  });

  it('an object refuses a decision on a lease that has ended, and writes nothing', async () => {
    const name = `rs${randomBytes(5).toString('hex')}:k`;
    const op = {
      rule: { name: 'r', type: 'fixed', sizeMs: 60_000, buckets: 0, burst: 0, dryRun: false },
      key: 'k',
      cost: 1,
      limit: 5,
    };
    const send = (leaseUntil: number) =>
      worker.fetch(`/do/${encodeURIComponent(name)}`, {
        method: 'POST',
        body: JSON.stringify({
          t: 1_000_000,
          call: {
            call: 'evaluate',
            mode: 'check',
            ops: [op],
            quiet: false,
            limits: { leaseUntil, rules: { r: [{ fromMs: 0, limit: 9, untilMs: null }] } },
          },
        }),
      });
    const stale = await send(1_000_000);
    expect(stale.status).to.equal(409);
    expect(await stale.json()).to.deep.equal({ nowMs: 1_000_000, stale: true });
    const rows = (await (await worker.fetch(`/rows/${encodeURIComponent(name)}`)).json()) as {
      rows: string[];
    };
    expect(rows.rows).to.deep.equal([]);
    const fresh = (await (await send(1_000_001)).json()) as {
      answer: Array<{ limit: number; overridden: boolean }>;
    };
    expect([fresh.answer[0]?.limit, fresh.answer[0]?.overridden]).to.deep.equal([9, true]);
  });
});
