// The held slots of a limiter (src/limiter/holdings.ts) are found again by the slot ids of a decision's rule
// results: ids that share their low 30 bits (ids 2^30 apart, which an index by those bits once confused) and
// equal ids of two keys are each found and freed alone, also from a copy of the decision.
import { expect } from 'chai';
import { createLimiter, type Decision, type Limiter, MemoryStore } from '../../src/index.js';

/** Slot ids are nowMs × 1024 + n (src/algorithms/concurrency.ts): ids 2^30 apart are 2^20 ms apart. */
const APART_MS = 2 ** 20;

function limiterAt(clock: { now: number }): Limiter {
  return createLimiter({
    store: new MemoryStore({ clock: () => clock.now }),
    rules: [{ name: 'exports', key: 'user', limit: 5, window: { type: 'concurrency', lease: '2h' } }],
  });
}

const request = (user: string) => ({ method: 'POST', path: '/exports', headers: {}, user });
const inFlight = async (limiter: Limiter, user: string) => (await limiter.status('exports', user)).count;

async function take(limiter: Limiter, user: string): Promise<Decision> {
  const decision = await limiter.check(request(user));
  expect(decision.allowed, `a slot for ${user}`).to.equal(true);
  return decision;
}

describe('held slots: found by their ids', () => {
  it('ids 2^30 apart and equal ids of two keys are each released alone, from the decision or a copy', async () => {
    const clock = { now: Date.parse('2026-11-29T00:00:00Z') };
    const limiter = limiterAt(clock);
    try {
      const first = await take(limiter, 'u1');
      const other = await take(limiter, 'u2');
      clock.now += APART_MS;
      const second = await take(limiter, 'u1');
      const [firstId, otherId, secondId] = [first, other, second].map((d) => d.rules[0]?.slot as number) as [
        number,
        number,
        number,
      ];
      expect(otherId, 'equal ids of two keys').to.equal(firstId);
      expect(secondId - firstId, 'ids 2^30 apart').to.equal(2 ** 30);
      expect(await inFlight(limiter, 'u1')).to.equal(2);

      await limiter.release(structuredClone(second));
      expect(await inFlight(limiter, 'u1'), 'the copy released the second slot').to.equal(1);
      expect(await inFlight(limiter, 'u2'), "the other key's slot kept").to.equal(1);
      await limiter.release(second);
      expect(await inFlight(limiter, 'u1'), 'released already: frees nothing more').to.equal(1);

      await limiter.release(first);
      expect(await inFlight(limiter, 'u1')).to.equal(0);
      expect(await inFlight(limiter, 'u2')).to.equal(1);
      await limiter.release(other);
      expect(await inFlight(limiter, 'u2')).to.equal(0);
    } finally {
      await limiter.close();
    }
  });
});
