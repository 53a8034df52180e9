// The failure policy's rules without a server: what counts as a failed store (silence) and what as a slow
// one (answers to other calls, a first connection underway), the insurance store's share, and their options.
import { expect } from 'chai';
import {
  type ConnectionLiveness,
  createLimiter,
  type EvalMode,
  type EvalResult,
  MemoryStore,
  RateLimitConfigError,
  type Refund,
  type Rule,
  type Store,
  type StoreOp,
  type StoreRule,
} from '../../../src/index.js';
import { DEADLINE_TICK_MS, type DeadlineClock, Deadlines } from '../../../src/limiter/deadlines.js';
import { shareOf } from '../../../src/limiter/failure-policy.js';

const errors = {
  silent: (ms: number) => new Error(`silent ${ms}`),
  slow: (ms: number, connecting: boolean) => new Error(`${connecting ? 'connecting' : 'slow'} ${ms}`),
};

/** A store's liveness as the test sets it. */
class Liveness implements ConnectionLiveness {
  first: Promise<void> | undefined;
  sinceMs: number | undefined;
  connecting(): Promise<void> | undefined {
    return this.first;
  }
  silentSinceMs(): number | undefined {
    return this.sinceMs;
  }
}

/** A promise that settles when the test says so. */
function pending<T>(): { promise: Promise<T>; resolve(value: T): void } {
  let resolve!: (value: T) => void;
  const promise = new Promise<T>((r) => {
    resolve = r;
  });
  return { promise, resolve };
}

/** A raced call, watched: `result` is its value or its error's message once it has settled. */
function watch<T>(promise: Promise<T>): { result: T | string | undefined; settled: Promise<T | string> } {
  const watched: { result: T | string | undefined; settled: Promise<T | string> } = {
    result: undefined,
    settled: promise.then(
      (value) => (watched.result = value),
      (error: Error) => (watched.result = error.message),
    ),
  };
  return watched;
}

/** Lets the calls a check settled run their handlers: every queued microtask runs before setImmediate. */
function settle(): Promise<void> {
  return new Promise((resolve) => setImmediate(resolve));
}

/**
 * The deadlines' clock, stepped by the test: `tick()` moves time on by one `DEADLINE_TICK_MS` (or by
 * `ms`) and runs one check, as the ticker does when this process gets the CPU.
 */
class SteppedClock implements DeadlineClock {
  nowMs = 1_000_000;
  ticking = false;
  deadlines: Deadlines | undefined;
  now(): number {
    return this.nowMs;
  }
  every(): () => void {
    this.ticking = true;
    return () => {
      this.ticking = false;
    };
  }
  async tick(ms = DEADLINE_TICK_MS): Promise<void> {
    this.nowMs += ms;
    this.deadlines?.check();
    await settle();
  }
  /** Ticks until `ms` has passed. */
  async run(ms: number, eachTick: () => void = () => {}): Promise<void> {
    for (let i = 0; i < ms / DEADLINE_TICK_MS; i++) {
      eachTick();
      await this.tick();
    }
  }
}

/** Deadlines on a stepped clock. */
function stepped(
  silentMs: number,
  maxWaitMs: number,
  liveness: ConnectionLiveness | undefined,
): { deadlines: Deadlines; clock: SteppedClock } {
  const clock = new SteppedClock();
  const deadlines = new Deadlines(silentMs, maxWaitMs, liveness, errors, clock);
  clock.deadlines = deadlines;
  return { deadlines, clock };
}

