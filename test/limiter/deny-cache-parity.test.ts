// The deny cache answers exactly as the store would: the same figures on the same sequence, never a refusal the
// store would not give (cost 0, another cost), and no drift from the store's clock estimate. On a real Redis.
import { randomBytes } from 'node:crypto';
import { expect } from 'chai';
import type { Redis } from 'ioredis';
import {
  createLimiter,
  type Decision,
  type EvalMode,
  type Limiter,
  MemoryStore,
  RedisStore,
  type Rule,
  type Store,
  type StoreOp,
} from '../../src/index.js';
import { type RedisServer, startRedis } from '../support/redis.js';

const START = Date.parse('2026-05-04T10:00:00.000Z');

const WINDOWS: Array<[string, Rule['window'], Partial<Rule>?]> = [
  ['fixed', { type: 'fixed', size: '2s' }],
  ['fixed with lockout', { type: 'fixed', size: '2s' }, { lockout: { duration: '3s', escalate: 2 } }],
  ['calendar', { type: 'calendar', unit: 'minute' }],
  ['sliding-log', { type: 'sliding-log', size: '2s' }],
  ['sliding', { type: 'sliding', size: '2s', buckets: 4 }],
  ['token-bucket', { type: 'token-bucket', size: '2s', burst: 4 }],
  ['gcra', { type: 'gcra', size: '2s', burst: 4 }],
];

/** The figures a decision gives a client. */
const figures = (d: Decision) =>
  d.rules.map((r) => ({
    allowed: r.allowed,
    remaining: r.remaining,
    count: r.count,
    resetMs: r.resetMs,
    retryAfterMs: r.retryAfterMs,
    locked: r.locked,
  }));

/** A store whose clock, as this process sees it, runs `lagMs` behind the one it decides on (a Redis time offset estimated late). */
function lagging(inner: Store, lagMs: number): Store {
  return {
    local: false,
    now: () => inner.now() - lagMs,
    evaluate: (ops: readonly StoreOp[], mode: EvalMode) => inner.evaluate(ops, mode),
    refund: (refunds) => inner.refund(refunds),
    reset: (rule, key, options) => inner.reset(rule, key, options),
    locked: (rule, limit) => inner.locked(rule, limit),
    close: () => inner.close(),
  };
}

