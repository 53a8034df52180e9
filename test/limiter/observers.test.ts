// limiter.observe (every decision with its mode and source, every shared-store call) and limiter.health() (the
// shared store's state, last fault and its code), on the memory store and a real Redis.
import { randomBytes } from 'node:crypto';
import { expect } from 'chai';
import type { Redis } from 'ioredis';
import {
  createLimiter,
  type Decision,
  type DecisionInfo,
  type Limiter,
  type LimiterOptions,
  type LockoutEvent,
  OBSERVER_ERROR_WARNING,
  RateLimitConfigError,
  RedisStore,
  type Rule,
  type Store,
  type StoreCallInfo,
  type StoreLiveness,
} from '../../src/index.js';
import { RECOMMENDED_REDIS_OPTIONS } from '../fixtures/redis-options.js';
import { getRedis } from '../support/redis.js';
import { PATIENT } from '../support/settle.js';

const RULE: Rule = { name: 'api', key: 'ip', limit: 1, window: { type: 'fixed', size: '1m' } };
const REQUEST = { method: 'GET', path: '/', ip: '192.0.2.1', headers: {} };

/** `inner` with some methods replaced; the others called on `inner` itself (its private fields need it). */
function replacing(inner: Store, methods: Partial<Store>): Store {
  return {
    local: inner.local,
    now: () => inner.now(),
    evaluate: (ops, mode) => inner.evaluate(ops, mode),
    refund: (refunds) => inner.refund(refunds),
    reset: (rule, key, options) => inner.reset(rule, key, options),
    locked: (rule, limit) => inner.locked(rule, limit),
    close: () => inner.close(),
    ...methods,
  };
}

/** Everything an observer is told, in order. */
function recorder() {
  const decisions: Array<[Decision, DecisionInfo]> = [];
  const calls: StoreCallInfo[] = [];
  return {
    decisions,
    calls,
    observer: {
      decision: (d: Decision, info: DecisionInfo) => decisions.push([d, info]),
      storeCall: (info: StoreCallInfo) => calls.push(info),
    },
  };
}

async function ready(client: Redis): Promise<void> {
  if (client.status !== 'ready') await new Promise<void>((resolve) => client.once('ready', () => resolve()));
}