describe('failure policy: slow or failed', () => {
  it('a silent store (calls outstanding, no answer) fails a call that has waited storeTimeout', async () => {
    const liveness = new Liveness();
    const { deadlines, clock } = stepped(50, 10_000, liveness);
    liveness.sinceMs = clock.now();
    const call = watch(deadlines.race(new Promise(() => {})));
    expect(clock.ticking).to.equal(true);
    await clock.run(40);
    expect(call.result).to.equal(undefined);
    await clock.run(10);
    expect(call.result).to.equal('silent 50');
    // Nothing pending: the next check stops the ticker.
    await clock.tick();
    expect(clock.ticking).to.equal(false);
  });

  it('a store answering other calls is waited for past storeTimeout, up to storeMaxWait', async () => {
    const liveness = new Liveness();
    const { deadlines, clock } = stepped(50, 2000, liveness);
    // Answers keep coming (other calls of this process, sent earlier), none for this call.
    const answering = () => {
      liveness.sinceMs = clock.now();
    };
    answering();
    const answered = pending<string>();
    const first = watch(deadlines.race(answered.promise));
    const never = watch(deadlines.race(new Promise<string>(() => {})));
    // Six times storeTimeout: still waiting, then answered.
    await clock.run(300, answering);
    expect(first.result).to.equal(undefined);
    answered.resolve('decided by the store');
    expect(await first.settled).to.equal('decided by the store');
    await clock.run(1690, answering);
    expect(never.result).to.equal(undefined);
    await clock.run(10, answering);
    expect(never.result).to.equal('slow 2000');
  });

  it('a call still in this process (nothing outstanding in the store) is not the store being silent', async () => {
    const liveness = new Liveness();
    const { deadlines, clock } = stepped(50, 300, liveness);
    liveness.sinceMs = undefined;
    const queued = pending<string>();
    const call = watch(deadlines.race(queued.promise));
    await clock.run(150);
    expect(call.result).to.equal(undefined);
    queued.resolve('sent and answered');
    expect(await call.settled).to.equal('sent and answered');
  });

  it('a call waiting for the first connection is not failed by silence; storeMaxWait ends the wait', async () => {
    const liveness = new Liveness();
    const { deadlines, clock } = stepped(50, 300, liveness);
    liveness.first = new Promise(() => {});
    // Even an old outstanding call (a clock read sent before the connection) does not count.
    liveness.sinceMs = clock.now() - 10_000;
    const connected = pending<string>();
    const early = watch(deadlines.race(connected.promise));
    const late = watch(deadlines.race(new Promise<string>(() => {})));
    await clock.run(150);
    expect(early.result).to.equal(undefined);
    connected.resolve('decided once connected');
    expect(await early.settled).to.equal('decided once connected');
    await clock.run(140);
    expect(late.result).to.equal(undefined);
    await clock.run(10);
    expect(late.result).to.equal('connecting 300');
  });

  it('the time this process could not run does not count as the store being silent', async () => {
    const liveness = new Liveness();
    const { deadlines, clock } = stepped(100, 10_000, liveness);
    liveness.sinceMs = clock.now();
    const answered = pending<string>();
    const call = watch(deadlines.race(answered.promise));
    await clock.tick();
    // This process busy for three times storeTimeout (its own work, or no core to run on): the next
    // check comes that much later. The store's reply would be waiting in the socket, and the store, on
    // the same cores, held up alike.
    await clock.tick(300);
    await clock.tick();
    expect(call.result).to.equal(undefined);
    answered.resolve('answered after the stall');
    expect(await call.settled).to.equal('answered after the stall');
  });

  it('a store silent through a stall still fails once its silence adds up to storeTimeout', async () => {
    const liveness = new Liveness();
    const { deadlines, clock } = stepped(100, 10_000, liveness);
    liveness.sinceMs = clock.now();
    const call = watch(deadlines.race(new Promise(() => {})));
    await clock.tick();
    await clock.tick(300);
    // 10 ms, then at most two ticks' worth for the stall: 30 ms of silence counted so far.
    await clock.run(60);
    expect(call.result).to.equal(undefined);
    await clock.run(10);
    expect(call.result).to.equal('silent 100');
  });

  it('without liveness every call fails storeTimeout after it was made', async () => {
    const { deadlines, clock } = stepped(50, 10_000, undefined);
    const call = watch(deadlines.race(new Promise(() => {})));
    await clock.run(40);
    expect(call.result).to.equal(undefined);
    await clock.run(10);
    expect(call.result).to.equal('silent 50');
  });
});

/** A shared store that always fails, as Redis does while it is down. */
function downStore(): Store {
  const down = () =>
    Promise.reject(Object.assign(new Error('connect ECONNREFUSED'), { code: 'ECONNREFUSED' }));
  return {
    local: false,
    now: () => Date.now(),
    evaluate: (): Promise<EvalResult> => down(),
    refund: down,
    reset: down,
    locked: down,
    close: async () => {},
  };
}

