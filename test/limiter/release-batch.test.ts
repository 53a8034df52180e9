// Releases to a store that batches its refunds per turn (`refundInto`, as the Redis store does) share one
// promise and one deadline per turn. These check the batch's bookkeeping with a store whose calls the test
// settles itself: every release is handed to the store at once, the batch settles only when the store has
// answered every call of it, and a failure of any one call has every release of the batch tried again.
import { expect } from 'chai';
import {
  createLimiter,
  type Decision,
  type Limiter,
  MemoryStore,
  type Refund,
  type Settler,
  type Store,
  type StoreErrorEvent,
} from '../../src/index.js';

/** One refundInto call, held until the test settles it. */
interface Call {
  refunds: readonly Refund[];
  into: Settler<void>;
}

/**
 * A memory store that calls itself shared and takes refunds through `refundInto`, each call kept in
 * `calls` for the test to settle (`answer`: refunded in the store, then resolved; `fail`: rejected).
 * `failAtOnce`: the next call is rejected inside refundInto, before it returns.
 */
function batchingStore(): {
  store: Store;
  calls: Call[];
  answer(call: Call): Promise<void>;
  fail(call: Call, message: string): void;
  failAtOnce(message: string): void;
  asked(times: number): Promise<void>;
} {
  const inner = new MemoryStore();
  const calls: Call[] = [];
  const waiters: Array<{ times: number; done: () => void }> = [];
  let failNext: string | undefined;
  const store = new Proxy(inner, {
    get(target, prop) {
      if (prop === 'local') return false;
      if (prop === 'refundInto') {
        return (refunds: readonly Refund[], into: Settler<void>) => {
          calls.push({ refunds, into });
          for (const w of waiters.filter((w) => w.times <= calls.length)) w.done();
          if (failNext !== undefined) {
            const message = failNext;
            failNext = undefined;
            into.reject(new Error(message));
          }
        };
      }
      const value = Reflect.get(target, prop, target);
      return typeof value === 'function' ? value.bind(target) : value;
    },
  }) as Store;
  return {
    store,
    calls,
    answer: async (call) => {
      await inner.refund(call.refunds);
      call.into.resolve();
    },
    fail: (call, message) => call.into.reject(new Error(message)),
    failAtOnce: (message) => {
      failNext = message;
    },
    asked: (times) =>
      new Promise<void>((done) => {
        if (calls.length >= times) done();
        else waiters.push({ times, done });
      }),
  };
}

function limiterOn(store: Store, lease = '60s'): Limiter {
  return createLimiter({
    store,
    storeTimeout: 60_000,
    rules: [{ name: 'exports', key: 'user', limit: 3, window: { type: 'concurrency', lease } }],
  });
}

async function held(limiter: Limiter, count: number): Promise<Decision[]> {
  const decisions: Decision[] = [];
  for (let i = 0; i < count; i++) {
    const d = await limiter.check(request);
    expect(d.allowed, `slot ${i + 1} taken`).to.equal(true);
    decisions.push(d);
  }
  return decisions;
}

const request = { method: 'POST', path: '/exports', headers: {}, user: 'u1' };

const inFlight = async (limiter: Limiter) => (await limiter.status('exports', 'u1')).count;

describe('releases to a store that batches refunds per turn', () => {
  it('share one promise in a turn, each handed to the store at once, settled once the store answered all', async () => {
    const { store, calls, answer } = batchingStore();
    const limiter = limiterOn(store);
    const storeCalls: string[] = [];
    limiter.observe({ storeCall: (info) => storeCalls.push(info.operation) });
    try {
      const [a, b, c] = (await held(limiter, 3)) as [Decision, Decision, Decision];
      const released = limiter.release(a);
      const releases = [released, limiter.release(b), limiter.release(c)];
      expect(releases[1], 'one promise for the turn').to.equal(releases[0]);
      expect(releases[2]).to.equal(releases[0]);
      expect(
        calls.map((call) => call.refunds.length),
        'each release handed to the store at once',
      ).to.deep.equal([1, 1, 1]);
      let settled = false;
      void released.then(() => {
        settled = true;
      });
      await answer(calls[0] as Call);
      await answer(calls[1] as Call);
      await new Promise((resolve) => setImmediate(resolve));
      expect(settled, 'not settled while a call of the batch is out').to.equal(false);
      await answer(calls[2] as Call);
      await released;
      expect(
        storeCalls.filter((op) => op === 'release'),
        'one store call told for the batch',
      ).to.deep.equal(['release']);
      expect(await inFlight(limiter)).to.equal(0);
      // A release in a later turn starts a batch of its own.
      const [d] = (await held(limiter, 1)) as [Decision];
      const later = limiter.release(d);
      expect(later).to.not.equal(released);
      await answer(calls[3] as Call);
      await later;
      expect(await inFlight(limiter)).to.equal(0);
      expect(limiter.release(d), 'released already').to.equal(limiter.release(d));
    } finally {
      await limiter.close();
    }
  });

  it('tries again the releases of a batch the store did not answer when one of its store calls failed, and reports the failure once', async () => {
    const { store, calls, answer, fail, asked } = batchingStore();
    const limiter = limiterOn(store, '3s');
    const errors: StoreErrorEvent[] = [];
    limiter.on('storeError', (event) => errors.push(event));
    const told: string[] = [];
    limiter.observe({ slots: (event) => told.push(event.change) });
    try {
      const [a, b] = (await held(limiter, 2)) as [Decision, Decision];
      const released = limiter.release(a);
      limiter.release(b);
      await answer(calls[0] as Call);
      fail(calls[1] as Call, 'store down for a moment');
      // The release resolves: its failure is the process's to handle, not the caller's.
      await released;
      expect(errors.map((e) => [e.operation, (e.error as Error).message])).to.deep.equal([
        ['release', 'store down for a moment'],
      ]);
      expect(await inFlight(limiter), 'the failed one still held').to.equal(1);
      // The renewal (a third of the lease later) sends the failed one again, not the one the store answered.
      await asked(3);
      expect(
        calls.slice(2).map((call) => call.refunds.map((r) => r.receipt)),
        'the failed one tried again',
      ).to.deep.equal([[b.rules[0]?.slot]]);
      await answer(calls[2] as Call);
      expect(await inFlight(limiter)).to.equal(0);
      expect(told, 'each told released once').to.deep.equal(['held', 'held', 'released', 'released']);
      expect((await limiter.check(request)).count, 'a slot taken after both were freed').to.equal(1);
    } finally {
      await limiter.close();
    }
  });

  it('settles a batch whose store call failed at once, and sends a later release of the turn in a batch of its own', async () => {
    const { store, calls, answer, failAtOnce, asked } = batchingStore();
    const limiter = limiterOn(store, '3s');
    const errors: StoreErrorEvent[] = [];
    limiter.on('storeError', (event) => errors.push(event));
    try {
      const [a, b] = (await held(limiter, 2)) as [Decision, Decision];
      failAtOnce('refused at once');
      const first = limiter.release(a);
      const second = limiter.release(b);
      expect(second, 'not joined to a batch that has settled').to.not.equal(first);
      await answer(calls[1] as Call);
      await Promise.all([first, second]);
      expect(errors.map((e) => (e.error as Error).message)).to.deep.equal(['refused at once']);
      expect(await inFlight(limiter), 'the second freed, the first still held').to.equal(1);
      await asked(3);
      expect(calls[2]?.refunds.map((r) => r.receipt)).to.deep.equal([a.rules[0]?.slot]);
      await answer(calls[2] as Call);
      expect(await inFlight(limiter)).to.equal(0);
    } finally {
      await limiter.close();
    }
  });
});
