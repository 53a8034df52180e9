// Conformance: per-request limits (a number or a function of the request), on every window type and store.
import { expect } from 'chai';
import {
  createLimiter,
  type Limiter,
  type LimiterOptions,
  RateLimitRequestError,
  type RequestInfo,
  type Rule,
} from '../../../src/index.js';
import { PATIENT } from '../../support/settle.js';
import { type FakeClock, fakeClock, type StoreUnderTest, WINDOWS } from './suite.js';

/** Limiters on fresh stores of `target`, on a fake clock reset before each test, closed after it. */
export function useLimiters(target: StoreUnderTest): {
  clock: () => FakeClock;
  limiter: (rules: Rule[], options?: Partial<LimiterOptions>) => Promise<Limiter>;
} {
  let clock = fakeClock();
  const limiters: Limiter[] = [];
  beforeEach(() => {
    clock = fakeClock();
  });
  afterEach(async () => {
    await Promise.all(limiters.splice(0).map((l) => l.close()));
  });
  return {
    clock: () => clock,
    async limiter(rules, options = {}) {
      const store = await target.makeStore(clock.read);
      const l = createLimiter({ store, rules, ...PATIENT, ...options });
      limiters.push(l);
      return l;
    },
  };
}

/** A request of a user on a plan. */
export const userReq = (id: string, plan: 'free' | 'pro'): RequestInfo => ({
  method: 'GET',
  path: '/api',
  headers: {},
  user: { id, plan },
});

const planOf = (req: RequestInfo) => (req.user as { plan?: string } | undefined)?.plan;

/** After 3 units at limit 5, what one more unit at limit 10 leaves, and after 3 at 10, one at 2 (see README). */
const LIMIT_CHANGE: Record<keyof typeof WINDOWS, { up: number; down: boolean }> = {
  fixed: { up: 6, down: false },
  calendar: { up: 6, down: false },
  'sliding-log': { up: 6, down: false },
  sliding: { up: 6, down: false },
  // Tokens stay: 2 left of 5, one taken at 10 leaves 1; 7 left of 10 are cut to the capacity of 2.
  'token-bucket': { up: 1, down: true },
  // The backlog (time) stays: 3 of 5 are 6 s, which hold 6 units at 10; 3 of 10 hold 1 unit at 2.
  gcra: { up: 3, down: true },
};