describe("failure policy: the insurance store's share of each limit", () => {
  const admittedOf = async (rule: Rule, share: number | undefined, attempts: number) => {
    const limiter = createLimiter({
      store: downStore(),
      rules: [rule],
      ...(share === undefined ? {} : { insurance: { share } }),
    });
    let admitted = 0;
    for (let i = 0; i < attempts; i++) if ((await limiter.consume(rule.name, 'k')).allowed) admitted++;
    await limiter.close();
    return admitted;
  };

  it('admits the share of the limit, rounded down, at least 1; the whole limit by default', async () => {
    const rule: Rule = { name: 'api', key: 'ip', limit: 10, window: { type: 'fixed', size: '1h' } };
    expect(await admittedOf(rule, undefined, 30)).to.equal(10);
    expect(await admittedOf(rule, 0.25, 30)).to.equal(2);
    expect(await admittedOf(rule, 0.5, 30)).to.equal(5);
    expect(await admittedOf({ ...rule, limit: 1 }, 0.1, 30)).to.equal(1);
  });

  it('cuts an explicit burst of a token bucket and GCRA too', async () => {
    for (const type of ['token-bucket', 'gcra'] as const) {
      const rule: Rule = { name: 'api', key: 'ip', limit: 10, window: { type, size: '1h', burst: 8 } };
      expect(await admittedOf(rule, 0.5, 30), type).to.equal(4);
    }
  });

  it('rounds as written, not as floating point does (100 x 0.29 is 29)', () => {
    expect(shareOf(100, 0.29)).to.equal(29);
    expect(shareOf(1000, 0.25)).to.equal(250);
    expect(shareOf(3, 0.25)).to.equal(1);
  });
});

describe('failure policy options', () => {
  const rules: Rule[] = [{ name: 'api', key: 'ip', limit: 10, window: { type: 'fixed', size: '1h' } }];
  const refused = (options: Record<string, unknown>): RateLimitConfigError => {
    try {
      createLimiter({ rules, ...options });
    } catch (error) {
      expect(error).to.be.an.instanceOf(RateLimitConfigError);
      return error as RateLimitConfigError;
    }
    throw new Error(`accepted ${JSON.stringify(options)}`);
  };

  it('refuses a share outside (0, 1], naming it and what it is for', () => {
    for (const share of [0, -0.5, 1.5, Number.NaN, '0.5', Number.POSITIVE_INFINITY]) {
      const error = refused({ insurance: { share } });
      expect(error.code).to.equal('ERR_OPTION');
      expect(error.message).to.match(/insurance\.share must be a number above 0 and at most 1/);
    }
    expect(refused({ insurance: 0.5 }).message).to.match(
      /insurance must be an object such as \{ share: 0\.25 \}/,
    );
  });

  it('refuses a misspelt field and an insurance option beside another policy', () => {
    const typo = refused({ insurance: { shares: 0.5 } });
    expect(typo.code).to.equal('ERR_UNKNOWN_FIELD');
    expect(typo.message).to.match(/'insurance\.shares'.*did you mean 'insurance\.share'/);
    expect(refused({ onStoreError: 'deny', insurance: { share: 0.5 } }).message).to.match(
      /insurance applies with onStoreError 'insurance' only/,
    );
    expect(refused({ storeMaxWiat: '5s' }).message).to.match(/did you mean 'storeMaxWait'/);
  });

  it('refuses a storeMaxWait shorter than storeTimeout, or not a duration', () => {
    const shorter = refused({ storeTimeout: '1s', storeMaxWait: '500ms' });
    expect(shorter.message).to.match(/storeMaxWait must be at least storeTimeout \(1000 ms\), got '500ms'/);
    expect(refused({ storeMaxWait: 'soon' }).code).to.equal('ERR_DURATION');
  });

  it('accepts the documented forms', async () => {
    const limiter = createLimiter({
      rules,
      storeTimeout: '250ms',
      storeMaxWait: '5s',
      insurance: { share: 0.25 },
    });
    expect((await limiter.consume('api', 'k')).allowed).to.equal(true);
    await limiter.close();
  });
});

