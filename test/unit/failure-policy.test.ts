// The failure policy's rules without a server: what counts as a failed store (silence) and what as a slow
// one (answers to other calls, a first connection underway), the insurance store's share, and their options.
import { expect } from 'chai';
import {
  createLimiter,
  type EvalResult,
  RateLimitConfigError,
  type Rule,
  type Store,
  type StoreLiveness,
} from '../../src/index.js';
import { Deadlines } from '../../src/limiter/deadlines.js';
import { shareOf } from '../../src/limiter/failure-policy.js';

const errors = {
  silent: (ms: number) => new Error(`silent ${ms}`),
  slow: (ms: number, connecting: boolean) => new Error(`${connecting ? 'connecting' : 'slow'} ${ms}`),
};

/** A store's liveness as the test sets it. */
class Liveness implements StoreLiveness {
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

/** How a raced call ended: its value, or its error's message. */
function outcome<T>(promise: Promise<T>): Promise<T | string> {
  return promise.then(
    (value) => value,
    (error: Error) => error.message,
  );
}

/** Resolves after `ticks` rounds of the deadline checker (each at least its 10 ms tick). */
function afterTicks(ticks: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ticks * 10 + 5));
}

describe('failure policy: slow or failed', () => {
  it('a silent store (calls outstanding, no answer) fails a call that has waited storeTimeout', async () => {
    const liveness = new Liveness();
    const deadlines = new Deadlines(50, 10_000, liveness, errors);
    liveness.sinceMs = performance.now();
    expect(await outcome(deadlines.race(new Promise(() => {})))).to.equal('silent 50');
  });

  it('a store answering other calls is waited for past storeTimeout, up to storeMaxWait', async () => {
    const liveness = new Liveness();
    const deadlines = new Deadlines(50, 2000, liveness, errors);
    // Answers keep coming (other calls of this process, sent earlier), none for this call.
    liveness.sinceMs = performance.now();
    const answers = setInterval(() => {
      liveness.sinceMs = performance.now();
    }, 2);
    try {
      const answered = pending<string>();
      const first = outcome(deadlines.race(answered.promise));
      const never = outcome(deadlines.race(new Promise<string>(() => {})));
      // Six times storeTimeout: still waiting, then answered.
      await afterTicks(30);
      answered.resolve('decided by the store');
      expect(await first).to.equal('decided by the store');
      expect(await never).to.equal('slow 2000');
    } finally {
      clearInterval(answers);
    }
  });

  it('a call still in this process (nothing outstanding in the store) is not the store being silent', async () => {
    const liveness = new Liveness();
    const deadlines = new Deadlines(50, 300, liveness, errors);
    liveness.sinceMs = undefined;
    const queued = pending<string>();
    const call = outcome(deadlines.race(queued.promise));
    await afterTicks(15);
    queued.resolve('sent and answered');
    expect(await call).to.equal('sent and answered');
  });

  it('a call waiting for the first connection is not failed by silence; storeMaxWait ends the wait', async () => {
    const liveness = new Liveness();
    const deadlines = new Deadlines(50, 300, liveness, errors);
    liveness.first = new Promise(() => {});
    // Even an old outstanding call (a clock read sent before the connection) does not count.
    liveness.sinceMs = performance.now() - 10_000;
    const connected = pending<string>();
    const early = outcome(deadlines.race(connected.promise));
    const late = outcome(deadlines.race(new Promise<string>(() => {})));
    await afterTicks(15);
    connected.resolve('decided once connected');
    expect(await early).to.equal('decided once connected');
    expect(await late).to.equal('connecting 300');
  });

  it('the time this process could not run does not count as the store being silent', async () => {
    const liveness = new Liveness();
    const deadlines = new Deadlines(100, 10_000, liveness, errors);
    liveness.sinceMs = performance.now();
    const answered = pending<string>();
    const call = outcome(deadlines.race(answered.promise));
    await afterTicks(1);
    // This process busy for three times storeTimeout (its own work, or no core to run on): the store's
    // reply would be waiting in the socket, and the store, on the same cores, held up alike.
    const busyUntil = performance.now() + 300;
    while (performance.now() < busyUntil);
    await afterTicks(2);
    answered.resolve('answered after the stall');
    expect(await call).to.equal('answered after the stall');
  });

  it('without liveness every call fails storeTimeout after it was made', async () => {
    const deadlines = new Deadlines(50, 10_000, undefined, errors);
    expect(await outcome(deadlines.race(new Promise(() => {})))).to.equal('silent 50');
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
    clear: down,
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