describe('Deny cache parity with the store (real Redis)', function () {
  this.timeout(60_000);
  let server: RedisServer;
  let client: Redis;
  const limiters: Limiter[] = [];

  // A server of its own: a test counts its script calls.
  before(async () => {
    server = await startRedis();
    client = server.client();
  });
  afterEach(async () => {
    for (const limiter of limiters.splice(0)) await limiter.close();
  });
  after(() => server.stop());

  function limiterOn(store: Store, rule: Rule, denyCache = true): Limiter {
    const limiter = createLimiter({ store, rules: [rule], denyCache });
    limiters.push(limiter);
    return limiter;
  }
  const redis = (clock: () => number) =>
    new RedisStore({ client, prefix: `dcp${randomBytes(4).toString('hex')}`, clock });

  for (const [name, window, extra] of WINDOWS) {
    it(`${name}: cached answers equal Redis's own and the memory store's on 400 mixed steps`, async () => {
      let now = START;
      const clock = () => now;
      const rule = { name: 'r', key: 'ip', limit: 3, window, ...extra } as Rule;
      const cached = limiterOn(redis(clock), rule);
      const uncached = limiterOn(redis(clock), rule, false);
      const memory = limiterOn(new MemoryStore({ clock }), rule);
      let fromCache = 0;
      let answers = 0;
      cached.on('limited', (event) => {
        if (event.cached) fromCache++;
      });
      // A fixed pseudo-random sequence: costs 0-3 (mostly 1), time steps from 0 to 1.5 s, some records.
      let seed = 7;
      const next = (n: number) => {
        seed = (seed * 1103515245 + 12345) % 2147483648;
        // The high bits: the low bits of this generator repeat with a short period.
        return Math.floor(seed / 65536) % n;
      };
      for (let step = 0; step < 400; step++) {
        now += [0, 0, 0, 1, 3, 40, 250, 700, 1500][next(9)] as number;
        const cost = [0, 1, 1, 1, 1, 2, 3][next(7)] as number;
        const record = next(20) === 0;
        // A client that was refused often asks again at once, as an attacker does.
        const repeats = record ? 1 : ([1, 1, 2, 3][next(4)] as number);
        for (let again = 0; again < repeats; again++) {
          const run = (l: Limiter) => (record ? l.record('r', 'k', cost) : l.consume('r', 'k', cost));
          const [a, b, c] = await Promise.all([run(cached), run(uncached), run(memory)]);
          answers++;
          const at = `step ${step}.${again}, t+${now - START} ms, ${record ? 'record' : 'consume'} cost ${cost}`;
          expect(figures(a), `${at}: cached vs Redis`).to.deep.equal(figures(b));
          expect(figures(b), `${at}: Redis vs memory`).to.deep.equal(figures(c));
        }
      }
      console.log(`      ${answers} answers compared, ${fromCache} of them from the deny cache`);
      expect(fromCache, 'answers from the deny cache').to.be.greaterThan(10);
    });
  }

  it('never refuses cost 0, another cost or another per-request limit from the cache when the store would decide differently; a lock refuses every request', async () => {
    let now = START;
    const clock = () => now;
    const limiter = limiterOn(redis(clock), {
      name: 'r',
      key: 'ip',
      limit: 2,
      window: { type: 'fixed', size: '1m' },
    });
    const calls = async () =>
      (await server.commandCount('fcall')) +
      (await server.commandCount('evalsha')) +
      (await server.commandCount('eval'));
    expect((await limiter.consume('r', 'k', 2)).allowed).to.equal(true);
    expect((await limiter.consume('r', 'k', 1)).allowed).to.equal(false); // cached for cost 1
    const before = await calls();
    expect((await limiter.consume('r', 'k', 1)).allowed, 'the same cost, from the cache').to.equal(false);
    expect(await calls(), 'no store call for it').to.equal(before);
    const free = await limiter.consume('r', 'k', 0);
    expect(free.allowed, 'cost 0 fits a full window').to.equal(true);
    expect(free.count).to.equal(2);
    expect((await limiter.consume('r', 'k', 3)).allowed).to.equal(false);
    expect(await calls(), 'cost 0 and cost 3 went to the store').to.equal(before + 2);

    // A per-request limit: the same key, asking for more, is the store's to decide.
    const plans = limiterOn(redis(clock), {
      name: 'r',
      key: 'ip',
      limit: (req) => (req.user === 'premium' ? 5 : 1),
      window: { type: 'fixed', size: '1m' },
    });
    const request = (user: string) => ({ method: 'GET', path: '/', ip: '192.0.2.7', headers: {}, user });
    expect((await plans.check(request('free'))).allowed).to.equal(true);
    expect((await plans.check(request('free'))).allowed).to.equal(false); // cached for limit 1
    const premium = await plans.check(request('premium'));
    expect([premium.allowed, premium.limit, premium.remaining]).to.deep.equal([true, 5, 3]);

    const locking = limiterOn(redis(clock), {
      name: 'r',
      key: 'ip',
      limit: 1,
      window: { type: 'fixed', size: '1m' },
      lockout: { duration: '5m' },
    });
    await locking.consume('r', 'k');
    expect((await locking.consume('r', 'k')).locked).to.equal(true);
    now += 1000;
    const whileLocked = await calls();
    const zero = await locking.consume('r', 'k', 0);
    expect(zero.locked, 'a lock refuses cost 0 too').to.equal(true);
    expect(zero.retryAfterMs).to.equal(299_000);
    expect(await calls(), 'answered from the cache').to.equal(whileLocked);
  });

  it("is not lengthened by an error in the store's clock estimate: a clock seen 50 ms late changes no answer (regression: 5000, 5007, 5007)", async () => {
    let now = START;
    const clock = () => now;
    const rule: Rule = { name: 'r', key: 'ip', limit: 1, window: { type: 'fixed', size: '5s' } };
    const cached = limiterOn(lagging(redis(clock), 50), rule);
    const truth = limiterOn(redis(clock), rule, false);
    const answers: Array<[number | undefined, number | undefined]> = [];
    for (const step of [0, 0, 2, 1, 4_000, 996, 3]) {
      now += step;
      const [a, b] = await Promise.all([cached.consume('r', 'k'), truth.consume('r', 'k')]);
      answers.push([a.retryAfterMs, b.retryAfterMs]);
      expect(a.allowed, `t+${now - START}`).to.equal(b.allowed);
    }
    expect(answers).to.deep.equal([
      [undefined, undefined],
      [5000, 5000],
      [4998, 4998],
      [4997, 4997],
      [997, 997],
      [1, 1],
      [undefined, undefined],
    ]);
  });
});