/** A local store of the test's own (no MemoryStore class): counts its calls, throws while told to. */
class CountingSyncStore implements Store {
  readonly local = true;
  readonly inner = new MemoryStore();
  syncCalls = 0;
  asyncCalls = 0;
  fault: Error | undefined;
  closed = false;
  now(): number {
    return this.inner.now();
  }
  evaluateSync(ops: readonly StoreOp[], mode: EvalMode): EvalResult {
    this.syncCalls++;
    if (this.fault !== undefined) throw this.fault;
    return this.inner.evaluateSync(ops, mode);
  }
  evaluate(ops: readonly StoreOp[], mode: EvalMode): Promise<EvalResult> {
    this.asyncCalls++;
    if (this.fault !== undefined) return Promise.reject(this.fault);
    return this.inner.evaluate(ops, mode);
  }
  refund = (refunds: readonly Refund[]) => this.inner.refund(refunds);
  reset = (rule: StoreRule, key: string, options?: { keepLock?: boolean }) =>
    this.inner.reset(rule, key, options);
  locked = (rule: StoreRule, limit: number) => this.inner.locked(rule, limit);
  close = () => {
    this.closed = true;
    return this.inner.close();
  };
}

describe('failure policy: a synchronous store (Store.evaluateSync)', () => {
  const rules: Rule[] = [{ name: 'api', key: 'ip', limit: 2, window: { type: 'fixed', size: '1h' } }];

  it('decides a local store that declares evaluateSync through it, whatever its class', async () => {
    const store = new CountingSyncStore();
    const limiter = createLimiter({ store, rules });
    const answers = [];
    for (let i = 0; i < 3; i++) answers.push((await limiter.consume('api', 'k')).allowed);
    expect(answers).to.deep.equal([true, true, false]);
    expect([store.syncCalls, store.asyncCalls]).to.deep.equal([3, 0]);
    await limiter.close();
  });

  it("keeps a synchronous store's fault in health and rejects the decision, never throwing", async () => {
    const store = new CountingSyncStore();
    const limiter = createLimiter({ store, rules });
    store.fault = new Error('disk full');
    let threw = false;
    let decided: Promise<unknown> | undefined;
    try {
      decided = limiter.consume('api', 'k');
    } catch {
      threw = true;
    }
    expect(threw).to.equal(false);
    let rejected: unknown;
    await decided?.catch((error) => {
      rejected = error;
    });
    expect(rejected).to.equal(store.fault);
    const down = await limiter.health();
    expect(down.state).to.equal('down');
    expect(down.lastError?.message).to.equal('disk full');
    store.fault = undefined;
    expect((await limiter.consume('api', 'k')).allowed).to.equal(true);
    const up = await limiter.health();
    expect(up.state).to.equal('ok');
    expect(up.lastError?.message).to.equal('disk full');
    await limiter.close();
  });

  it('rejects, never throws, when a listener of a synchronous decision throws', async () => {
    const limiter = createLimiter({ rules: [{ ...(rules[0] as Rule), limit: 1 }] });
    limiter.on('limited', () => {
      throw new Error('listener failed');
    });
    await limiter.consume('api', 'k');
    let decided: Promise<unknown> | undefined;
    expect(() => {
      decided = limiter.consume('api', 'k');
    }).not.to.throw();
    let rejected: unknown;
    await decided?.catch((error: Error) => {
      rejected = error.message;
    });
    expect(rejected).to.equal('listener failed');
    expect((await limiter.health()).state).to.equal('ok');
    await limiter.close();
  });

  it("sends what a shared store's evaluateSync declines (or throws on) to evaluate, under the policy", async () => {
    let asked = 0;
    const declines = { ...downStore(), evaluateSync: () => void asked++ };
    const throws = { ...downStore(), evaluateSync: (): EvalResult => expect.fail('its own fault') };
    for (const store of [declines, throws]) {
      const limiter = createLimiter({ store, rules });
      const seen: string[] = [];
      limiter.observe({ decision: (_decision, info) => seen.push(info.source) });
      expect((await limiter.consume('api', 'k')).allowed).to.equal(true);
      expect(seen).to.deep.equal(['insurance']);
      expect((await limiter.health()).state).to.equal('down');
      await limiter.close();
    }
    expect(asked).to.equal(1);
  });

  it("takes a shared store's synchronous answer (leased units) without a call, and is not made healthy by it", async () => {
    const inner = new MemoryStore();
    let calls = 0;
    const store: Store = {
      ...downStore(),
      evaluate: (ops, mode) => {
        calls++;
        return downStore().evaluate(ops, mode);
      },
      evaluateSync: (ops, mode) => (calls > 0 ? inner.evaluateSync(ops, mode) : undefined),
    };
    const limiter = createLimiter({ store, rules: [{ ...rules[0], limit: 100 } as Rule] });
    const seen: string[] = [];
    limiter.observe({ decision: (_decision, info) => seen.push(info.source) });
    await limiter.consume('api', 'k');
    for (let i = 0; i < 3; i++) expect((await limiter.consume('api', 'k')).allowed).to.equal(true);
    expect(calls).to.equal(1);
    expect(seen).to.deep.equal(['insurance', 'store', 'store', 'store']);
    expect((await limiter.health()).state).to.equal('down');
    await limiter.close();
  });
});

