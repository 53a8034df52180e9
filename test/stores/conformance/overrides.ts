// Conformance: overrides (`limiter.override`), on every window type; run on each store that has them.
import { expect } from 'chai';
import { RateLimitConfigError, type RateLimitRequestError, type RequestInfo } from '../../../src/index.js';
import { useLimiters, userReq } from './limits.js';
import { bucketHeldBack, type StoreUnderTest, windowsOf } from './suite.js';

/** Units admitted now to `id` (checks until the first denial). */
async function admitted(l: { check(req: RequestInfo): Promise<{ allowed: boolean }> }, id: string) {
  let n = 0;
  while ((await l.check(userReq(id, 'free'))).allowed) n++;
  return n;
}

export function overrideSuite(target: StoreUnderTest): void {
  describe(`overrides: ${target.name}`, () => {
    const { limiter, clock } = useLimiters(target);

    for (const [type, window] of windowsOf(target)) {
      it(`${type}: an override wins over the rule's limit for its key only, and status says so`, async () => {
        const l = await limiter([{ name: 'r', key: 'user', limit: 2, window }]);
        await l.override('r', 'vip', 5);
        expect(await admitted(l, 'vip')).to.equal(5);
        expect(await admitted(l, 'other')).to.equal(2);
        const vip = await l.status('r', 'vip');
        expect([vip.limit, vip.overridden, vip.count]).to.deep.equal([5, true, 5]);
        const other = await l.status('r', 'other');
        expect([other.limit, other.overridden]).to.deep.equal([2, false]);
      });
    }

    it('wins over a limit function, and decisions show the limit used', async () => {
      const l = await limiter([
        {
          name: 'plans',
          key: 'user',
          limit: (req) => ((req.user as { plan: string }).plan === 'pro' ? 10 : 4),
          window: { type: 'fixed', size: '1m' },
        },
      ]);
      await l.override('plans', 'u1', 1);
      const first = await l.check(userReq('u1', 'pro'));
      expect([first.allowed, first.limit, first.remaining]).to.deep.equal([true, 1, 0]);
      expect((await l.check(userReq('u1', 'pro'))).allowed).to.equal(false);
      expect((await l.check(userReq('u2', 'pro'))).limit).to.equal(10);
    });

    it('direct calls on a key with an override never call the limit function: status, consume, record, acquire, wrap', async () => {
      let calls = 0;
      const l = await limiter([
        {
          name: 'plan',
          key: 'user',
          // Reads the request's user, as plan limits do: a direct call has none, and this throws on it.
          limit: (req) => {
            calls++;
            return (req.user as { plan: string }).plan === 'pro' ? 10 : 4;
          },
          window: { type: 'fixed', size: '1m' },
        },
      ]);
      await l.override('plan', 'f9', 6);
      const before = await l.status('plan', 'f9');
      expect([before.limit, before.overridden, before.count]).to.deep.equal([6, true, 0]);
      const consumed = await l.consume('plan', 'f9', 2);
      expect([consumed.allowed, consumed.limit, consumed.remaining]).to.deep.equal([true, 6, 4]);
      expect((await l.record('plan', 'f9')).remaining).to.equal(3);
      const acquired = await l.acquire('plan', 'f9');
      expect([acquired.allowed, acquired.remaining]).to.deep.equal([true, 2]);
      const wrapped = l.wrap(async (id: string) => `sent to ${id}`, { rules: 'plan', key: '{0}' });
      expect(await wrapped('f9')).to.equal('sent to f9');
      const after = await l.status('plan', 'f9');
      expect([after.count, after.remaining]).to.deep.equal([5, 1]);
      expect(calls, 'the limit function ran').to.equal(0);
      // Without an override the function is what decides, so a direct call on that key is refused.
      const error = await l.status('plan', 'no-override').catch((e: unknown) => e);
      expect((error as RateLimitRequestError).code).to.equal('ERR_LIMIT');
      expect((error as Error).message).to.match(/rule "plan": limit function threw/);
      expect(calls).to.equal(1);
    });

    it('clears with null: the rule limit applies again to what was counted', async () => {
      const l = await limiter([{ name: 'r', key: 'user', limit: 2, window: { type: 'fixed', size: '1m' } }]);
      await l.override('r', 'u', 4);
      expect(await admitted(l, 'u')).to.equal(4);
      await l.override('r', 'u', null);
      const status = await l.status('r', 'u');
      expect([status.limit, status.overridden, status.count, status.remaining]).to.deep.equal([
        2,
        false,
        4,
        0,
      ]);
    });

    it("expires after 'for' on the store's clock", async () => {
      const l = await limiter([
        { name: 'r', key: 'user', limit: 1, window: { type: 'sliding-log', size: '1m' } },
      ]);
      await l.override('r', 'u', 3, { for: '10s' });
      clock().advance(9999);
      expect((await l.status('r', 'u')).limit, 'one ms before').to.equal(3);
      clock().advance(1);
      const after = await l.status('r', 'u');
      expect([after.limit, after.overridden], 'on time').to.deep.equal([1, false]);
    });

    it('setting it again replaces the limit and the expiry', async () => {
      const l = await limiter([{ name: 'r', key: 'user', limit: 1, window: { type: 'fixed', size: '1m' } }]);
      await l.override('r', 'u', 3, { for: '10s' });
      await l.override('r', 'u', 7);
      clock().advance(60_000);
      expect((await l.status('r', 'u')).limit).to.equal(7);
    });

    it('token bucket and gcra without a burst of their own: the capacity follows the override', async () => {
      for (const type of ['token-bucket', 'gcra'] as const) {
        const l = await limiter([{ name: type, key: 'user', limit: 2, window: { type, size: '10s' } }]);
        await l.override(type, 'u', 8);
        // Leased, one block is taken at this limit (share 2); on a clock that stands still it keeps its
        // reserved refill: one unit fewer, never one more.
        expect(await admitted(l, 'u'), type).to.be.within(8 - bucketHeldBack(target, type, 8, 10_000), 8);
      }
    });

    it('reset clears the count and lock but leaves the override', async () => {
      const l = await limiter([
        {
          name: 'r',
          key: 'user',
          limit: 1,
          window: { type: 'fixed', size: '1m' },
          lockout: { duration: '1h' },
        },
      ]);
      await l.override('r', 'u', 2);
      expect(await admitted(l, 'u')).to.equal(2);
      expect((await l.status('r', 'u')).locked).to.equal(true);
      await l.reset('r', 'u');
      const status = await l.status('r', 'u');
      expect([status.locked, status.count, status.limit, status.overridden]).to.deep.equal([
        false,
        0,
        2,
        true,
      ]);
    });

    it('refuses a bad limit, a bad for, an unknown field or rule, changing nothing', async () => {
      const l = await limiter([{ name: 'r', key: 'user', limit: 2, window: { type: 'gcra', size: '1d' } }]);
      const bad: Array<[unknown, unknown, RegExp]> = [
        [0, undefined, /override: rule "r": limit must be a positive integer or null, got 0/],
        [1.5, undefined, /limit must be a positive integer or null, got 1.5/],
        ['5', undefined, /got '5'/],
        [2 ** 40, undefined, /limit must be at most \d+ for a gcra window/],
        [3, { for: 'soon' }, /override: for must be a duration/],
        [3, { for: 0 }, /override: for must be a duration/],
        [3, { for: 60 }, /override: for must be a duration with its unit, such as '60s' or '60ms'/],
        [3, { fro: '1h' }, /override: unknown field 'fro'/],
      ];
      for (const [limit, options, message] of bad) {
        const error = await l.override('r', 'u', limit as number, options as { for?: string }).then(
          () => undefined,
          (e: unknown) => e,
        );
        expect(error, String(message)).to.be.instanceOf(RateLimitConfigError);
        expect((error as Error).message).to.match(message);
      }
      const unknown = await l.override('nope', 'u', 3).catch((e: unknown) => e);
      expect((unknown as RateLimitConfigError).code).to.equal('ERR_UNKNOWN_RULE');
      const status = await l.status('r', 'u');
      expect([status.limit, status.overridden]).to.deep.equal([2, false]);
    });
  });
}
