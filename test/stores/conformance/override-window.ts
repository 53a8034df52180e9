// Conformance: a key's override carrying a window (`limiter.override(rule, key, { limit?, window? })`), on every
// store: the override's window starts with the key's next window, wins over the rule's window and its function,
// shows in the headers' `w` and in `status`; hostile windows are refused and nothing is stored.
import { expect } from 'chai';
import {
  RateLimitConfigError,
  type RequestInfo,
  type Rule,
  type WindowFunction,
} from '../../../src/index.js';
import { useLimiters, userReq } from './limits.js';
import type { StoreUnderTest } from './suite.js';

/** Units admitted now to `id` (checks until the first denial). */
async function admitted(l: { check(req: RequestInfo): Promise<{ allowed: boolean }> }, id: string) {
  let n = 0;
  while ((await l.check(userReq(id, 'free'))).allowed) n++;
  return n;
}

const HOSTILE: Array<[string, unknown]> = [
  ['a size of 0', { type: 'fixed', size: 0 }],
  ['a size of NaN', { type: 'fixed', size: Number.NaN }],
  ['a negative size', { type: 'fixed', size: -5000 }],
  ['a size of 2^60 ms', { type: 'fixed', size: 2 ** 60 }],
  ['a window of another type', { type: 'sliding-log', size: '1m' }],
  ['a bare duration', '1m'],
  ['another field', { type: 'fixed', size: '1m', buckets: 3 }],
];