describe('limiter.observe and limiter.health', () => {
  const cleanups: Array<() => unknown> = [];
  afterEach(async () => {
    for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
  });
  function limiterOf(options: Partial<LimiterOptions> = {}): Limiter {
    const limiter = createLimiter({ rules: [RULE], ...PATIENT, ...options });
    cleanups.push(() => limiter.close());
    return limiter;
  }
  async function redisClient(): Promise<Redis> {
    // Every fault below is made on purpose: no commandTimeout a busy machine could reach.
    const client = (await getRedis()).client({
      ...RECOMMENDED_REDIS_OPTIONS,
      commandTimeout: PATIENT.storeTimeout,
    });
    cleanups.push(() => client.disconnect());
    await ready(client);
    return client;
  }
  const redisStore = (client: Redis) =>
    new RedisStore({ client, prefix: `obs${randomBytes(4).toString('hex')}` });

  it('tells every decision on the memory store with its mode and source, and no store call; unsubscribing stops it', async () => {
    const limiter = limiterOf({ rules: [{ ...RULE, match: 'GET /' }] });
    const seen = recorder();
    const stop = limiter.observe(seen.observer);
    const checked = await limiter.check(REQUEST);
    await limiter.peek(REQUEST);
    await limiter.consume('api', 'k');
    await limiter.record('api', 'k', 2);
    await limiter.check({ ...REQUEST, method: 'POST' }); // no rule matches: nothing to tell
    expect(seen.decisions.map(([d, info]) => [info.mode, info.source, d.allowed])).to.deep.equal([
      ['check', 'store', true],
      ['peek', 'store', false],
      ['check', 'store', true],
      ['record', 'store', false],
    ]);
    expect(seen.decisions[0]?.[0], 'the decision the caller got').to.equal(checked);
    expect(seen.calls, 'the memory store is not a shared store').to.deep.equal([]);
    stop();
    await limiter.consume('api', 'other');
    expect(seen.decisions).to.have.length(4);
  });

  it('tells Redis decisions, deny-cache answers and every store call with its operation', async () => {
    const client = await redisClient();
    const limiter = limiterOf({ store: redisStore(client), rules: [{ ...RULE, countOn: 'failure' }] });
    const seen = recorder();
    limiter.observe(seen.observer);
    const admitted = await limiter.consume('api', 'k');
    await limiter.report(admitted, 'success'); // gives the unit back: one store call
    await limiter.report(await limiter.consume('api', 'k'), 'failure'); // stays counted: no store call
    await limiter.status('api', 'k');
    await limiter.locked('api');
    await limiter.reset('api', 'k');
    expect(seen.calls.map((c) => [c.operation, c.error])).to.deep.equal([
      ['check', undefined],
      ['report', undefined],
      ['check', undefined],
      ['status', undefined],
      ['locked', undefined],
      ['reset', undefined],
    ]);
    for (const call of seen.calls) expect(call.seconds).to.be.a('number').and.at.least(0);
    expect(seen.decisions.map(([, info]) => info.source)).to.deep.equal(['store', 'store']);

    const cached = limiterOf({ store: redisStore(client) });
    const again = recorder();
    cached.observe(again.observer);
    await cached.consume('api', 'k');
    await cached.consume('api', 'k');
    await cached.consume('api', 'k');
    expect(again.decisions.map(([d, info]) => [info.source, d.allowed])).to.deep.equal([
      ['store', true],
      ['store', false],
      ['deny_cache', false],
    ]);
    expect(
      again.calls.map((c) => c.operation),
      'a cached answer calls no store',
    ).to.deep.equal(['check', 'check']);
  });

  it('tells the failure policy and the insurance store as sources, and failed store calls with their error', async () => {
    for (const [onStoreError, source] of [
      ['insurance', 'insurance'],
      ['deny', 'policy'],
    ] as const) {
      const client = await redisClient();
      const limiter = limiterOf({ store: redisStore(client), onStoreError });
      const seen = recorder();
      limiter.observe(seen.observer);
      client.disconnect();
      const decision = await limiter.consume('api', 'k');
      expect(
        seen.decisions.map(([, info]) => info.source),
        onStoreError,
      ).to.deep.equal([source]);
      expect(seen.decisions[0]?.[0]).to.equal(decision);
      expect(seen.calls.map((c) => c.operation)).to.deep.equal(['check']);
      expect(seen.calls[0]?.error).to.be.an.instanceOf(Error);
    }
  });

  it('health(): the memory store is ok; Redis is ok, then down with the fault from the failing call, then ok again', async () => {
    const memory = limiterOf();
    const memoryHealth = await memory.health();
    expect(memoryHealth.state).to.equal('ok');
    expect(memoryHealth).to.have.all.keys('state', 'sinceMs');

    const client = await redisClient();
    const inner = redisStore(client);
    let fail = false;
    const refused = () =>
      Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:6390'), { code: 'ECONNREFUSED' });
    const store = replacing(inner, {
      evaluate: (ops, mode) => (fail ? Promise.reject(refused()) : inner.evaluate(ops, mode)),
    });
    const limiter = limiterOf({ store, storeRetryInterval: 1 });
    await limiter.consume('api', 'a');
    const ok = await limiter.health();
    expect(ok.state).to.equal('ok');
    expect(ok.lastError).to.equal(undefined);

    fail = true;
    await limiter.consume('api', 'b'); // the insurance store answers
    const down = await limiter.health();
    expect(down.state).to.equal('down');
    expect(down.sinceMs).to.be.at.least(ok.sinceMs);
    expect(down.lastError).to.include({
      message: 'connect ECONNREFUSED 127.0.0.1:6390',
      code: 'ECONNREFUSED',
    });

    fail = false;
    // Decisions skip the store for storeRetryInterval (1 ms) after a failure, then try it again.
    await new Promise((resolve) => setTimeout(resolve, 5));
    expect((await limiter.consume('api', 'c')).allowed).to.equal(true);
    expect((await limiter.status('api', 'c')).count, 'counted by Redis again').to.equal(1);
    const back = await limiter.health();
    expect(back.state).to.equal('ok');
    expect(back.sinceMs).to.be.at.least(down.sinceMs);
    expect(back.lastError?.message, 'the last fault stays on record').to.equal(down.lastError?.message);
  });

  it("health() asks the store's ping under storeTimeout: a refusal is down with its code, a hang is a timeout", async () => {
    const client = await redisClient();
    let ping: () => Promise<void> = async () => void (await client.ping());
    // Its liveness as a connection tracks it: silent since the oldest ping still unanswered.
    let outstanding = 0;
    let silentSince = 0;
    const liveness: StoreLiveness = {
      connecting: () => undefined,
      silentSinceMs: () => (outstanding > 0 ? silentSince : undefined),
      ping: () => {
        if (outstanding++ === 0) silentSince = performance.now();
        const answered = () => void outstanding--;
        const pinging = ping();
        pinging.then(answered, answered);
        return pinging;
      },
    };
    const store = replacing(redisStore(client), { liveness });
    const limiter = limiterOf({ store });
    expect((await limiter.health()).state).to.equal('ok');

    ping = () =>
      Promise.reject(Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:1'), { code: 'ECONNREFUSED' }));
    const refused = await limiter.health();
    expect(refused.state).to.equal('down');
    expect(refused.lastError).to.include({
      message: 'connect ECONNREFUSED 127.0.0.1:1',
      code: 'ECONNREFUSED',
    });

    ping = () => Promise.reject(new Error('WRONGPASS invalid username-password pair or user is disabled.'));
    expect((await limiter.health()).lastError?.code, 'a Redis reply names its code first').to.equal(
      'WRONGPASS',
    );

    ping = () => new Promise(() => {});
    const hung = await limiterOf({ store, storeTimeout: 50 }).health();
    expect(hung.lastError).to.include({
      message: 'store did not answer within 50 ms',
      code: 'ERR_STORE_TIMEOUT',
    });

    ping = async () => {};
    expect((await limiter.health()).state).to.equal('ok');
  });

  it('the debug log names each decision source and the code of a store fault', async () => {
    const client = await redisClient();
    const lines: string[] = [];
    const inner = redisStore(client);
    let fail = false;
    const store = replacing(inner, {
      evaluate: (ops, mode) =>
        fail
          ? Promise.reject(
              Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:1'), { code: 'ECONNREFUSED' }),
            )
          : inner.evaluate(ops, mode),
    });
    const limiter = limiterOf({ store, onStoreError: 'deny', debug: (line) => lines.push(line) });
    await limiter.consume('api', 'k');
    fail = true;
    await limiter.consume('api', 'j');
    expect(lines).to.deep.equal([
      'check allowed by the store api["k"]=0/1',
      'store error during check (deny): connect ECONNREFUSED 127.0.0.1:1',
      `check denied by onStoreError 'deny' api["j"]=0/1`,
    ]);
    const coded = Object.assign(new Error("Stream isn't writeable"), { code: 'EPIPE' });
    const failing = limiterOf({
      store: replacing(inner, { evaluate: () => Promise.reject(coded) }),
      debug: (line) => lines.push(line),
    });
    await failing.consume('api', 'k');
    expect(lines.slice(3)).to.deep.equal([
      "store error during check (insurance): Stream isn't writeable (code EPIPE)",
      'check allowed by the insurance store api["k"]=0/1',
    ]);
  });

  it('an observer that throws never fails a decision: a warning, once', async () => {
    const limiter = limiterOf();
    const warnings: Error[] = [];
    const onWarning = (warning: Error) => warnings.push(warning);
    process.on('warning', onWarning);
    cleanups.push(() => process.off('warning', onWarning));
    limiter.observe({
      decision: () => {
        throw new Error('metrics backend gone');
      },
    });
    expect((await limiter.consume('api', 'k')).allowed).to.equal(true);
    expect((await limiter.consume('api', 'k')).allowed).to.equal(false);
    await new Promise((resolve) => setImmediate(resolve));
    const ours = warnings.filter((w) => (w as { code?: string }).code === OBSERVER_ERROR_WARNING);
    expect(ours.map((w) => w.message)).to.deep.equal([
      "ratekeeper: an observer's decision hook threw: metrics backend gone",
    ]);
  });

  it('refuses an observer that is not one, with the did-you-mean of strict configuration', () => {
    const limiter = limiterOf();
    expect(() => limiter.observe({ decisions: () => {} } as never)).to.throw(
      RateLimitConfigError,
      "observe: unknown field 'decisions' (got a function), did you mean 'decision'?",
    );
    expect(() => limiter.observe({ storeCall: 5 } as never)).to.throw(
      RateLimitConfigError,
      'observe: storeCall must be a function, got 5',
    );
    expect(() => limiter.observe(undefined as never)).to.throw(RateLimitConfigError, /got undefined/);
  });

  it('tells each lock a decision places, with the figures of the lockout event, on the memory store and Redis', async () => {
    const rule: Rule = { ...RULE, name: 'login', lockout: { duration: '10m', escalate: 2 } };
    for (const store of [undefined, redisStore(await redisClient())]) {
      const limiter = limiterOf({ rules: [rule], ...(store === undefined ? {} : { store }) });
      const told: LockoutEvent[] = [];
      const events: LockoutEvent[] = [];
      limiter.on('lockout', (event) => events.push(event));
      limiter.observe({ lockout: (event) => told.push(event) });
      for (let i = 0; i < 4; i++) await limiter.consume('login', 'ann'); // 1 allowed, 1 placing the lock, 2 locked
      expect(
        told.map((e) => [e.rule, e.key, e.level]),
        store === undefined ? 'memory' : 'redis',
      ).to.deep.equal([['login', 'ann', 1]]);
      expect(told[0]).to.equal(events[0]);
    }
  });
});
