// The conformance suite: every store must give these exact answers. Written once, run per store.
import { expect } from 'chai';
import {
  createLimiter,
  type LeasingOptions,
  type Limiter,
  type LimiterOptions,
  RateLimitRequestError,
  type Rule,
  type Store,
} from '../../../src/index.js';
import { PATIENT } from '../../support/settle.js';
import { concurrencySuite } from './concurrency.js';
import { limitSuite } from './limits.js';
import { settleSuite } from './settle.js';

export interface FakeClock {
  now: number;
  advance(ms: number): void;
  set(iso: string): void;
  read: () => number;
}

export function fakeClock(start = Date.parse('2026-01-05T00:00:00Z')): FakeClock {
  const clock: FakeClock = {
    now: start,
    advance(ms) {
      clock.now += ms;
    },
    set(iso) {
      clock.now = Date.parse(iso);
    },
    read: () => clock.now,
  };
  return clock;
}

export interface StoreUnderTest {
  name: string;
  /** A fresh, empty store on the given clock (each call isolated from the others, e.g. by prefix). */
  makeStore(clock: () => number): Store | Promise<Store>;
  /**
   * The `leasing` options the store was made with, when on: the suites then run the cases of the leased
   * window types, several rules, overrides, rule-wide limits and resets, and expect what leasing changes
   * (docs/exactness.md, "Leasing"), each said where it is expected.
   */
  leasing?: LeasingOptions;
}

/**
 * Leasing at its lowest thresholds, for the suites: a key is hot from its second decision (the first
 * tells the process what the store has left) and takes a block whenever the store has 5 units or more.
 */
export const LEASING_AT_ONCE: LeasingOptions = { hotAfter: 1, share: 2 };

/** The window types whose units a shared store leases (fixed, calendar: counted; token bucket, GCRA: capacity). */
export const LEASED = new Set(['fixed', 'calendar', 'token-bucket', 'gcra']);

/** The windows a target runs its per-type cases on: the leased ones when it leases. */
export function windowsOf(target: StoreUnderTest): Array<[string, Rule['window']]> {
  return Object.entries(WINDOWS).filter(([type]) => target.leasing === undefined || LEASED.has(type));
}

/**
 * The units a leased bucket block holds back from `remaining` while it lasts, and that a block ended
 * on a clock that stood still does not give back: its reserved refill, ceil(limit × blockMs / size)
 * (docs/exactness.md, "Under-admission bound, token bucket and GCRA"); 0 without leasing or for
 * a counted window.
 */
export function bucketHeldBack(target: StoreUnderTest, type: string, limit: number, sizeMs: number): number {
  if (target.leasing === undefined || (type !== 'token-bucket' && type !== 'gcra')) return 0;
  return Math.ceil((limit * (target.leasing.blockMs ?? 250)) / sizeMs);
}

const req = (over: Partial<{ ip: string; path: string; method: string; body: unknown }> = {}) => ({
  method: over.method ?? 'GET',
  path: over.path ?? '/',
  ip: over.ip ?? '10.0.0.1',
  headers: {},
  body: over.body,
});

export const WINDOWS = {
  fixed: { type: 'fixed', size: '10s' },
  calendar: { type: 'calendar', unit: 'minute' },
  'sliding-log': { type: 'sliding-log', size: '10s' },
  sliding: { type: 'sliding', size: '10s', buckets: 10 },
  'token-bucket': { type: 'token-bucket', size: '10s' },
  gcra: { type: 'gcra', size: '10s' },
} as const satisfies Record<string, Rule['window']>;

