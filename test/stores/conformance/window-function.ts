// Conformance: a window chosen per request (`window` as a function), on every store: a key's window keeps the
// size it started with, the next one takes the size chosen then; hostile choices consume nothing.
import { expect } from 'chai';
import {
  RateLimitConfigError,
  RateLimitRequestError,
  type RequestInfo,
  type WindowFunction,
  type WindowSpec,
} from '../../../src/index.js';
import { useLimiters, userReq } from './limits.js';
import type { StoreUnderTest } from './suite.js';

/** Units admitted now to `id` on `plan` (checks until the first denial). */
async function admitted(l: { check(req: RequestInfo): Promise<{ allowed: boolean }> }, id: string) {
  let n = 0;
  while ((await l.check(userReq(id, 'free'))).allowed) n++;
  return n;
}

/** A window function whose size the test changes between requests (an operator moving a client's plan). */
function switchable(type: 'fixed' | 'gcra' | 'sliding' | 'sliding-log' | 'token-bucket', first: string) {
  const state = { size: first };
  const fn: WindowFunction = (req) => ({ type, size: req.user === undefined ? '10s' : state.size });
  return { state, fn };
}

const HOSTILE: Array<[string, unknown]> = [
  ['0', 0],
  ['NaN', Number.NaN],
  ['a negative size', -5000],
  ['2^60 ms', 2 ** 60],
  ['a string that is not a duration', 'a fortnight'],
  ['a window of another type', { type: 'sliding-log', size: '1m' }],
  ['a bare string', '1m'],
  ['null', null],
  ['a promise', Promise.resolve({ type: 'fixed', size: '1m' })],
  ['another field', { type: 'fixed', size: '1m', buckets: 3 }],
];

const HOSTILE_CALENDAR: Array<[string, unknown]> = [
  ['a unit that is not one', { type: 'calendar', unit: 'fortnight' }],
  ['a cron that does not parse', { type: 'calendar', cron: '61 * * * *' }],
  ['an unknown time zone', { type: 'calendar', unit: 'day', timezone: 'Mars/Olympus' }],
  ['a size', { type: 'calendar', unit: 'day', size: '1h' }],
  ['neither unit nor cron', { type: 'calendar' }],
  ['a fixed window', { type: 'fixed', size: '1d' }],
];

