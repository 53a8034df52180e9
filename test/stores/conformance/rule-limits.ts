// Conformance: rule-wide limits (`limiter.setLimit`, `limiter.limits`), on every window type, concurrency
// included; run on each store that has them.
import { expect } from 'chai';
import { RateLimitConfigError, type RequestInfo, type Rule } from '../../../src/index.js';
import { useLimiters, userReq } from './limits.js';
import { bucketHeldBack, type StoreUnderTest, windowsOf } from './suite.js';

/** Units admitted now to `id` (checks until the first denial). */
async function admitted(l: { check(req: RequestInfo): Promise<{ allowed: boolean }> }, id: string) {
  let n = 0;
  while ((await l.check(userReq(id, 'free'))).allowed) n++;
  return n;
}

export function ruleLimitSuite(target: StoreUnderTest): void {
  describe(`rule-wide limits: ${target.name}`, () => {
    const { limiter, clock } = useLimiters(target);

    for (const [type, window] of windowsOf(target)) {
      it(`${type}: the rule-wide limit holds for every key, a key's override wins over it, null returns to the rule's`, async () => {
        const l = await limiter([{ name: 'r', key: 'user', limit: 2, window }]);
        await l.override('r', 'vip', 5);
        await l.setLimit('r', 4);
        expect(await admitted(l, 'a'), 'a').to.equal(4);
        expect(await admitted(l, 'b'), 'b').to.equal(4);
        expect(await admitted(l, 'vip'), 'vip').to.equal(5);
        const a = await l.status('r', 'a');
        expect([a.limit, a.overridden, a.count]).to.deep.equal([4, true, 4]);
        expect(await l.limits()).to.deep.equal([{ rule: 'r', limit: 4 }]);
        await l.setLimit('r', null);
        expect(await l.limits()).to.deep.equal([]);
        const fresh = await l.check(userReq('c', 'free'));
        expect([fresh.limit, fresh.remaining]).to.deep.equal([2, 1]);
      });
    }

    it('concurrency: the rule-wide limit is the number in flight for every key', async () => {
      const l = await limiter([{ name: 'exports', key: 'user', limit: 1, window: { type: 'concurrency' } }]);
      await l.setLimit('exports', 3);
      const held = [];
      for (let i = 0; i < 3; i++) held.push(await l.check(userReq('u', 'free')));
      expect(held.map((d) => d.allowed)).to.deep.equal([true, true, true]);
      const fourth = await l.check(userReq('u', 'free'));
      expect([fourth.allowed, fourth.limit]).to.deep.equal([false, 3]);
      for (const d of held) await l.release(d);
      await l.setLimit('exports', null);
      expect((await l.check(userReq('u', 'free'))).limit).to.equal(1);
    });

    it('replaces a limit function until cleared, on requests and direct calls', async () => {
      let calls = 0;
      const l = await limiter([
        {
          name: 'plans',
          key: 'user',
          limit: (req) => {
            calls++;
            return (req.user as { plan: string }).plan === 'pro' ? 10 : 4;
          },
          window: { type: 'fixed', size: '1m' },
        },
      ]);
      await l.setLimit('plans', 2);
      const pro = await l.check(userReq('p', 'pro'));
      expect([pro.allowed, pro.limit, pro.remaining]).to.deep.equal([true, 2, 1]);
      const direct = await l.consume('plans', 'd1');
      expect([direct.allowed, direct.limit]).to.deep.equal([true, 2]);
      await l.setLimit('plans', null);
      expect((await l.check(userReq('p2', 'pro'))).limit).to.equal(10);
      expect(calls).to.be.greaterThan(0);
    });

    it("expires after 'for' on the store's clock, and limits() says until when", async () => {
      const l = await limiter([
        { name: 'r', key: 'user', limit: 1, window: { type: 'sliding-log', size: '1m' } },
      ]);
      const start = clock().now;
      await l.setLimit('r', 3, { for: '10s' });
      expect(await l.limits()).to.deep.equal([{ rule: 'r', limit: 3, untilMs: start + 10_000 }]);
      clock().advance(9999);
      expect((await l.status('r', 'u')).limit, 'one ms before').to.equal(3);
      clock().advance(1);
      const after = await l.status('r', 'u');
      expect([after.limit, after.overridden], 'on time').to.deep.equal([1, false]);
      expect(await l.limits()).to.deep.equal([]);
    });

    it('token bucket and gcra without a burst of their own: the capacity follows the rule-wide limit', async () => {
      for (const type of ['token-bucket', 'gcra'] as const) {
        const l = await limiter([{ name: type, key: 'user', limit: 2, window: { type, size: '10s' } }]);
        await l.setLimit(type, 8);
        // Leased, one block is taken at this limit (share 2); on a clock that stands still it keeps its
        // reserved refill: one unit fewer, never one more.
        expect(await admitted(l, 'u'), type).to.be.within(8 - bucketHeldBack(target, type, 8, 10_000), 8);
      }
    });

    it('lowered mid-window: a key past the new limit is denied, what it counted stays counted', async () => {
      const l = await limiter([{ name: 'r', key: 'user', limit: 5, window: { type: 'fixed', size: '1m' } }]);
      expect(await admitted(l, 'a')).to.equal(5);
      await l.setLimit('r', 10);
      expect(await admitted(l, 'a'), 'raised: the rest of 10').to.equal(5);
      await l.setLimit('r', 3);
      const denied = await l.check(userReq('a', 'free'));
      expect([denied.allowed, denied.limit, denied.remaining]).to.deep.equal([false, 3, 0]);
    });

    it('a raised limit admits a key whose denial the deny cache held', async () => {
      const rules: Rule[] = [{ name: 'r', key: 'user', limit: 1, window: { type: 'fixed', size: '1m' } }];
      const a = await limiter(rules, { denyCache: true });
      expect((await a.check(userReq('u', 'free'))).allowed).to.equal(true);
      expect((await a.check(userReq('u', 'free'))).allowed).to.equal(false);
      await a.setLimit('r', 3);
      expect((await a.check(userReq('u', 'free'))).allowed, 'not the cached denial').to.equal(true);
    });

    it('refuses a bad limit (0 included), a bad for, an unknown field or rule, changing nothing', async () => {
      const l = await limiter([{ name: 'r', key: 'user', limit: 2, window: { type: 'gcra', size: '1d' } }]);
      const bad: Array<[unknown, unknown, RegExp]> = [
        [0, undefined, /setLimit: rule "r": limit must be a positive integer or null \(0 is refused/],
        [-1, undefined, /limit must be a positive integer or null/],
        [1.5, undefined, /got 1.5/],
        [Number.NaN, undefined, /got NaN/],
        ['5', undefined, /got '5'/],
        [2 ** 40, undefined, /limit must be at most \d+ for a gcra window/],
        [3, { for: 'soon' }, /setLimit: for must be a duration/],
        [3, { for: 0 }, /setLimit: for must be a duration/],
        [3, { for: 2 ** 60 }, /setLimit: for must be at most 100 years/],
        [3, { fro: '1h' }, /setLimit: unknown field 'fro'/],
      ];
      for (const [limit, options, message] of bad) {
        const error = await l.setLimit('r', limit as number, options as { for?: string }).then(
          () => undefined,
          (e: unknown) => e,
        );
        expect(error, String(message)).to.be.instanceOf(RateLimitConfigError);
        expect((error as Error).message).to.match(message);
      }
      const unknown = await l.setLimit('nope', 3).catch((e: unknown) => e);
      expect((unknown as RateLimitConfigError).code).to.equal('ERR_UNKNOWN_RULE');
      expect(await l.limits()).to.deep.equal([]);
      const status = await l.status('r', 'u');
      expect([status.limit, status.overridden]).to.deep.equal([2, false]);
    });
  });
}