export function conformanceSuite(target: StoreUnderTest): void {
  describe(`conformance: ${target.name}`, () => {
    let clock: FakeClock;
    const limiters: Limiter[] = [];

    async function limiter(rules: Rule[], options: Partial<LimiterOptions> = {}): Promise<Limiter> {
      const store = await target.makeStore(clock.read);
      const l = createLimiter({ store, rules, ...PATIENT, ...options });
      limiters.push(l);
      return l;
    }

    beforeEach(() => {
      // Whole minutes, so calendar minutes and 1 s buckets start here.
      clock = fakeClock();
    });
    afterEach(async () => {
      await Promise.all(limiters.splice(0).map((l) => l.close()));
    });

    for (const [type, window] of windowsOf(target)) {
      describe(`${type} window`, () => {
        it('admits exactly the limit, then denies without consuming', async () => {
          const l = await limiter([{ name: 'r', key: 'ip', limit: 5, window }]);
          const remaining: number[] = [];
          for (let i = 0; i < 5; i++) {
            const d = await l.check(req());
            expect(d.allowed, `hit ${i + 1}`).to.equal(true);
            remaining.push(d.remaining);
          }
          expect(remaining).to.deep.equal([4, 3, 2, 1, 0]);
          const denied = await l.check(req());
          expect(denied.allowed).to.equal(false);
          expect(denied.rule).to.equal('r');
          expect(denied.remaining).to.equal(0);
          expect(denied.retryAfterMs).to.be.greaterThan(0);
          expect((await l.status('r', '10.0.0.1')).count).to.equal(5);
        });

        it('admits the same request again after exactly retryAfterMs', async () => {
          const l = await limiter([{ name: 'r', key: 'ip', limit: 3, window }]);
          for (let i = 0; i < 3; i++) await l.check(req());
          clock.advance(1500);
          const denied = await l.check(req());
          expect(denied.allowed).to.equal(false);
          const wait = denied.retryAfterMs as number;
          clock.advance(wait - 1);
          expect((await l.peek(req())).allowed, 'one ms early').to.equal(false);
          clock.advance(1);
          expect((await l.check(req())).allowed, 'on time').to.equal(true);
        });

        it('charges a weighted cost and refuses a cost that does not fit', async () => {
          const l = await limiter([
            {
              name: 'pts',
              key: 'ip',
              limit: 1000,
              window,
              cost: (r) => Number((r.body as { pts: number }).pts),
            },
          ]);
          expect((await l.check(req({ body: { pts: 400 } }))).remaining).to.equal(600);
          // Leased, the second request takes a block: a bucket's holds its refill back while it lasts.
          const heldBack = bucketHeldBack(target, type, 1000, 10_000);
          expect((await l.check(req({ body: { pts: 400 } }))).remaining).to.equal(200 - heldBack);
          const tooMuch = await l.check(req({ body: { pts: 300 } }));
          expect(tooMuch.allowed).to.equal(false);
          // The block ended a few ms into its life: a bucket's keeps the refill of what it lived, rounded
          // up. Its return and this decision are two calls: on PostgreSQL (two connections of the pool)
          // the decision may reach the database first and find the block's 100 units still counted.
          const racing = target.leasing === undefined ? 0 : 100;
          expect(tooMuch.remaining).to.be.within(200 - heldBack - racing, 200);
          expect((await l.check(req({ body: { pts: tooMuch.remaining } }))).allowed).to.equal(true);
        });

        it('record always adds and reports the windowed total', async () => {
          const l = await limiter([{ name: 'hits', key: 'ip', limit: 1000, window }]);
          expect((await l.record('hits', 'player-1', 600)).allowed).to.equal(true);
          const over = await l.record('hits', 'player-1', 600);
          expect(over.allowed).to.equal(false);
          expect(over.remaining).to.equal(0);
          expect((await l.status('hits', 'player-1')).count).to.equal(1200);
        });

        it('peek answers like check and changes nothing', async () => {
          const l = await limiter([{ name: 'r', key: 'ip', limit: 2, window }]);
          await l.check(req());
          const peeked = await l.peek(req());
          expect(peeked.allowed).to.equal(true);
          expect(peeked.remaining).to.equal(0);
          expect((await l.status('r', '10.0.0.1')).remaining).to.equal(1);
        });

        it('admits exactly the limit from 50 parallel checks', async () => {
          const l = await limiter([{ name: 'r', key: 'ip', limit: 10, window }]);
          const decisions = await Promise.all(Array.from({ length: 50 }, () => l.check(req())));
          expect(decisions.filter((d) => d.allowed)).to.have.length(10);
        });
      });
    }

    describe('reset timing', () => {
      it('fixed: resetMs runs to the end of the window that started at the first hit', async () => {
        const l = await limiter([{ name: 'r', key: 'ip', limit: 2, window: { type: 'fixed', size: '60s' } }]);
        clock.advance(7000);
        expect((await l.check(req())).resetMs).to.equal(60000);
        clock.advance(20000);
        expect((await l.check(req())).resetMs).to.equal(40000);
        const denied = await l.check(req());
        expect(denied.retryAfterMs).to.equal(40000);
        clock.advance(40000);
        const fresh = await l.check(req());
        expect(fresh.allowed).to.equal(true);
        expect(fresh.remaining).to.equal(1);
        expect(fresh.resetMs).to.equal(60000);
      });

      it('sliding-log: a hit counts until exactly t + size', async () => {
        const l = await limiter([
          { name: 'r', key: 'ip', limit: 3, window: { type: 'sliding-log', size: '10s' } },
        ]);
        await l.check(req());
        clock.advance(1000);
        await l.check(req());
        clock.advance(1000);
        const third = await l.check(req());
        expect(third.resetMs).to.equal(8000);
        clock.advance(1000);
        expect((await l.check(req())).retryAfterMs).to.equal(7000);
        clock.advance(7000);
        expect((await l.check(req())).allowed).to.equal(true);
        expect((await l.check(req())).allowed).to.equal(false);
      });

      it('sliding counter: a hit counts for at least size and at most size + one bucket', async () => {
        const l = await limiter([
          { name: 'r', key: 'ip', limit: 2, window: { type: 'sliding', size: '10s', buckets: 10 } },
        ]);
        clock.advance(500);
        await l.check(req());
        await l.check(req());
        const denied = await l.check(req());
        // The bucket [0 s, 1 s) stops counting at 11 s: 10.5 s after the hits.
        expect(denied.retryAfterMs).to.equal(10500);
        clock.advance(10499);
        expect((await l.peek(req())).allowed).to.equal(false);
        clock.advance(1);
        expect((await l.check(req())).allowed).to.equal(true);
      });

      it('token bucket and gcra: one unit comes back every size/limit', async () => {
        for (const type of ['token-bucket', 'gcra'] as const) {
          const l = await limiter([{ name: 'r', key: 'ip', limit: 10, window: { type, size: '10s' } }]);
          for (let i = 0; i < 10; i++) await l.check(req());
          const denied = await l.check(req());
          expect(denied.retryAfterMs, type).to.equal(1000);
          clock.advance(1000);
          const next = await l.check(req());
          expect(next.allowed, type).to.equal(true);
          expect(next.remaining, type).to.equal(0);
          clock.advance(5000);
          expect((await l.peek(req())).remaining, type).to.equal(4);
        }
      });

      it('token bucket and gcra: burst sets the capacity', async () => {
        for (const type of ['token-bucket', 'gcra'] as const) {
          const l = await limiter([
            { name: 'r', key: 'ip', limit: 1, window: { type, size: '1s', burst: 3 } },
          ]);
          const results = [];
          for (let i = 0; i < 4; i++) results.push((await l.check(req())).allowed);
          expect(results, type).to.deep.equal([true, true, true, false]);
        }
      });
    });

    describe('calendar windows', () => {
      it('resets at midnight in Asia/Shanghai', async () => {
        clock.set('2026-03-10T15:59:00Z'); // 23:59 in Shanghai
        const l = await limiter([
          {
            name: 'day',
            key: 'ip',
            limit: 10,
            window: { type: 'calendar', unit: 'day', timezone: 'Asia/Shanghai' },
          },
        ]);
        for (let i = 0; i < 10; i++) expect((await l.check(req())).allowed).to.equal(true);
        const denied = await l.check(req());
        expect(denied.allowed).to.equal(false);
        expect(denied.retryAfterMs).to.equal(60_000);
        expect(denied.resetMs).to.equal(60_000);
        clock.set('2026-03-10T16:00:00Z');
        const next = await l.check(req());
        expect(next.allowed).to.equal(true);
        expect(next.remaining).to.equal(9);
        expect(next.resetMs).to.equal(24 * 3600_000);
      });

      it('a day in America/New_York lasts 23 hours when DST starts and 25 when it ends', async () => {
        const l = await limiter([
          {
            name: 'day',
            key: 'ip',
            limit: 5,
            window: { type: 'calendar', unit: 'day', timezone: 'America/New_York' },
          },
        ]);
        clock.set('2026-03-08T05:00:00Z'); // midnight EST, the day clocks spring forward
        expect((await l.check(req())).resetMs).to.equal(23 * 3600_000);
        clock.set('2026-11-01T04:00:00Z'); // midnight EDT, the day clocks fall back
        const fallBack = await l.check(req());
        expect(fallBack.remaining).to.equal(4);
        expect(fallBack.resetMs).to.equal(25 * 3600_000);
      });

      it('resets on each cron tick', async () => {
        clock.set('2026-01-05T10:07:30Z');
        const l = await limiter([
          { name: 'q', key: 'ip', limit: 1, window: { type: 'calendar', cron: '*/15 * * * *' } },
        ]);
        await l.check(req());
        const denied = await l.check(req());
        expect(denied.retryAfterMs).to.equal(7.5 * 60_000);
        clock.set('2026-01-05T10:15:00Z');
        expect((await l.check(req())).allowed).to.equal(true);
      });

      it('weeks start on Monday and months at the first, in the zone given', async () => {
        clock.set('2026-01-07T12:00:00Z'); // a Wednesday
        const l = await limiter([
          {
            name: 'w',
            key: 'ip',
            limit: 1,
            window: { type: 'calendar', unit: 'week', timezone: 'Europe/Berlin' },
          },
          {
            name: 'm',
            key: 'ip',
            limit: 5,
            window: { type: 'calendar', unit: 'month', timezone: 'Europe/Berlin' },
          },
        ]);
        const d = await l.check(req());
        const byRule = Object.fromEntries(d.rules.map((r) => [r.rule, r.resetMs]));
        expect(byRule.w).to.equal(Date.parse('2026-01-11T23:00:00Z') - clock.now);
        expect(byRule.m).to.equal(Date.parse('2026-01-31T23:00:00Z') - clock.now);
      });
    });

    // Rules with a lockout or outcome counting are never leased: their cases run where leasing is off.
    const leased = target.leasing !== undefined;
    if (!leased)
      describe('lockout', () => {
        const loginRule: Rule = {
          name: 'login',
          key: 'body.user',
          limit: 3,
          window: { type: 'fixed', size: '5m' },
          lockout: { duration: '15m', escalate: 2 },
        };
        const attempt = () => req({ method: 'POST', path: '/login', body: { user: 'bob' } });

        it('lets exactly limit attempts pass, denies and locks the next, and escalation doubles', async () => {
          const l = await limiter([loginRule]);
          const events: number[] = [];
          l.on('lockout', (e) => events.push(e.durationMs));
          for (let i = 0; i < 3; i++) expect((await l.check(attempt())).allowed).to.equal(true);
          const fourth = await l.check(attempt());
          expect(fourth.allowed).to.equal(false);
          expect(fourth.locked).to.equal(true);
          expect(fourth.retryAfterMs).to.equal(15 * 60_000);
          clock.advance(14 * 60_000);
          const during = await l.check(attempt());
          expect(during.locked).to.equal(true);
          expect(during.retryAfterMs).to.equal(60_000);
          const status = await l.status('login', 'bob');
          expect(status).to.include({ locked: true, lockRemainingMs: 60_000, level: 1, count: 0 });
          clock.advance(60_000);
          for (let i = 0; i < 3; i++)
            expect((await l.check(attempt())).allowed, `after lock ${i}`).to.equal(true);
          const again = await l.check(attempt());
          expect(again.locked).to.equal(true);
          expect(again.retryAfterMs).to.equal(30 * 60_000);
          expect(events).to.deep.equal([15 * 60_000, 30 * 60_000]);
        });

        it('a dry-run rule with a lockout never locks: past its limit it reports denials, admits, and lists no lock', async () => {
          const l = await limiter([{ ...loginRule, mode: 'dry-run' }]);
          const lockouts: string[] = [];
          l.on('lockout', (e) => lockouts.push(e.key));
          const decisions = [];
          for (let i = 0; i < 10; i++) decisions.push(await l.check(attempt()));
          expect(decisions.map((d) => d.allowed)).to.deep.equal(Array(10).fill(true));
          expect(decisions.map((d) => d.locked)).to.deep.equal(Array(10).fill(false));
          // Past the limit the rule says it would have denied, never that it would have locked.
          expect(decisions.map((d) => d.rules[0]?.allowed)).to.deep.equal([
            ...Array(3).fill(true),
            ...Array(7).fill(false),
          ]);
          expect(decisions.every((d) => d.rules[0]?.locked === false)).to.equal(true);
          expect(lockouts).to.deep.equal([]);
          expect(await l.locked('login')).to.deep.equal([]);
          expect(await l.status('login', 'bob')).to.include({ locked: false, level: 0 });
          // An enforced rule beside it still locks: the dry run changed nothing of its own key.
          const enforced = await limiter([
            { ...loginRule, mode: 'dry-run' },
            { ...loginRule, name: 'login-enforced' },
          ]);
          for (let i = 0; i < 4; i++) await enforced.check(attempt());
          expect((await enforced.locked('login-enforced')).map((x) => x.key)).to.deep.equal(['bob']);
          expect(await enforced.locked('login')).to.deep.equal([]);
        });

        it('reset unlocks, forgets the level, and emits unlock', async () => {
          const l = await limiter([loginRule]);
          const unlocked: string[] = [];
          l.on('unlock', (e) => unlocked.push(e.key));
          for (let i = 0; i < 4; i++) await l.check(attempt());
          expect((await l.locked('login')).map((x) => x.key)).to.deep.equal(['bob']);
          await l.reset('login', 'bob');
          expect(unlocked).to.deep.equal(['bob']);
          expect(await l.locked('login')).to.deep.equal([]);
          expect((await l.status('login', 'bob')).level).to.equal(0);
          for (let i = 0; i < 3; i++) expect((await l.check(attempt())).allowed).to.equal(true);
          expect((await l.check(attempt())).retryAfterMs).to.equal(15 * 60_000);
        });

        it('caps an escalated lock at maxDuration and forgets the level after forgetAfter', async () => {
          const l = await limiter([
            {
              ...loginRule,
              limit: 1,
              lockout: { duration: '1m', escalate: 10, maxDuration: '5m', forgetAfter: '1h' },
            },
          ]);
          const lock = async () => {
            await l.check(attempt());
            return (await l.check(attempt())).retryAfterMs;
          };
          expect(await lock()).to.equal(60_000);
          clock.advance(60_000);
          expect(await lock()).to.equal(5 * 60_000);
          clock.advance(5 * 60_000 + 3600_000);
          expect(await lock()).to.equal(60_000);
        });

        it('lists locked keys soonest first, bounded by limit', async () => {
          const l = await limiter([{ ...loginRule, limit: 1 }]);
          for (const user of ['u1', 'u2', 'u3']) {
            const r = req({ method: 'POST', path: '/login', body: { user } });
            await l.check(r);
            await l.check(r);
            clock.advance(1000);
          }
          const listed = await l.locked('login', { limit: 2 });
          expect(listed.map((x) => x.key)).to.deep.equal(['u1', 'u2']);
          expect(listed[0]?.remainingMs).to.equal(15 * 60_000 - 3000);
        });
      });

    if (!leased)
      describe('outcomes', () => {
        it("countOn 'failure': 50 parallel checks admit 10, and successes give their reservation back", async () => {
          const l = await limiter([
            { name: 'r', key: 'ip', limit: 10, window: { type: 'fixed', size: '1h' }, countOn: 'failure' },
          ]);
          const decisions = await Promise.all(Array.from({ length: 50 }, () => l.check(req())));
          const admitted = decisions.filter((d) => d.allowed);
          expect(admitted).to.have.length(10);
          await Promise.all(admitted.map((d, i) => l.report(d, i < 7 ? 'success' : 'failure')));
          expect((await l.status('r', '10.0.0.1')).count).to.equal(3);
          const next = await Promise.all(Array.from({ length: 20 }, () => l.check(req())));
          expect(next.filter((d) => d.allowed)).to.have.length(7);
        });

        it("countOn 'success': failures are not charged", async () => {
          const l = await limiter([
            {
              name: 'sms',
              key: 'ip',
              limit: 2,
              window: { type: 'sliding-log', size: '1h' },
              countOn: 'success',
            },
          ]);
          for (let i = 0; i < 5; i++) {
            const d = await l.check(req());
            expect(d.allowed).to.equal(true);
            await l.report(d, 'failure');
          }
          for (let i = 0; i < 2; i++) await l.report(await l.check(req()), 'success');
          expect((await l.check(req())).allowed).to.equal(false);
        });

        it('report gives a reservation back once only', async () => {
          const l = await limiter([
            { name: 'r', key: 'ip', limit: 3, window: { type: 'gcra', size: '1h' }, countOn: 'failure' },
          ]);
          const d = await l.check(req());
          await l.check(req());
          await l.report(d, 'success');
          await l.report(d, 'success');
          expect((await l.status('r', '10.0.0.1')).count).to.equal(1);
        });

        it('resetOnSuccess clears the count on a success', async () => {
          const l = await limiter([
            {
              name: 'r',
              key: 'ip',
              limit: 3,
              window: { type: 'fixed', size: '1h' },
              countOn: 'failure',
              resetOnSuccess: true,
            },
          ]);
          await l.report(await l.check(req()), 'failure');
          await l.report(await l.check(req()), 'failure');
          expect((await l.status('r', '10.0.0.1')).count).to.equal(2);
          await l.report(await l.check(req()), 'success');
          expect((await l.status('r', '10.0.0.1')).count).to.equal(0);
        });
      });

    describe('several rules', () => {
      it('a passing 1/min rule is not spent when the 10/day rule denies', async () => {
        const l = await limiter([
          { name: 'sms-min', key: 'ip', limit: 1, window: { type: 'fixed', size: '1m' } },
          {
            name: 'sms-day',
            key: 'ip',
            limit: 10,
            window: { type: 'calendar', unit: 'day', timezone: 'Asia/Shanghai' },
          },
        ]);
        for (let i = 0; i < 10; i++) {
          expect((await l.check(req())).allowed).to.equal(true);
          clock.advance(61_000);
        }
        const denied = await l.check(req());
        expect(denied.allowed).to.equal(false);
        expect(denied.rule).to.equal('sms-day');
        expect((await l.status('sms-min', '10.0.0.1')).count).to.equal(0);
        const min = denied.rules.find((r) => r.rule === 'sms-min');
        expect(min).to.include({ allowed: true, remaining: 1 });
      });

      it('names the first denying rule in rule order and waits for the longest', async () => {
        const l = await limiter([
          { name: 'a', key: 'ip', limit: 1, window: { type: 'fixed', size: '1m' } },
          { name: 'b', key: 'ip', limit: 1, window: { type: 'fixed', size: '1h' } },
        ]);
        await l.check(req());
        const denied = await l.check(req());
        expect(denied.rule).to.equal('a');
        expect(denied.retryAfterMs).to.equal(3600_000);
      });

      it('reports the tightest rule when allowed', async () => {
        const l = await limiter([
          { name: 'loose', key: 'ip', limit: 100, window: { type: 'fixed', size: '1m' } },
          { name: 'tight', key: 'ip', limit: 2, window: { type: 'fixed', size: '1m' } },
        ]);
        const d = await l.check(req());
        expect(d).to.include({ allowed: true, rule: 'tight', limit: 2, remaining: 1 });
      });

      it('dry-run rules never deny but report what they would do', async () => {
        const l = await limiter([
          { name: 'real', key: 'ip', limit: 100, window: { type: 'fixed', size: '1m' } },
          { name: 'trial', key: 'ip', limit: 1, window: { type: 'fixed', size: '1m' }, mode: 'dry-run' },
        ]);
        await l.check(req());
        const d = await l.check(req());
        expect(d.allowed).to.equal(true);
        expect(d.dryRun).to.equal(true);
        expect(d.rules.find((r) => r.rule === 'trial')).to.include({ allowed: false, dryRun: true });
        expect((await l.status('real', '10.0.0.1')).count).to.equal(2);
      });

      it('a request that matches no rule is allowed with no rules', async () => {
        const l = await limiter([
          { name: 'login', match: 'POST /login', key: 'ip', limit: 1, window: { type: 'fixed', size: '1m' } },
        ]);
        const d = await l.check(req({ path: '/other' }));
        expect(d.allowed).to.equal(true);
        expect(d.rules).to.deep.equal([]);
      });
    });

    if (!leased)
      describe('bad input at request time', () => {
        for (const bad of [Number.NaN, -1, Number.POSITIVE_INFINITY, '5', 1.5, null]) {
          it(`a cost of ${String(bad)} is a clear error and consumes nothing`, async () => {
            const l = await limiter([
              { name: 'ok', key: 'ip', limit: 5, window: { type: 'fixed', size: '1m' } },
              {
                name: 'weighted',
                key: 'ip',
                limit: 5,
                window: { type: 'fixed', size: '1m' },
                cost: () => bad as number,
              },
            ]);
            let error: unknown;
            try {
              await l.check(req());
            } catch (e) {
              error = e;
            }
            expect(error).to.be.instanceOf(RateLimitRequestError);
            expect((error as Error).message).to.match(/rule "weighted": cost must be a non-negative integer/);
            expect((await l.status('ok', '10.0.0.1')).count).to.equal(0);
            let direct: unknown;
            try {
              await l.consume('ok', 'k', bad as number);
            } catch (e) {
              direct = e;
            }
            expect(direct).to.be.instanceOf(RateLimitRequestError);
          });
        }
      });
  });
  // Per-request limits (test/stores/conformance/limits.ts): every store, every window type.
  if (target.leasing !== undefined) return;
  limitSuite(target);
  concurrencySuite(target);
  settleSuite(target);
}