describe('failure policy: the insurance store comes from the options (insurance.store)', () => {
  const rule: Rule = { name: 'api', key: 'ip', limit: 3, window: { type: 'fixed', size: '1h' } };
  const refusal = (insurance: unknown, options: Record<string, unknown> = {}): string => {
    try {
      createLimiter({ store: downStore(), rules: [rule], insurance, ...options } as never);
    } catch (error) {
      expect(error).to.be.an.instanceOf(RateLimitConfigError);
      return (error as RateLimitConfigError).message;
    }
    throw new Error(`accepted ${String(insurance)}`);
  };

  it('decides on the store given while the shared store fails, at its share, and closes it with the limiter', async () => {
    const given = new CountingSyncStore();
    const limiter = createLimiter({ store: downStore(), rules: [rule], insurance: { store: given } });
    const answers = [];
    for (let i = 0; i < 4; i++) answers.push((await limiter.consume('api', 'k')).allowed);
    expect(answers).to.deep.equal([true, true, true, false]);
    expect(given.syncCalls).to.equal(4);
    expect(given.inner.size, 'the given store holds the key').to.equal(1);
    await limiter.close();
    expect(given.closed).to.equal(true);
  });

  it('keeps its share with a store given (a memory store of its own bound)', async () => {
    const given = new MemoryStore({ maxKeys: 10 });
    const limiter = createLimiter({
      store: downStore(),
      rules: [{ ...rule, limit: 10 }],
      insurance: { share: 0.5, store: given },
    });
    let admitted = 0;
    for (let i = 0; i < 20; i++) if ((await limiter.consume('api', 'k')).allowed) admitted++;
    expect(admitted).to.equal(5);
    await limiter.close();
  });

  it('refuses a store that cannot decide synchronously, the shared store itself, and a misspelt field', () => {
    expect(refusal({ store: downStore() })).to.equal(
      'insurance.store must be a local store that decides synchronously (declares evaluateSync), such as ' +
        'new MemoryStore({ maxKeys: 50000 }), got an object without it',
    );
    // A shared store may declare it (leasing) and still decline: never an insurance store.
    expect(refusal({ store: { ...downStore(), evaluateSync: () => undefined } })).to.match(
      /, got a shared store \(local false\)$/,
    );
    expect(refusal({ store: 5 })).to.match(/insurance\.store must be a local store .*, got 5$/);
    class RemoteStore {}
    expect(refusal({ store: new RemoteStore() })).to.match(/, got a RemoteStore without it$/);
    const shared = {
      ...downStore(),
      local: true,
      evaluateSync: (): EvalResult => ({ nowMs: 0, results: [] }),
    };
    expect(refusal({ store: shared }, { store: shared })).to.equal(
      'insurance.store must be a store of its own, not the store it stands in for',
    );
    expect(refusal({ stor: new MemoryStore() })).to.match(
      /'insurance\.stor'.*did you mean 'insurance\.store'/,
    );
    expect(refusal({ store: new MemoryStore() }, { onStoreError: 'allow' })).to.match(
      /insurance applies with onStoreError 'insurance' only/,
    );
  });
});
