// Leasing on DurableObjectStore, objects on workerd: 4 Workers (a store each) with hundreds of decisions of one
// identity in flight admit at most the limit, at least the limit less the blocks that may be held, and the
// object counts exactly what was admitted once the blocks are back; the object requests per admission with
// leasing on and off; a rule-wide limit set in another Worker ends every block.
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
import { PATIENT } from '../../support/settle.js';
import { type RunningWorker, startWorker } from '../../support/workerd.js';

const LIMIT = 2000;
const SHARE = 16;
const WORKERS = 4;
const rules: Rule[] = [{ name: 'hot', key: 'ip', limit: LIMIT, window: { type: 'fixed', size: '1h' } }];
const req = (ip: string): RequestInfo => ({ method: 'GET', path: '/', ip, headers: {} });

describe('DurableObjectStore leasing (objects on workerd)', function () {
  this.timeout(300_000);
  let worker: RunningWorker;
  before(async () => {
    ensureBuilt();
    worker = await startWorker({
      entry: join(import.meta.dirname, '../../runtimes/apps/durable-worker.ts'),
      durableObjects: { RATE_LIMITER: 'InspectedRateLimitObject' },
      nodejsCompat: false,
    });
  });
  after(() => worker?.close());

  const namespace: DurableObjectNamespaceLike<string> = {
    idFromName: (name) => name,
    get: (name) => ({
      fetch: async (request) =>
        worker.fetch(`/do/${encodeURIComponent(name)}`, { method: 'POST', body: await request.text() }),
    }),
  };
  /** What any store call failed with: none is expected (a fault would hand decisions to the failure policy). */
  const faults: string[] = [];
  afterEach(() => expect(faults.splice(0)).to.deep.equal([]));
  const limiters = (count: number, prefix: string, options: DurableObjectStoreOptions) =>
    Array.from({ length: count }, () => {
      const store = new DurableObjectStore(namespace, { ...options, prefix });
      const limiter = createLimiter({ store, rules, onStoreError: 'deny', ...PATIENT });
      limiter.on('storeError', ({ error, operation }) => faults.push(`${operation}: ${String(error)}`));
      return limiter;
    });
  /** Object requests the identity's object has answered. */
  const requests = async (prefix: string, ip: string) =>
    (
      (await (await worker.fetch(`/rows/${encodeURIComponent(`${prefix}:${ip}`)}`)).json()) as {
        counts: { requests: number };
      }
    ).counts.requests;

  /** `demand` decisions of one ip over the limiters, `inFlight` at a time in each: the number admitted. */
  async function run(ls: Limiter[], ip: string, demand: number, inFlight: number): Promise<number> {
    let issued = 0;
    let admitted = 0;
    const loop = async (l: Limiter) => {
      while (issued < demand) {
        issued++;
        if ((await l.check(req(ip))).allowed) admitted++;
      }
    };
    await Promise.all(ls.flatMap((l) => Array.from({ length: inFlight }, () => loop(l))));
    return admitted;
  }

  it(`${WORKERS} Workers, 200 decisions in flight, 1.5 times the limit asked: never over it, within the bound, counted exactly`, async () => {
    const figures: Record<string, { admitted: number; requests: number }> = {};
    for (const leasing of [true, false]) {
      const prefix = `ls${randomBytes(5).toString('hex')}`;
      const ip = '10.9.9.9';
      // hotAfter 1: the key is hot from its first decision, however slow the machine (a rate is timing).
      const ls = limiters(WORKERS, prefix, { leasing: leasing && { share: SHARE, hotAfter: 1 } });
      const admitted = await run(ls, ip, (3 * LIMIT) / 2, 50);
      expect(faults.slice(0, 3), 'store faults').to.deep.equal([]);
      // Every block's unused units go back when its limiter closes: the object then counts what was admitted.
      await Promise.all(ls.map((l) => l.close()));
      const [check] = limiters(1, prefix, {});
      expect((await (check as Limiter).status('hot', ip)).count, 'counted').to.equal(admitted);
      figures[leasing ? 'on' : 'off'] = { admitted, requests: await requests(prefix, ip) };
      expect(admitted, 'never over the limit').to.be.at.most(LIMIT);
      // Units held unused in blocks are the only ones lost: at most one block a Worker, each at most
      // 1/share of what the object had left (docs/exactness.md).
      expect(admitted, 'the under-admission bound').to.be.at.least(
        LIMIT - WORKERS * Math.floor(LIMIT / SHARE),
      );
    }
    const { on, off } = figures as Record<'on' | 'off', { admitted: number; requests: number }>;
    console.log(
      `      object requests per admission: leasing on ${(on.requests / on.admitted).toFixed(3)} (${on.requests} for ${on.admitted}), off ${(off.requests / off.admitted).toFixed(3)} (${off.requests} for ${off.admitted})`,
    );
    expect(on.requests, 'fewer object requests with leasing').to.be.below(off.requests);
  });

  it('a rule-wide limit set in another Worker ends every block: no unit of the old limit is admitted', async () => {
    const prefix = `ls${randomBytes(5).toString('hex')}`;
    const options = { ruleLimits: { leaseMs: 300 }, leasing: { hotAfter: 1, idleMs: 60_000, share: SHARE } };
    const [leased, other] = limiters(2, prefix, options) as [Limiter, Limiter];
    for (let i = 0; i < 100; i++) expect((await leased.check(req('10.8.8.8'))).allowed).to.equal(true);
    await other.setLimit('hot', 100);
    const next = await leased.check(req('10.8.8.8'));
    expect([next.allowed, next.limit]).to.deep.equal([false, 100]);
    await Promise.all([leased.close(), other.close()]);
  });
});