export function limitSuite(target: StoreUnderTest): void {
  describe(`per-request limits: ${target.name}`, () => {
    const { limiter, clock } = useLimiters(target);

    for (const [type, window] of Object.entries(WINDOWS) as Array<[keyof typeof WINDOWS, Rule['window']]>) {
      describe(`${type} window`, () => {
        for (const kind of ['sync', 'async'] as const) {
          it(`${kind === 'sync' ? 'a sync' : 'an async'} limit function gives each request its plan's limit on one rule`, async () => {
            // Limits that divide the window in µs: GCRA rounds each step to a whole µs otherwise.
            const limit = (req: RequestInfo) => (planOf(req) === 'pro' ? 8 : 4);
            const l = await limiter([
              {
                name: 'api',
                key: 'user',
                limit: kind === 'sync' ? limit : async (req) => limit(req),
                window,
              },
            ]);
            for (const [id, plan, admitted] of [
              ['u1', 'free', 4],
              ['u2', 'pro', 8],
            ] as const) {
              const seen: Array<[boolean, number, number]> = [];
              for (let i = 0; i <= admitted; i++) {
                const d = await l.check(userReq(id, plan));
                seen.push([d.allowed, d.limit, d.remaining]);
              }
              const expected = Array.from({ length: admitted }, (_, i): [boolean, number, number] => [
                true,
                admitted,
                admitted - 1 - i,
              ]);
              expect(seen).to.deep.equal([...expected, [false, admitted, 0]]);
            }
          });
        }

        it('a key whose limit changes between requests keeps what it used (see README)', async () => {
          let current = 5;
          const l = await limiter([{ name: 'r', key: 'user', limit: () => current, window }]);
          for (let i = 0; i < 3; i++) await l.check(userReq('up', 'free'));
          current = 10;
          const up = await l.check(userReq('up', 'free'));
          expect([up.allowed, up.limit, up.remaining]).to.deep.equal([true, 10, LIMIT_CHANGE[type].up]);

          current = 10;
          for (let i = 0; i < 3; i++) await l.check(userReq('down', 'free'));
          current = 2;
          const down = await l.check(userReq('down', 'free'));
          expect([down.allowed, down.limit]).to.deep.equal([LIMIT_CHANGE[type].down, 2]);
          expect((await l.status('r', 'down')).limit, 'status: a direct call reads the function').to.equal(2);
        });
      });
    }

    it('a denial at one limit never answers a request at a higher one (the deny cache asks the store)', async () => {
      let current = 1;
      const l = await limiter([
        { name: 'r', key: 'user', limit: () => current, window: { type: 'fixed', size: '1h' } },
      ]);
      const seen: boolean[] = [];
      for (let i = 0; i < 3; i++) seen.push((await l.check(userReq('u', 'free'))).allowed);
      expect(seen).to.deep.equal([true, false, false]);
      current = 3;
      const upgraded = await l.check(userReq('u', 'free'));
      expect([upgraded.allowed, upgraded.limit, upgraded.remaining]).to.deep.equal([true, 3, 1]);
    });

    it('token bucket and gcra: an explicit burst stays the capacity whatever the limit', async () => {
      for (const type of ['token-bucket', 'gcra'] as const) {
        const l = await limiter([
          {
            name: 'b',
            key: 'user',
            limit: (r) => (planOf(r) === 'pro' ? 100 : 10),
            window: { type, size: '10s', burst: 4 },
          },
        ]);
        const admitted = async (plan: 'free' | 'pro') => {
          let n = 0;
          while ((await l.check(userReq(`burst-${plan}`, plan))).allowed) n++;
          return n;
        };
        expect([await admitted('free'), await admitted('pro')], type).to.deep.equal([4, 4]);
        clock().advance(1000);
        // One second refills limit/10 units: 1 at 10 per 10 s, 10 at 100 (capped at the burst of 4).
        expect([await admitted('free'), await admitted('pro')], type).to.deep.equal([1, 4]);
      }
    });

    const bad: Array<[string, () => unknown]> = [
      ['0', () => 0],
      ['a negative number', () => -3],
      ['a fraction', () => 2.5],
      ['NaN', () => Number.NaN],
      ['Infinity', () => Number.POSITIVE_INFINITY],
      ['a numeric string', () => '5'],
      ['undefined', () => undefined],
      [
        'a throw',
        () => {
          throw new Error('no plan');
        },
      ],
      ['a rejected promise', () => Promise.reject(new Error('plan service down'))],
      ['a promise of 0', async () => 0],
      ['a limit past the 2^53 bound of its bucket', () => 2 ** 40],
    ];
    for (const [what, fn] of bad) {
      it(`refuses ${what} from a limit function with RateLimitRequestError naming the rule, consuming nothing`, async () => {
        let broken = true;
        const l = await limiter([
          { name: 'steady', key: 'user', limit: 5, window: { type: 'fixed', size: '1m' } },
          {
            name: 'plans',
            key: 'user',
            limit: () => (broken ? (fn() as number) : 5),
            window: { type: 'token-bucket', size: '1d' },
          },
        ]);
        const error = await l.check(userReq('u', 'free')).then(
          () => undefined,
          (e: unknown) => e,
        );
        expect(error).to.be.instanceOf(RateLimitRequestError);
        expect((error as RateLimitRequestError).code).to.equal('ERR_LIMIT');
        expect((error as Error).message).to.match(/^rule "plans": limit function/);
        broken = false;
        expect((await l.status('steady', 'u')).count, 'nothing consumed').to.equal(0);
        expect((await l.check(userReq('u', 'free'))).remaining).to.equal(4);
      });
    }
  });
}
