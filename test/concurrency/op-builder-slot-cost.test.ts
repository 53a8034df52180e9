// A concurrency rule's cost is the number of slots an op holds: above the limit in force it is refused before
// any store is called (a hostile `record(rule, key, 1e8)` would otherwise have each store write 1e8 holders).
import { expect } from 'chai';
import {
  createLimiter,
  type Limiter,
  RateLimitConfigError,
  RateLimitRequestError,
  type Rule,
  type Store,
} from '../../src/index.js';
import { PATIENT } from '../support/settle.js';
import { memoryStores, postgresStores, redisStores, type StoreFactory } from '../support/stores.js';

const START = Date.parse('2026-05-04T10:00:00.000Z');

/** At most `limit` exports of a user in flight, and 10 an hour, on the same user. */
const rules = (limit: Rule['limit'] = 2, cost?: Rule['cost']): Rule[] => [
  {
    name: 'exports',
    key: 'user',
    limit,
    window: { type: 'concurrency', lease: '10s' },
    ...(cost === undefined ? {} : { cost }),
  },
  { name: 'hourly', key: 'user', limit: 10, window: { type: 'fixed', size: '1h' } },
];

const req = (cost?: number) => ({
  method: 'POST',
  path: '/exports',
  headers: cost === undefined ? {} : { 'x-cost': String(cost) },
  user: 'u1',
});

/** The store, its decisions counted (every method called on the store itself). */
function counted(store: Store): { store: Store; decisions: () => number } {
  let decisions = 0;
  const proxy = new Proxy(store, {
    get(target, prop) {
      const value: unknown = Reflect.get(target, prop, target);
      if (typeof value !== 'function') return value;
      return (...args: unknown[]) => {
        if (prop === 'evaluate' || prop === 'evaluateSync') decisions++;
        return value.apply(target, args);
      };
    },
  });
  return { store: proxy, decisions: () => decisions };
}

async function refusal(promise: Promise<unknown>): Promise<RateLimitRequestError> {
  const error = await promise.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(error).to.be.instanceOf(RateLimitRequestError);
  expect((error as RateLimitRequestError).code).to.equal('ERR_COST');
  return error as RateLimitRequestError;
}

const message = (cost: number, limit = 2) =>
  `rule "exports": cost must be at most the limit (${limit}) on a concurrency window, each unit a slot held, got ${cost}; nothing was consumed`;

for (const factory of [memoryStores, redisStores, postgresStores] satisfies StoreFactory[]) {
  describe(`a concurrency rule's cost above its limit is refused before the store (${factory.name} store)`, () => {
    const limiters: Limiter[] = [];
    afterEach(async () => {
      for (const limiter of limiters.splice(0)) await limiter.close();
    });
    async function limiterFor(list: Rule[]): Promise<{ limiter: Limiter; decisions: () => number }> {
      const { store, decisions } = counted(await factory.makeStore(() => START));
      const limiter = createLimiter({ ...PATIENT, store, rules: list });
      limiters.push(limiter);
      return { limiter, decisions };
    }

    it('record, consume, acquire and wrap with a hostile cost: ERR_COST naming rule, field and value, no store call, nothing held', async () => {
      const { limiter, decisions } = await limiterFor(rules(2));
      expect((await refusal(limiter.record('exports', 'u1', 1e8))).message).to.equal(message(1e8));
      expect((await refusal(limiter.consume('exports', 'u1', 3))).message).to.equal(message(3));
      expect((await refusal(limiter.acquire(['exports', 'hourly'], 'u1', { cost: 3 }))).message).to.equal(
        message(3),
      );
      const wrapped = limiter.wrap(async () => 'ran', { rules: 'exports', key: 'u1', cost: 50 });
      expect((await refusal(wrapped())).message).to.equal(message(50));
      expect(decisions(), 'store decisions').to.equal(0);
      expect((await limiter.status('exports', 'u1')).count).to.equal(0);
      expect((await limiter.status('hourly', 'u1')).count).to.equal(0);
    });

    it("a cost function's cost and a limit function's limit: refused per request, the other rule untouched", async () => {
      const { limiter, decisions } = await limiterFor(
        rules(
          () => 3,
          (r) => Number(r.headers['x-cost'] ?? 1),
        ),
      );
      expect((await refusal(limiter.check(req(1e8)))).message).to.equal(message(1e8, 3));
      expect((await refusal(limiter.check(req(4)))).message).to.equal(message(4, 3));
      expect(decisions(), 'store decisions').to.equal(0);
      expect((await limiter.status('hourly', 'u1')).count).to.equal(0);
      // The limit itself is a cost allowed: all slots in one decision, freed by its release.
      const all = await limiter.check(req(3));
      expect(all.allowed).to.equal(true);
      expect((await limiter.status('exports', 'u1')).count).to.equal(3);
      await limiter.release(all);
      expect((await limiter.status('exports', 'u1')).count).to.equal(0);
    });

    it('record up to the limit still counts past it, each call at most the limit', async () => {
      const { limiter } = await limiterFor(rules(2));
      const a = await limiter.record('exports', 'u1', 2);
      const b = await limiter.record('exports', 'u1', 2);
      expect([a.allowed, a.count, b.allowed, b.count]).to.deep.equal([true, 2, false, 4]);
      await limiter.release(a);
      await limiter.release(b);
      expect((await limiter.status('exports', 'u1')).count).to.equal(0);
    });
  });
}

describe("a concurrency rule's fixed cost above its fixed limit", () => {
  it('is refused by createLimiter, naming rule, field and value', () => {
    expect(() => createLimiter({ rules: rules(2, 3) }))
      .to.throw(RateLimitConfigError)
      .with.property(
        'message',
        'rule "exports": cost must be at most the limit (2) on a concurrency window, each unit a slot held, got 3',
      );
  });
});
