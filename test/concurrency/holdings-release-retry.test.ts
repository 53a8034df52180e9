// A release the store fails (it is down at that moment) is not lost: the slot would otherwise stay held
// until its lease ran out. Holdings tries it again at the next renewals (a third of the lease apart).
import { expect } from 'chai';
import {
  createLimiter,
  MemoryStore,
  type Refund,
  type Store,
  type StoreErrorEvent,
} from '../../src/index.js';

/** A memory store whose first `refund` fails; `refunds` resolves once it has been asked `times` times. */
function failingOnce(): { store: Store; refundsAsked(times: number): Promise<void> } {
  const inner = new MemoryStore();
  let asked = 0;
  const waiters: Array<{ times: number; done: () => void }> = [];
  const store = new Proxy(inner, {
    get(target, prop) {
      if (prop === 'refund') {
        return (refunds: readonly Refund[]) => {
          asked++;
          for (const w of waiters.filter((w) => w.times <= asked)) w.done();
          if (asked === 1) return Promise.reject(new Error('store down for a moment'));
          return target.refund(refunds);
        };
      }
      const value = Reflect.get(target, prop, target);
      return typeof value === 'function' ? value.bind(target) : value;
    },
  }) as Store;
  return {
    store,
    refundsAsked: (times) =>
      new Promise<void>((done) => {
        if (asked >= times) done();
        else waiters.push({ times, done });
      }),
  };
}

describe('a release the store fails', () => {
  it('is reported and tried again at the next renewal, which frees the slot', async () => {
    const { store, refundsAsked } = failingOnce();
    const limiter = createLimiter({
      store,
      rules: [{ name: 'exports', key: 'user', limit: 1, window: { type: 'concurrency', lease: '1s' } }],
    });
    const errors: StoreErrorEvent[] = [];
    limiter.on('storeError', (event) => errors.push(event));
    try {
      const held = await limiter.acquire('exports', 'u1');
      expect(held.allowed).to.equal(true);
      // The release resolves: its failure is the process's to handle, not the caller's.
      await held.release();
      expect(errors.map((e) => [e.operation, (e.error as Error).message])).to.deep.equal([
        ['release', 'store down for a moment'],
      ]);
      expect((await limiter.status('exports', 'u1')).count, 'still held after the failed release').to.equal(
        1,
      );
      // The renewal a third of a lease later sends it again.
      await refundsAsked(2);
      expect((await limiter.status('exports', 'u1')).count, 'freed by the retry').to.equal(0);
      expect((await limiter.acquire('exports', 'u1', { maxWait: 0 })).allowed).to.equal(true);
    } finally {
      await limiter.close();
    }
  });
});
