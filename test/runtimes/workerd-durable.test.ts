// DurableObjectStore on workerd for real (miniflare, the binary from npm): a Worker bundled from the built
// package, its counts in RateLimitObjects. Exact under hundreds of parallel requests on every window type and on
// one hot object, all or nothing over two identities, concurrency slots held while a body streams and lapsing
// (the alarm empties the object) when the isolate that held them is gone, lockouts, overrides, counts kept
// across an isolate restart, a Hono app, and forged messages refused whole.
// nodejs_compat is on until the core imports no `node:` module (the Worker bundles the whole package).
import { randomBytes } from 'node:crypto';
import { join } from 'node:path';
import { expect } from 'chai';
import { createLimiter, type RuleStatus } from '../../src/index.js';
import {
  type DurableObjectNamespaceLike,
  DurableObjectStore,
} from '../../src/stores/durable-object/index.js';
import { ensureBuilt } from '../support/pack.js';
import { until } from '../support/settle.js';
import { type RunningWorker, startWorker } from '../support/workerd.js';

const entry = join(import.meta.dirname, 'apps/durable-worker.ts');
const fresh = () => `10.${[1, 2, 3].map(() => randomBytes(1)[0]).join('.')}`;

describe('workerd: DurableObjectStore behind withRateLimit and Hono', function () {
  this.timeout(300_000);
  let worker: RunningWorker;
  before(async () => {
    ensureBuilt();
    worker = await startWorker({
      entry,
      durableObjects: { RATE_LIMITER: 'InspectedRateLimitObject' },
      nodejsCompat: false,
    });
  });
  after(() => worker?.close());

  const get = (path: string, headers: Record<string, string> = {}, method = 'GET') =>
    worker.fetch(path, { method, headers });
  /** `count` requests at once: their statuses, bodies read. */
  const burst = (count: number, request: (i: number) => Promise<Response>) =>
    Promise.all(
      Array.from({ length: count }, async (_, i) => {
        const response = await request(i);
        await response.arrayBuffer();
        return response.status;
      }),
    );
  const admitted = (statuses: number[]) => statuses.filter((s) => s === 200).length;
  const status = async (rule: string, key: string) =>
    (await (await get(`/admin/status?rule=${rule}&key=${encodeURIComponent(key)}`)).json()) as RuleStatus;
  /** Headers of a streamed request: uncompressed, so that its first chunk arrives before its last. */
  const streaming = (ip: string) => ({ 'CF-Connecting-IP': ip, 'accept-encoding': 'identity' });
  const inspect = async (key: string) =>
    (await (await get(`/rows/${encodeURIComponent(`rk:${key}`)}`)).json()) as {
      rows: string[];
      counts: Record<string, number>;
    };
  const rows = async (key: string) => (await inspect(key)).rows;

  for (const [path, rule, limit] of [
    ['/fixed', 'fixed', 50],
    ['/sliding', 'sliding', 40],
    ['/log', 'log', 30],
    ['/bucket', 'bucket', 25],
    ['/gcra', 'gcra', 20],
    ['/day', 'day', 15],
  ] as const) {
    it(`${rule}: 300 requests in flight at once admit exactly ${limit}, and the object counts exactly that`, async () => {
      const ip = fresh();
      const statuses = await burst(300, () => get(path, { 'CF-Connecting-IP': ip }));
      expect(admitted(statuses)).to.equal(limit);
      expect(statuses.filter((s) => s === 429)).to.have.length(300 - limit);
      expect(await status(rule, ip)).to.include({ count: limit, remaining: 0 });
    });
  }

  it('one hot object: 600 requests of one identity at once admit exactly 500', async () => {
    const ip = fresh();
    const statuses = await burst(600, () => get('/hot', { 'CF-Connecting-IP': ip }));
    expect(admitted(statuses)).to.equal(500);
    expect((await status('hot', ip)).count).to.equal(500);
  });

  it('rules over two identities (an ip, a user) are all or nothing: 200 at once admit exactly 25, counted once in each', async () => {
    const ip = fresh();
    const user = `u-${randomBytes(4).toString('hex')}`;
    const statuses = await burst(200, () => get('/pair', { 'CF-Connecting-IP': ip, 'x-user': user }));
    expect(admitted(statuses)).to.equal(25);
    expect((await status('pair-ip', ip)).count).to.equal(25);
    expect((await status('pair-user', user)).count).to.equal(25);
  });

  it('two users behind one ip, 200 at once: never past either limit, and each object counts exactly what was admitted', async () => {
    const ip = fresh();
    const users = [`a-${randomBytes(4).toString('hex')}`, `b-${randomBytes(4).toString('hex')}`];
    const statuses = await burst(200, (i) =>
      get('/pair', { 'CF-Connecting-IP': ip, 'x-user': users[i % 2] as string }),
    );
    const byUser = users.map((_, u) => admitted(statuses.filter((_, i) => i % 2 === u)));
    for (const n of byUser) expect(n).to.be.at.most(25);
    expect(admitted(statuses)).to.be.at.most(40);
    // Nothing a denied request reserved in one object stayed counted there.
    expect((await status('pair-ip', ip)).count).to.equal(admitted(statuses));
    for (const [u, user] of users.entries())
      expect((await status('pair-user', user)).count).to.equal(byUser[u]);
  });

  it('a concurrency slot is held while its body streams and freed once the body is read to its end', async () => {
    const ip = fresh();
    const open = async (id: string) => {
      const response = await get(`/stream?id=${id}`, streaming(ip));
      const reader = (response.body as ReadableStream<Uint8Array>).getReader();
      await reader.read();
      return { response, reader };
    };
    const first = await open('s1');
    const second = await open('s2');
    expect([first.response.status, second.response.status]).to.deep.equal([200, 200]);
    expect((await get('/stream?id=s3', streaming(ip))).status).to.equal(429);
    await (await get('/finish?id=s1')).text();
    while (!(await first.reader.read()).done);
    await until('the finished stream frees its slot', async () => (await status('streams', ip)).count === 1);
    const third = await open('s4');
    expect(third.response.status).to.equal(200);
    await (await get('/finish?id=s2')).text();
    await (await get('/finish?id=s4')).text();
    while (!(await second.reader.read()).done);
    while (!(await third.reader.read()).done);
    await until('every slot freed', async () => (await status('streams', ip)).count === 0);
  });

  it('slots of an isolate that is gone lapse after their lease, and the alarm empties the object', async () => {
    const ip = fresh();
    for (const id of ['l1', 'l2']) {
      const response = await get(`/stream?id=${id}`, streaming(ip));
      expect(response.status).to.equal(200);
      // Never read to its end: the isolate goes with the request in flight.
      void (response.body as ReadableStream<Uint8Array>)
        .getReader()
        .read()
        .catch(() => {});
    }
    expect(await rows(ip)).to.deep.equal([`s${JSON.stringify(['streams', ip])}`]);
    await worker.restart();
    await until('the alarm deletes the lapsed slots', async () => (await rows(ip)).length === 0, 60_000);
    const again = await burst(3, (i) =>
      get(`/stream?id=n${i}`, { 'CF-Connecting-IP': ip }).then(async (r) => {
        if (r.status === 200) await get(`/finish?id=n${i}`);
        return r;
      }),
    );
    expect(admitted(again)).to.equal(2);
  });

  it('locks a login after 3 failures, lists the lock, keeps it across a restart, and a reset lifts it', async () => {
    const user = `bob-${randomBytes(4).toString('hex')}`;
    const attempt = () => get('/login', { 'x-user': user }, 'POST');
    for (let i = 0; i < 3; i++) expect((await attempt()).status).to.equal(200);
    const fourth = await attempt();
    expect(fourth.status).to.equal(429);
    expect(fourth.headers.get('retry-after')).to.equal('900');
    const listed = (await (await get('/admin/locked?rule=login')).json()) as Array<{ key: string }>;
    expect(listed.map((l) => l.key)).to.include(user);
    await worker.restart();
    expect((await attempt()).status).to.equal(429);
    expect(await status('login', user)).to.include({ locked: true, level: 1 });
    await get(`/admin/reset?rule=login&key=${user}`);
    const after = (await (await get('/admin/locked?rule=login')).json()) as Array<{ key: string }>;
    expect(after.map((l) => l.key)).not.to.include(user);
    expect((await attempt()).status).to.equal(200);
  });

  it('an override raises one key only, for every isolate: 20 at once admit 5 for it and 2 for another', async () => {
    const vip = `vip-${randomBytes(4).toString('hex')}`;
    const basic = `basic-${randomBytes(4).toString('hex')}`;
    await get(`/admin/override?rule=plan&key=${vip}&limit=5`);
    expect(admitted(await burst(20, () => get('/plan', { 'x-user': vip })))).to.equal(5);
    expect(admitted(await burst(20, () => get('/plan', { 'x-user': basic })))).to.equal(2);
    expect(await status('plan', vip)).to.include({ overridden: true, limit: 5, count: 5 });
  });

  it('counts survive an isolate restart (the object reads its storage again)', async () => {
    const ip = fresh();
    expect(admitted(await burst(60, () => get('/fixed', { 'CF-Connecting-IP': ip })))).to.equal(50);
    await worker.restart();
    expect((await get('/fixed', { 'CF-Connecting-IP': ip })).status).to.equal(429);
    expect((await status('fixed', ip)).count).to.equal(50);
  });

  it("Hono's rateLimit on the same store: 100 at once admit exactly 30", async () => {
    const client = `c-${randomBytes(4).toString('hex')}`;
    expect(admitted(await burst(100, () => get('/hono/x', { 'x-client': client })))).to.equal(30);
  });

  it('a forged message is refused whole, naming the field, and the object writes nothing', async () => {
    const name = `rk:forged-${randomBytes(4).toString('hex')}`;
    const rule = { name: 'r', type: 'fixed', sizeMs: 1000, buckets: 0, burst: 0, dryRun: false };
    const op = { rule, key: 'k', cost: 1, limit: 5 };
    const send = (body: unknown) =>
      worker.fetch(`/do/${encodeURIComponent(name)}`, { method: 'POST', body: JSON.stringify(body) });
    const cases: Array<[unknown, RegExp]> = [
      [{ t: null, call: { call: 'drop', ops: [] } }, /call\.call must be a call the object knows/],
      [
        { t: null, call: { call: 'evaluate', mode: 'check', ops: [{ ...op, cost: -1 }] } },
        /call\.ops\[0\]\.cost/,
      ],
      [
        { t: null, call: { call: 'evaluate', mode: 'check', ops: [{ ...op, limit: 0 }] } },
        /call\.ops\[0\]\.limit/,
      ],
      [
        {
          t: null,
          call: { call: 'evaluate', mode: 'check', ops: [op, { ...op, rule: { ...rule, type: 'magic' } }] },
        },
        /call\.ops\[1\]\.rule\.type/,
      ],
      [{ t: null, call: { call: 'evaluate', mode: 'all', ops: [op] } }, /call\.mode/],
      [{ t: -5, call: { call: 'evaluate', mode: 'check', ops: [op] } }, /message\.t/],
      ['not a message', /message must be an object/],
    ];
    for (const [body, reason] of cases) {
      const response = await send(body);
      expect(response.status, JSON.stringify(body)).to.equal(400);
      expect(((await response.json()) as { error: string }).error).to.match(reason);
    }
    const notJson = await worker.fetch(`/do/${encodeURIComponent(name)}`, { method: 'POST', body: '{' });
    expect(notJson.status).to.equal(400);
    const inspected = (await (await worker.fetch(`/rows/${encodeURIComponent(name)}`)).json()) as {
      rows: string[];
      counts: Record<string, number>;
    };
    expect(inspected.rows).to.deep.equal([]);
    expect(inspected.counts).to.include({ put: 0, rowsWritten: 0, setAlarm: 0 });
  });

  it('costs one object request and one row written per admitted decision, nothing written for a denial', async () => {
    const ip = fresh();
    for (let i = 0; i < 55; i++) await (await get('/fixed', { 'CF-Connecting-IP': ip })).arrayBuffer();
    const { counts } = await inspect(ip);
    // Read once when the object started (it held nothing then); one alarm, for the window's end. The first
    // denial is the object's; the isolate's deny cache answers the next four.
    expect(counts).to.deep.include({
      requests: 51,
      list: 1,
      rowsRead: 0,
      put: 50,
      rowsWritten: 50,
      setAlarm: 1,
    });
    const user = `c-${randomBytes(4).toString('hex')}`;
    const pairIp = fresh();
    for (let i = 0; i < 30; i++)
      await (await get('/pair', { 'CF-Connecting-IP': pairIp, 'x-user': user })).arrayBuffer();
    // 25 admitted. The first denial (the user's rule, decided second) had taken a unit from the ip's object: given
    // back by one more request there, a row written each time. The deny cache answers the other four.
    expect((await inspect(pairIp)).counts).to.deep.include({ requests: 27, rowsWritten: 27 });
    expect((await inspect(user)).counts).to.deep.include({ requests: 26, rowsWritten: 25 });
  });

  it('an object that fails mid-request: what the objects before it consumed is given back, and the fault reaches the failure policy', async () => {
    const prefix = `rkf${randomBytes(4).toString('hex')}`;
    const namespace: DurableObjectNamespaceLike<string> = {
      idFromName: (name) => name,
      get: (name) => ({
        fetch: async (request) => {
          if (name.endsWith(':broken')) throw new Error('Durable Object is overloaded');
          return worker.fetch(`/do/${encodeURIComponent(name)}`, {
            method: 'POST',
            body: await request.text(),
          });
        },
      }),
    };
    const faults: unknown[] = [];
    const limiter = createLimiter({
      store: new DurableObjectStore(namespace, { prefix }),
      rules: [
        { name: 'first', key: 'ip', limit: 5, window: { type: 'fixed', size: '1h' } },
        { name: 'second', key: 'user', limit: 5, window: { type: 'fixed', size: '1h' } },
      ],
      onStoreError: 'deny',
      denyCache: false,
      // One object's fault is the whole store's for storeRetryInterval (docs/edge.md): not here.
      storeRetryInterval: 1,
    });
    limiter.on('storeError', (event) => faults.push(event));
    const decision = await limiter.check({
      method: 'GET',
      path: '/',
      headers: {},
      ip: '1.1.1.1',
      user: 'broken',
    });
    expect(decision.allowed).to.equal(false);
    expect(faults).to.have.length(1);
    expect((await limiter.status('first', '1.1.1.1')).count).to.equal(0);
    const fine = await limiter.check({ method: 'GET', path: '/', headers: {}, ip: '1.1.1.1', user: 'fine' });
    expect(fine.allowed).to.equal(true);
    expect((await limiter.status('first', '1.1.1.1')).count).to.equal(1);
    await limiter.close();
  });
});
