// Per-plan limits through a framework: one rule, the limit read per request from the caller's plan.
// Run for every framework on each store, as the HTTP suite is.
import { expect } from 'chai';
import request from 'supertest';
import { createLimiter, type Limiter, type LimitFunction, type RequestInfo } from '../../../src/index.js';
import { PATIENT } from '../../support/settle.js';
import type { Harness, StoreFactory } from './http-suite.js';

/** The plan a request says it is on (`x-plan`), as an app would read it from its user. */
const planOf = (req: RequestInfo): string | undefined => {
  const plan = req.headers['x-plan'];
  return typeof plan === 'string' ? plan : undefined;
};

const PLAN_LIMITS: Record<string, number> = { free: 2, pro: 4 };

function byPlan(req: RequestInfo): number {
  const plan = planOf(req) ?? 'free';
  const limit = PLAN_LIMITS[plan];
  if (limit === undefined) throw new Error(`unknown plan '${plan}'`);
  return limit;
}

const LIMIT_FUNCTIONS: Record<'sync' | 'async', LimitFunction> = {
  sync: byPlan,
  // As an app would look the plan up in its database.
  async: async (req) => {
    await new Promise((resolve) => setImmediate(resolve));
    return byPlan(req);
  },
};

export function planSuite(harness: Harness, stores: StoreFactory): void {
  describe(`${harness.name} per-plan limits on the ${stores.name} store`, () => {
    const limiters: Limiter[] = [];
    afterEach(async () => {
      await Promise.all(limiters.splice(0).map((l) => l.close()));
    });

    async function appFor(limit: LimitFunction) {
      const limiter = createLimiter({
        ...PATIENT,
        store: await stores.makeStore(Date.now),
        rules: [
          { name: 'api', match: 'GET /echo', key: 'user', limit, window: { type: 'fixed', size: '1h' } },
        ],
      });
      limiters.push(limiter);
      return { limiter, listener: harness.build({ limiter, options: { headers: 'both' } }).listener };
    }

    async function listenerFor(limit: LimitFunction) {
      return (await appFor(limit)).listener;
    }

    for (const kind of ['sync', 'async'] as const) {
      it(`${kind === 'sync' ? 'a sync' : 'an async'} limit function: each plan gets its limit on one rule, and the headers show it`, async () => {
        const listener = await listenerFor(LIMIT_FUNCTIONS[kind]);
        for (const [user, plan] of [
          ['ann', 'free'],
          ['bob', 'pro'],
        ] as const) {
          const limit = PLAN_LIMITS[plan] as number;
          for (let i = 1; i <= limit; i++) {
            const res = await request(listener)
              .get('/echo')
              .set('x-user', user)
              .set('x-plan', plan)
              .expect(200);
            expect(res.headers['x-ratelimit-limit'], `${plan} #${i}`).to.equal(String(limit));
            expect(res.headers['x-ratelimit-remaining']).to.equal(String(limit - i));
            expect(res.headers['ratelimit-policy']).to.equal(`"api";q=${limit};w=3600`);
          }
          const denied = await request(listener)
            .get('/echo')
            .set('x-user', user)
            .set('x-plan', plan)
            .expect(429);
          expect(denied.headers['ratelimit-policy']).to.equal(`"api";q=${limit};w=3600`);
        }
      });
    }

    it("an operator's override wins over the caller's plan for that key, in the headers too, until cleared", async () => {
      const { limiter, listener } = await appFor(LIMIT_FUNCTIONS.async);
      const get = (user: string, status: number) =>
        request(listener).get('/echo').set('x-user', user).set('x-plan', 'pro').expect(status);
      await limiter.override('api', 'carl', 6);
      for (let i = 1; i <= 6; i++) {
        const res = await get('carl', 200);
        expect(res.headers['x-ratelimit-limit'], `#${i}`).to.equal('6');
        expect(res.headers['x-ratelimit-remaining']).to.equal(String(6 - i));
      }
      const denied = await get('carl', 429);
      expect(denied.headers['ratelimit-policy']).to.equal('"api";q=6;w=3600');
      // Another customer on the same plan keeps the plan's limit.
      expect((await get('dina', 200)).headers['x-ratelimit-limit']).to.equal('4');
      // Lowered below what carl used: still denied, at the override's limit.
      await limiter.override('api', 'carl', 1);
      expect((await get('carl', 429)).headers['x-ratelimit-limit']).to.equal('1');
      await limiter.override('api', 'carl', null);
      expect((await get('carl', 429)).headers['x-ratelimit-limit']).to.equal('4');
      // status has no request: the limit function answers for an unknown caller (the free plan here).
      expect(await limiter.status('api', 'carl')).to.include({ limit: 2, overridden: false, count: 6 });
    });

    it('a limit function that throws fails the request through the framework and consumes nothing', async () => {
      const listener = await listenerFor(LIMIT_FUNCTIONS.async);
      const res = await request(listener).get('/echo').set('x-user', 'eve').set('x-plan', 'gold').expect(500);
      expect(res.body).to.deep.equal({
        error: `rule "api": limit function rejected: unknown plan 'gold'; nothing was consumed`,
        code: 'ERR_LIMIT',
      });
      const ok = await request(listener).get('/echo').set('x-user', 'eve').set('x-plan', 'free').expect(200);
      expect(ok.headers['x-ratelimit-remaining']).to.equal('1');
    });
  });
}
