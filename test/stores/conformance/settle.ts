// Conformance: settled costs on every window type and store: the estimate reserved at check, replaced by the actual cost.
import { expect } from 'chai';
import { RateLimitRequestError, type Rule } from '../../../src/index.js';
import { useLimiters } from './limits.js';
import { type StoreUnderTest, WINDOWS } from './suite.js';

const req = () => ({ method: 'POST', path: '/complete', headers: {}, user: 'u1' });

/** 10 units per window, each request estimated at 4 and settled later; a plain rule beside it. */
const rules = (window: Rule['window']): Rule[] => [
  { name: 'tokens', key: 'user', limit: 10, window, cost: 4, settle: true },
  { name: 'requests', key: 'user', limit: 100, window: { type: 'fixed', size: '1h' } },
];

export function settleSuite(target: StoreUnderTest): void {
  describe(`conformance: settled costs, ${target.name}`, () => {
    const { clock, limiter } = useLimiters(target);
    const count = async (l: { status(r: string, k: string): Promise<{ count: number }> }, rule = 'tokens') =>
      (await l.status(rule, 'u1')).count;

    for (const [type, window] of Object.entries(WINDOWS)) {
      describe(`${type} window`, () => {
        it('a cost above the estimate is added even past the limit, and later requests are denied', async () => {
          const l = await limiter(rules(window));
          const a = await l.check(req());
          await l.check(req());
          const settled = await l.settle(a, 9);
          expect(settled.allowed).to.equal(true);
          expect(settled.rules[0]).to.include({ rule: 'tokens', allowed: true, count: 13, remaining: 0 });
          // The other rule is not settled: its figures are the decision's.
          expect(settled.rules[1]).to.deep.equal(a.rules[1]);
          expect(await count(l)).to.equal(13);
          expect((await l.check(req())).allowed).to.equal(false);
        });

        it('a cost below the estimate gives the difference back; never settled, the estimate stands', async () => {
          const l = await limiter(rules(window));
          const a = await l.check(req());
          await l.check(req());
          expect(await count(l)).to.equal(8);
          const settled = await l.settle(a, 1);
          expect(settled.rules[0]).to.include({ count: 5, remaining: 5 });
          expect(await count(l)).to.equal(5);
        });

        it('settling twice changes nothing the second time and answers as the first', async () => {
          const l = await limiter(rules(window));
          const a = await l.check(req());
          const [first, second] = await Promise.all([l.settle(a, 6), l.settle(a, 0)]);
          expect(second).to.equal(first);
          expect(await l.settle(first, 2)).to.equal(first);
          expect(await count(l)).to.equal(6);
        });

        it('settling a denied decision changes nothing', async () => {
          const l = await limiter(rules(window));
          await l.check(req());
          await l.check(req());
          const denied = await l.check(req());
          expect(denied.allowed).to.equal(false);
          expect(await l.settle(denied, 3)).to.equal(denied);
          expect(await count(l)).to.equal(8);
        });

        for (const bad of [-1, 1.5, Number.NaN, Number.POSITIVE_INFINITY, '3', null]) {
          it(`a cost of ${String(bad)} is refused with ERR_COST and changes nothing; the decision can still settle`, async () => {
            const l = await limiter(rules(window));
            const a = await l.check(req());
            let error: unknown;
            try {
              await l.settle(a, bad as number);
            } catch (e) {
              error = e;
            }
            expect(error).to.be.instanceOf(RateLimitRequestError);
            expect(error).to.include({ code: 'ERR_COST' });
            expect(await count(l)).to.equal(4);
            expect((await l.settle(a, 2)).rules[0]).to.include({ count: 2 });
          });
        }
      });
    }

    it('after the window moved, more is charged to the window of now and less gives nothing back', async () => {
      const l = await limiter(rules(WINDOWS.fixed));
      const a = await l.check(req());
      const b = await l.check(req());
      clock().advance(10_000);
      const c = await l.check(req());
      expect(await count(l)).to.equal(4);
      // b reserved 4 in the window that ended: settling it at 0 gives the new window nothing.
      await l.settle(b, 0);
      expect(await count(l)).to.equal(4);
      // a's 5 more are charged now.
      const settled = await l.settle(a, 9);
      expect(settled.rules[0]).to.include({ count: 9 });
      await l.settle(c, 4);
      expect(await count(l)).to.equal(9);
    });

    it('a decision of a limiter without settle rules resolves unchanged, and a bad cost is still refused', async () => {
      const l = await limiter([rules(WINDOWS.fixed)[1] as Rule]);
      const a = await l.check(req());
      expect(await l.settle(a, 50)).to.equal(a);
      expect(await count(l, 'requests')).to.equal(1);
      let error: unknown;
      await l.settle(a, -5).catch((e: unknown) => {
        error = e;
      });
      expect(error).to.include({ code: 'ERR_COST' });
    });
  });
}