/** `ruleWide`: the store has rule-wide limits (`Store.limits`), which a window-only override keeps. */
export function overrideWindowSuite(target: StoreUnderTest, ruleWide = true): void {
  describe(`overrides with a window: ${target.name}`, () => {
    const { limiter, clock } = useLimiters(target);
    const fixed: Rule = { name: 'api', key: 'user', limit: 3, window: { type: 'fixed', size: '60s' } };

    it('fixed: the window in progress keeps its end; the next window takes the override’s size, shown in w and status', async () => {
      const l = await limiter([fixed]);
      expect(await admitted(l, 'u')).to.equal(3);
      await l.override('api', 'u', { window: { type: 'fixed', size: '10s' } });
      clock().advance(15_000);
      const denied = await l.check(userReq('u', 'free'));
      // Still the 60 s window that started at 0.
      expect([denied.allowed, denied.retryAfterMs, denied.limit]).to.deep.equal([false, 45_000, 3]);
      clock().advance(45_000);
      const next = await l.check(userReq('u', 'free'));
      expect([next.allowed, next.resetMs, next.rules[0]?.windowSeconds]).to.deep.equal([true, 10_000, 10]);
      const status = await l.status('api', 'u');
      expect([status.windowMs, status.overridden, status.limit, status.count]).to.deep.equal([
        10_000,
        true,
        3,
        1,
      ]);
      // Another key keeps the rule's window, and says nothing of one.
      const other = await l.check(userReq('o', 'free'));
      expect([other.resetMs, other.rules[0]?.windowSeconds]).to.deep.equal([60_000, undefined]);
      expect((await l.status('api', 'o')).windowMs).to.equal(undefined);
      // Cleared: the 10 s window in progress ends as it started; the next is the rule's 60 s.
      await l.override('api', 'u', null);
      clock().advance(10_000);
      const back = await l.check(userReq('u', 'free'));
      expect([
        back.resetMs,
        back.rules[0]?.windowSeconds,
        (await l.status('api', 'u')).overridden,
      ]).to.deep.equal([60_000, undefined, false]);
    });

    it('GCRA: the backlog stays; the override’s size prices units from the next request on', async () => {
      const l = await limiter([
        { name: 'api', key: 'user', limit: 2, window: { type: 'gcra', size: '10s' } },
      ]);
      // Two units at 5 s each: a backlog of 10 s.
      expect(await admitted(l, 'u')).to.equal(2);
      await l.override('api', 'u', { window: { type: 'gcra', size: '20s' } });
      // At 10 s a unit the 10 s backlog holds one unit: one more fits.
      expect(await admitted(l, 'u')).to.equal(1);
      const denied = await l.check(userReq('u', 'free'));
      expect([denied.allowed, denied.retryAfterMs, denied.rules[0]?.windowSeconds]).to.deep.equal([
        false,
        10_000,
        20,
      ]);
    });

    it('an override’s window wins over a window function; a window-only override keeps the request’s limit', async () => {
      const fn: WindowFunction = () => ({ type: 'fixed', size: '30s' });
      const l = await limiter([{ name: 'api', key: 'user', limit: () => 2, window: fn }]);
      await l.override('api', 'both', { limit: 4, window: { type: 'fixed', size: '10s' } });
      await l.override('api', 'win', { window: { type: 'fixed', size: '20s' } });
      const both = await l.check(userReq('both', 'free'));
      const win = await l.check(userReq('win', 'free'));
      const plain = await l.check(userReq('plain', 'free'));
      expect([both.limit, both.resetMs, both.rules[0]?.windowSeconds]).to.deep.equal([4, 10_000, 10]);
      expect([win.limit, win.resetMs, win.rules[0]?.windowSeconds]).to.deep.equal([2, 20_000, 20]);
      expect([plain.limit, plain.resetMs, plain.rules[0]?.windowSeconds]).to.deep.equal([2, 30_000, 30]);
      // A bare limit replaces the override, window and all.
      await l.override('api', 'both', 5);
      clock().advance(10_000);
      const after = await l.check(userReq('both', 'free'));
      expect([after.limit, after.resetMs]).to.deep.equal([5, 30_000]);
    });

    it('a direct call on a key whose override sets only the window reads the limit function, at the override’s window', async () => {
      const l = await limiter([
        {
          name: 'api',
          key: 'user',
          limit: (req) => (req.user === undefined ? 2 : 5),
          window: { type: 'fixed', size: '1m' },
        },
      ]);
      await l.override('api', 'k', { window: { type: 'fixed', size: '10s' } });
      const direct = await l.consume('api', 'k');
      expect([direct.limit, direct.resetMs, direct.rules[0]?.windowSeconds]).to.deep.equal([2, 10_000, 10]);
    });

    if (ruleWide)
      it('a window-only override keeps the rule-wide limit; a key’s limit wins over it', async () => {
        const l = await limiter([fixed]);
        await l.setLimit('api', 2);
        await l.override('api', 'win', { window: { type: 'fixed', size: '20s' } });
        await l.override('api', 'both', { limit: 4, window: { type: 'fixed', size: '10s' } });
        const win = await l.check(userReq('win', 'free'));
        const both = await l.check(userReq('both', 'free'));
        expect([win.limit, win.resetMs, both.limit, both.resetMs]).to.deep.equal([2, 20_000, 4, 10_000]);
      });

    it('an override’s window ends with its `for`, from the key’s next window', async () => {
      const l = await limiter([fixed]);
      await l.override('api', 'u', { limit: 1, window: { type: 'fixed', size: '10s' } }, { for: '25s' });
      expect((await l.check(userReq('u', 'free'))).resetMs).to.equal(10_000);
      clock().advance(25_000);
      const next = await l.check(userReq('u', 'free'));
      expect([next.limit, next.resetMs, next.rules[0]?.windowSeconds]).to.deep.equal([3, 60_000, undefined]);
    });

    it('an override with a hostile window (0, NaN, negative, 2^60 ms, another type) is refused with ERR_WINDOW naming the rule; nothing is stored', async () => {
      const l = await limiter([fixed]);
      for (const [what, value] of HOSTILE) {
        const error = await l
          .override('api', 'u', { limit: 7, window: value as never })
          .catch((e: unknown) => e);
        expect(error, what).to.be.instanceOf(RateLimitConfigError).with.property('code', 'ERR_WINDOW');
        expect((error as Error).message, what)
          .to.contain('rule "api"')
          .and.contain('nothing was stored');
      }
      const status = await l.status('api', 'u');
      expect([status.overridden, status.limit, status.windowMs]).to.deep.equal([false, 3, undefined]);
    });

    it('a window on a rule whose type cannot choose its size is refused with the reason; nothing is stored', async () => {
      const l = await limiter([
        { name: 'jobs', key: 'user', limit: 3, window: { type: 'concurrency', lease: '1m' } },
        { name: 'day', key: 'user', limit: 3, window: { type: 'calendar', unit: 'day', timezone: 'UTC' } },
      ]);
      // A concurrency lease is not chosen per key; a calendar's periods are set by unit, cron and zone.
      for (const [rule, window] of [
        ['jobs', { type: 'concurrency', lease: '10s' }],
        ['day', { type: 'calendar', unit: 'hour' }],
      ] as const) {
        const error = await l.override(rule, 'u', { limit: 7, window } as never).catch((e: unknown) => e);
        expect(error, rule).to.be.instanceOf(RateLimitConfigError).with.property('code', 'ERR_WINDOW');
        expect((error as Error).message, rule)
          .to.contain(`rule "${rule}"`)
          .and.contain('cannot carry a window');
        expect((await l.status(rule, 'u')).overridden, rule).to.equal(false);
      }
    });
  });
}
