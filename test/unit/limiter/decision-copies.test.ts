// A copy of a decision (structured-cloned, or parsed from JSON) reports, settles and releases what the decision itself would.
import { expect } from 'chai';
import { createLimiter, type Decision, type Limiter, MemoryStore, type Rule } from '../../../src/index.js';

const copies: Array<[string, (d: Decision) => Decision]> = [
  ['structuredClone', (d) => structuredClone(d)],
  ['JSON', (d) => JSON.parse(JSON.stringify(d)) as Decision],
];

const limiters: Limiter[] = [];
function limiterOf(rules: Rule[]): Limiter {
  const limiter = createLimiter({ store: new MemoryStore(), rules });
  limiters.push(limiter);
  return limiter;
}

const req = () => ({ method: 'POST', path: '/', headers: {}, user: 'u1' });

describe('decision copies', () => {
  afterEach(async () => {
    await Promise.all(limiters.splice(0).map((l) => l.close()));
  });

  for (const [how, copy] of copies) {
    describe(how, () => {
      it('report(copy) gives the reservation back once, as report(decision) does', async () => {
        const l = limiterOf([
          {
            name: 'failures',
            key: 'user',
            limit: 3,
            window: { type: 'fixed', size: '1h' },
            countOn: 'failure',
          },
        ]);
        const decision = await l.check(req());
        expect((await l.status('failures', 'u1')).count).to.equal(1);
        await l.report(copy(decision), 'success');
        expect((await l.status('failures', 'u1')).count).to.equal(0);
        // Reported already: neither the decision nor another copy gives anything back again.
        await l.check(req());
        await l.report(decision, 'success');
        await l.report(copy(decision), 'success');
        expect((await l.status('failures', 'u1')).count).to.equal(1);
      });

      it('settle(copy) replaces the estimate by the actual cost, once', async () => {
        const l = limiterOf([
          {
            name: 'tokens',
            key: 'user',
            limit: 10,
            window: { type: 'fixed', size: '1h' },
            cost: 4,
            settle: true,
          },
        ]);
        const decision = await l.check(req());
        const settled = await l.settle(copy(decision), 1);
        expect(settled.rules[0]).to.include({ rule: 'tokens', count: 1, remaining: 9 });
        expect((await l.status('tokens', 'u1')).count).to.equal(1);
        // The decision itself, or a copy of the settled one, answers as the first settle did.
        expect(await l.settle(decision, 7)).to.equal(settled);
        expect(await l.settle(copy(settled), 0)).to.equal(settled);
        expect((await l.status('tokens', 'u1')).count).to.equal(1);
      });

      it('release(copy) frees the slot, once', async () => {
        const l = limiterOf([
          { name: 'slots', key: 'user', limit: 1, window: { type: 'concurrency', lease: '1m' } },
        ]);
        const decision = await l.check(req());
        expect((await l.check(req())).allowed).to.equal(false);
        await l.release(copy(decision));
        expect((await l.status('slots', 'u1')).count).to.equal(0);
        const next = await l.check(req());
        expect(next.allowed).to.equal(true);
        await l.release(decision);
        expect((await l.status('slots', 'u1')).count).to.equal(1);
        await l.release(next);
      });
    });
  }
});