/** `ruleWide`: the store keeps rule-wide limits (`Store.limits`). */
export function windowFunctionSuite(target: StoreUnderTest, { ruleWide = true } = {}): void {
  describe(`windows chosen per request: ${target.name}`, () => {
    const { limiter, clock } = useLimiters(target);

    it('fixed: a shorter size chosen mid-window leaves the window in progress its end; the next window takes it', async () => {
      const { state, fn } = switchable('fixed', '60s');
      const l = await limiter([{ name: 'api', key: 'user', limit: 3, window: fn }]);
      expect(await admitted(l, 'u')).to.equal(3);
      state.size = '10s';
      clock().advance(15_000);
      const denied = await l.check(userReq('u', 'free'));
      // Still the 60 s window that started at 0: 45 s to its end, not a 10 s window's.
      expect([denied.allowed, denied.retryAfterMs]).to.deep.equal([false, 45_000]);
      clock().advance(45_000);
      const next = await l.check(userReq('u', 'free'));
      expect([next.allowed, next.resetMs, next.rules[0]?.windowSeconds]).to.deep.equal([true, 10_000, 10]);
      expect(await admitted(l, 'u')).to.equal(2);
      clock().advance(10_000);
      expect(await admitted(l, 'u')).to.equal(3);
    });

    it('fixed: a longer size chosen mid-window does not stretch the window in progress', async () => {
      const { state, fn } = switchable('fixed', '10s');
      const l = await limiter([{ name: 'api', key: 'user', limit: 2, window: fn }]);
      expect(await admitted(l, 'u')).to.equal(2);
      state.size = '1h';
      clock().advance(10_000);
      const fresh = await l.check(userReq('u', 'free'));
      expect([fresh.allowed, fresh.resetMs]).to.deep.equal([true, 3_600_000]);
      expect(await admitted(l, 'u')).to.equal(1);
      clock().advance(60_000);
      expect((await l.check(userReq('u', 'free'))).allowed).to.equal(false);
    });

    it('fixed: clients of one rule count in windows of their own sizes, and direct calls take the direct-call window', async () => {
      const fn: WindowFunction = (req) => ({
        type: 'fixed',
        size: (req.user as { plan?: string } | undefined)?.plan === 'pro' ? '10s' : '1m',
      });
      const l = await limiter([{ name: 'api', key: 'user', limit: 1, window: fn }]);
      const free = await l.check(userReq('f', 'free'));
      const pro = await l.check({ ...userReq('p', 'pro') });
      expect([free.resetMs, pro.resetMs]).to.deep.equal([60_000, 10_000]);
      const direct = await l.consume('api', 'd');
      expect(direct.resetMs).to.equal(60_000);
      clock().advance(10_000);
      expect((await l.check(userReq('p', 'pro'))).allowed).to.equal(true);
      expect((await l.check(userReq('f', 'free'))).allowed).to.equal(false);
    });

    it('GCRA: the backlog is time and stays; a new size prices units from this request on', async () => {
      const { state, fn } = switchable('gcra', '10s');
      const l = await limiter([{ name: 'api', key: 'user', limit: 2, window: fn }]);
      // Two units at 5 s each: a backlog of 10 s, the burst of 2 full.
      expect(await admitted(l, 'u')).to.equal(2);
      state.size = '20s';
      // At 10 s a unit, the 10 s backlog holds one unit: one more fits.
      expect(await admitted(l, 'u')).to.equal(1);
      state.size = '5s';
      // A backlog of 20 s at 2.5 s a unit: nothing fits until it is down to 2.5 s (17.5 s on).
      const denied = await l.check(userReq('u', 'free'));
      expect([denied.allowed, denied.retryAfterMs]).to.deep.equal([false, 17_500]);
      clock().advance(17_500);
      expect(await admitted(l, 'u')).to.equal(1);
    });

    it('calendar: a client moved from days to hours counts its day to midnight, then hours', async () => {
      const chosen = { unit: 'day' as 'day' | 'hour' };
      const l = await limiter([
        {
          name: 'api',
          key: 'user',
          limit: 3,
          window: (req) => ({ type: 'calendar', unit: req.user === undefined ? 'day' : chosen.unit }),
        },
      ]);
      clock().set('2026-01-05T10:15:00Z');
      expect(await admitted(l, 'u')).to.equal(3);
      chosen.unit = 'hour';
      clock().set('2026-01-05T11:15:00Z');
      const denied = await l.check(userReq('u', 'free'));
      // Still the day that started the count: 12 h 45 min to its end, not an hour's 45 min.
      expect([denied.allowed, denied.retryAfterMs]).to.deep.equal([false, 45_900_000]);
      clock().set('2026-01-06T00:00:00Z');
      const next = await l.check(userReq('u', 'free'));
      expect([next.allowed, next.resetMs, next.rules[0]?.windowSeconds]).to.deep.equal([
        true,
        3_600_000,
        3600,
      ]);
      expect(await admitted(l, 'u')).to.equal(2);
      clock().set('2026-01-06T01:00:00Z');
      expect(await admitted(l, 'u')).to.equal(3);
    });

    it('calendar: a client moved from hours to days counts its hour to its end, then the rest of that day', async () => {
      const chosen = { unit: 'hour' as 'day' | 'hour' };
      const l = await limiter([
        {
          name: 'api',
          key: 'user',
          limit: 2,
          window: (req) => ({ type: 'calendar', unit: req.user === undefined ? 'hour' : chosen.unit }),
        },
      ]);
      clock().set('2026-01-05T10:15:00Z');
      expect(await admitted(l, 'u')).to.equal(2);
      chosen.unit = 'day';
      const denied = await l.check(userReq('u', 'free'));
      expect([denied.allowed, denied.retryAfterMs]).to.deep.equal([false, 2_700_000]);
      clock().set('2026-01-05T11:00:00Z');
      const fresh = await l.check(userReq('u', 'free'));
      expect([fresh.allowed, fresh.resetMs, fresh.rules[0]?.windowSeconds]).to.deep.equal([
        true,
        46_800_000,
        86400,
      ]);
      expect(await admitted(l, 'u')).to.equal(1);
      clock().set('2026-01-05T12:00:00Z');
      expect((await l.check(userReq('u', 'free'))).allowed).to.equal(false);
    });

    it('calendar: clients of one rule count in periods of their own (a day in their zone, a cron tick)', async () => {
      const windows: Record<string, WindowSpec> = {
        tokyo: { type: 'calendar', unit: 'day', timezone: 'Asia/Tokyo' },
        cron: { type: 'calendar', cron: '*/15 * * * *' },
      };
      const l = await limiter([
        {
          name: 'api',
          key: 'user',
          limit: 1,
          window: (req) =>
            windows[(req.user as { id: string } | undefined)?.id ?? ''] ?? { type: 'calendar', unit: 'day' },
        },
      ]);
      clock().set('2026-01-05T10:05:00Z');
      const [utc, tokyo, cron] = [
        await l.check(userReq('utc', 'free')),
        await l.check(userReq('tokyo', 'free')),
        await l.check(userReq('cron', 'free')),
      ];
      // Midnight UTC in 13 h 55 min; midnight in Tokyo (UTC+9) at 15:00 UTC; the cron's tick at 10:15.
      expect([utc.resetMs, tokyo.resetMs, cron.resetMs]).to.deep.equal([50_100_000, 17_700_000, 600_000]);
      expect([
        utc.rules[0]?.windowSeconds,
        tokyo.rules[0]?.windowSeconds,
        cron.rules[0]?.windowSeconds,
      ]).to.deep.equal([86400, 86400, 0]);
      expect((await l.consume('api', 'direct')).resetMs).to.equal(50_100_000);
    });

    it('sliding: hits counted in a minute keep their minute when the size drops to 10 s; new hits count 10 s', async () => {
      const { state, fn } = switchable('sliding', '60s');
      const l = await limiter([{ name: 'api', key: 'user', limit: 3, window: fn }]);
      // 10 buckets of 6 s: the three hits leave 66 s on (a minute and the bucket they fell in).
      expect(await admitted(l, 'u')).to.equal(3);
      state.size = '10s';
      clock().advance(15_000);
      const denied = await l.check(userReq('u', 'free'));
      expect([denied.allowed, denied.retryAfterMs]).to.deep.equal([false, 51_000]);
      clock().advance(51_000);
      const next = await l.check(userReq('u', 'free'));
      // Buckets of 1 s now: 10 s and the bucket it fell in.
      expect([next.allowed, next.resetMs, next.rules[0]?.windowSeconds]).to.deep.equal([true, 11_000, 10]);
      expect(await admitted(l, 'u')).to.equal(2);
      clock().advance(11_000);
      expect(await admitted(l, 'u')).to.equal(3);
    });

    it('sliding: hits counted in 10 s leave no earlier when the size grows to a minute, and at most one new bucket later', async () => {
      const { state, fn } = switchable('sliding', '10s');
      const l = await limiter([{ name: 'api', key: 'user', limit: 3, window: fn }]);
      expect(await admitted(l, 'u')).to.equal(3);
      state.size = '60s';
      clock().advance(5_000);
      // They would leave at 11 s; re-filed into buckets of 6 s, the first that ends after it ends at 12 s.
      const denied = await l.check(userReq('u', 'free'));
      expect([denied.allowed, denied.retryAfterMs]).to.deep.equal([false, 7_000]);
      clock().advance(7_000);
      const next = await l.check(userReq('u', 'free'));
      expect([next.allowed, next.resetMs, next.rules[0]?.windowSeconds]).to.deep.equal([true, 66_000, 60]);
    });

    it('sliding log: each hit keeps the size it was logged in; new hits count the size chosen since', async () => {
      const { state, fn } = switchable('sliding-log', '60s');
      const l = await limiter([{ name: 'api', key: 'user', limit: 3, window: fn }]);
      expect(await admitted(l, 'u')).to.equal(3);
      state.size = '10s';
      clock().advance(15_000);
      const denied = await l.check(userReq('u', 'free'));
      expect([denied.allowed, denied.retryAfterMs]).to.deep.equal([false, 45_000]);
      clock().advance(45_000);
      const next = await l.check(userReq('u', 'free'));
      expect([next.allowed, next.resetMs, next.rules[0]?.windowSeconds]).to.deep.equal([true, 10_000, 10]);
      expect(await admitted(l, 'u')).to.equal(2);
      state.size = '60s';
      clock().advance(5_000);
      // Logged in 10 s, they leave 5 s on, not 55 s.
      const again = await l.check(userReq('u', 'free'));
      expect([again.allowed, again.retryAfterMs]).to.deep.equal([false, 5_000]);
      clock().advance(5_000);
      const longer = await l.check(userReq('u', 'free'));
      expect([longer.allowed, longer.resetMs, longer.rules[0]?.windowSeconds]).to.deep.equal([
        true,
        60_000,
        60,
      ]);
    });

    it('token bucket: the level is kept and the new rate refills from the change, never for the time before it', async () => {
      const { state, fn } = switchable('token-bucket', '60s');
      const l = await limiter([{ name: 'api', key: 'user', limit: 6, window: fn }]);
      expect(await admitted(l, 'u')).to.equal(6);
      // 10 s a token: 15 s on, 1.5 tokens refilled; the half token is dropped when the size changes.
      clock().advance(15_000);
      state.size = '6s';
      // 1 s a token from now on: one token now, the next in 1 s (not at once, as 15 s at the new rate would give).
      expect(await admitted(l, 'u')).to.equal(1);
      const denied = await l.check(userReq('u', 'free'));
      expect([denied.allowed, denied.retryAfterMs, denied.rules[0]?.windowSeconds]).to.deep.equal([
        false,
        1_000,
        6,
      ]);
      clock().advance(3_000);
      expect(await admitted(l, 'u')).to.equal(3);
      state.size = '60s';
      // Back to 10 s a token: an empty bucket waits 10 s, the capacity (6 tokens) the same in any size.
      const slow = await l.check(userReq('u', 'free'));
      expect([slow.allowed, slow.retryAfterMs]).to.deep.equal([false, 10_000]);
      clock().advance(600_000);
      expect(await admitted(l, 'u')).to.equal(6);
    });

    it('an override sets the limit; the window is still the client’s own', async () => {
      const { fn } = switchable('fixed', '30s');
      const l = await limiter([{ name: 'api', key: 'user', limit: 1, window: fn }]);
      await l.override('api', 'vip', 3);
      const vip = await l.check(userReq('vip', 'free'));
      const other = await l.check(userReq('o', 'free'));
      expect([vip.limit, vip.resetMs, other.limit, other.resetMs]).to.deep.equal([3, 30_000, 1, 30_000]);
    });

    if (ruleWide)
      it('a rule-wide limit sets the limit under a key’s override; the window is still the client’s own', async () => {
        const { fn } = switchable('fixed', '30s');
        const l = await limiter([{ name: 'api', key: 'user', limit: 1, window: fn }]);
        await l.override('api', 'vip', 3);
        await l.setLimit('api', 2);
        const vip = await l.check(userReq('vip', 'free'));
        const other = await l.check(userReq('o', 'free'));
        expect([vip.limit, vip.resetMs, other.limit, other.resetMs]).to.deep.equal([3, 30_000, 2, 30_000]);
      });

    for (const [what, value] of HOSTILE) {
      it(`a window function giving ${what} refuses the request with ERR_WINDOW naming the rule; nothing is consumed`, async () => {
        const bad = { on: false };
        const l = await limiter([
          { name: 'other', key: 'user', limit: 5, window: { type: 'fixed', size: '1m' } },
          {
            name: 'chosen',
            key: 'user',
            limit: 5,
            window: (() => (bad.on ? value : { type: 'fixed', size: '1m' })) as WindowFunction,
          },
        ]);
        bad.on = true;
        const error = await l.check(userReq('u', 'free')).catch((e: unknown) => e);
        expect(error).to.be.instanceOf(RateLimitRequestError).with.property('code', 'ERR_WINDOW');
        expect((error as Error).message)
          .to.contain('rule "chosen"')
          .and.contain('nothing was consumed');
        bad.on = false;
        expect((await l.status('other', 'u')).count).to.equal(0);
        expect((await l.status('chosen', 'u')).count).to.equal(0);
      });
    }

    for (const [what, value] of HOSTILE_CALENDAR) {
      it(`a calendar window function giving ${what} refuses the request with ERR_WINDOW; nothing is consumed`, async () => {
        const bad = { on: false };
        const l = await limiter([
          {
            name: 'chosen',
            key: 'user',
            limit: 5,
            window: (() => (bad.on ? value : { type: 'calendar', unit: 'day' })) as WindowFunction,
          },
        ]);
        expect((await l.check(userReq('u', 'free'))).allowed).to.equal(true);
        bad.on = true;
        const error = await l.check(userReq('u', 'free')).catch((e: unknown) => e);
        expect(error).to.be.instanceOf(RateLimitRequestError).with.property('code', 'ERR_WINDOW');
        expect((error as Error).message)
          .to.contain('rule "chosen"')
          .and.contain('nothing was consumed');
        bad.on = false;
        expect((await l.status('chosen', 'u')).count).to.equal(1);
      });
    }

    for (const type of ['sliding', 'sliding-log', 'token-bucket'] as const) {
      it(`a ${type} window function giving 0, NaN, 2^60 ms, another type or another field refuses each request with ERR_WINDOW; nothing is consumed`, async () => {
        const bad: { value: unknown } = { value: undefined };
        const l = await limiter([
          {
            name: 'chosen',
            key: 'user',
            limit: 5,
            window: (() => bad.value ?? { type, size: '1m' }) as unknown as WindowFunction,
          },
        ]);
        expect((await l.check(userReq('u', 'free'))).allowed).to.equal(true);
        const other =
          type === 'sliding' ? { type, size: '1m', buckets: 3 } : { type, size: '1m', lease: '1m' };
        for (const value of [
          { type, size: 0 },
          { type, size: Number.NaN },
          { type, size: 2 ** 60 },
          { type: 'fixed', size: '1m' },
          other,
        ]) {
          bad.value = value;
          const error = await l.check(userReq('u', 'free')).catch((e: unknown) => e);
          expect(error, JSON.stringify(value))
            .to.be.instanceOf(RateLimitRequestError)
            .with.property('code', 'ERR_WINDOW');
        }
        bad.value = undefined;
        expect((await l.status('chosen', 'u')).count).to.equal(1);
      });
    }

    it('a window function that throws refuses the request with ERR_WINDOW, its error as the cause', async () => {
      const boom = new Error('plan service down');
      const bad = { on: false };
      const l = await limiter([
        {
          name: 'chosen',
          key: 'user',
          limit: 5,
          window: () => {
            if (bad.on) throw boom;
            return { type: 'gcra', size: '1m' };
          },
        },
      ]);
      bad.on = true;
      const error = await l.check(userReq('u', 'free')).catch((e: unknown) => e);
      expect(error).to.include({ code: 'ERR_WINDOW', cause: boom });
      bad.on = false;
      expect((await l.status('chosen', 'u')).count).to.equal(0);
    });

    it('GCRA: a size too long for the limit in exact µs is refused per request, nothing consumed', async () => {
      const size = { value: '1m' };
      const l = await limiter([
        { name: 'chosen', key: 'user', limit: 1_000_000, window: () => ({ type: 'gcra', size: size.value }) },
      ]);
      size.value = '3650d';
      const error = await l.check(userReq('u', 'free')).catch((e: unknown) => e);
      expect(error).to.be.instanceOf(RateLimitRequestError).with.property('code', 'ERR_WINDOW');
      size.value = '1m';
      expect((await l.status('chosen', 'u')).count).to.equal(0);
    });

    for (const [type, window] of [['concurrency', { type: 'concurrency', lease: '1m' }]] as const) {
      it(`a ${type} window function is refused when the limiter is built, with the reason`, async () => {
        const error = await limiter([{ name: 'r', key: 'user', limit: 1, window: () => window }]).catch(
          (e: unknown) => e,
        );
        expect(error).to.be.instanceOf(RateLimitConfigError).with.property('code', 'ERR_WINDOW');
        expect((error as Error).message)
          .to.contain('rule "r"')
          .and.contain('cannot be a function');
      });
    }

    it('a window function that throws or gives a promise for a direct call is refused when the limiter is built', async () => {
      for (const window of [
        () => {
          throw new Error('no user');
        },
        async () => ({ type: 'fixed', size: '1m' }),
      ]) {
        const error = await limiter([
          { name: 'r', key: 'user', limit: 1, window: window as unknown as WindowFunction },
        ]).catch((e: unknown) => e);
        expect(error).to.be.instanceOf(RateLimitConfigError).with.property('code', 'ERR_WINDOW');
      }
    });
  });
}
