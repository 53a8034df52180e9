// Limit functions and overrides on the limiter itself: the memory store's same-turn answer, direct calls,
// stores without overrides, and GCRA's exact arithmetic when a key's limit grows.
import { expect } from 'chai';
import fc from 'fast-check';
import { gcra } from '../../../src/algorithms/gcra.js';
import {
  createLimiter,
  type Decision,
  MemoryStore,
  RateLimitConfigError,
  RateLimitRequestError,
  type RequestInfo,
  type Store,
} from '../../../src/index.js';
import type { StoreOp } from '../../../src/stores/store-ops.js';

const req: RequestInfo = { method: 'GET', path: '/', ip: '10.0.0.1', headers: {} };
const window = { type: 'fixed', size: '1m' } as const;

/** How many microtask turns a decision takes to settle (1: the memory store answered in the same turn). */
async function turnsToSettle(decision: Promise<Decision>): Promise<number> {
  let settled = false;
  void decision.then(() => {
    settled = true;
  });
  let turns = 0;
  while (!settled && turns < 100) {
    turns++;
    await Promise.resolve();
  }
  return turns;
}

describe('limit functions on the limiter', () => {
  it('keeps the memory store answer in the same turn for number limits and sync limit functions', async () => {
    const numbers = createLimiter({ rules: [{ name: 'n', key: 'ip', limit: 5, window }] });
    const sync = createLimiter({ rules: [{ name: 's', key: 'ip', limit: () => 5, window }] });
    const async = createLimiter({ rules: [{ name: 'a', key: 'ip', limit: async () => 5, window }] });
    expect(await turnsToSettle(numbers.check(req))).to.equal(1);
    expect(await turnsToSettle(sync.check(req))).to.equal(1);
    expect(await turnsToSettle(async.check(req))).to.be.greaterThan(1);
    await Promise.all([numbers.close(), sync.close(), async.close()]);
  });

  it('calls a limit function with DIRECT_REQUEST on direct calls (no user, no headers)', async () => {
    const seen: RequestInfo[] = [];
    const limiter = createLimiter({
      rules: [
        {
          name: 'api',
          key: 'user',
          limit: (r) => {
            seen.push(r);
            return (r.user as { plan?: string } | undefined)?.plan === 'pro' ? 100 : 10;
          },
          window,
        },
      ],
    });
    expect((await limiter.consume('api', 'u1')).limit).to.equal(10);
    expect((await limiter.status('api', 'u1')).limit).to.equal(10);
    expect(seen).to.deep.equal([
      { method: '', path: '', headers: {} },
      { method: '', path: '', headers: {} },
    ]);
    await limiter.close();
  });

  it('refuses a direct call whose limit function throws, naming the rule', async () => {
    const limiter = createLimiter({
      rules: [{ name: 'api', key: 'user', limit: (r) => (r.user as { plan: string }).plan.length, window }],
    });
    const error = await limiter.consume('api', 'u1').catch((e: unknown) => e);
    expect(error).to.be.instanceOf(RateLimitRequestError);
    expect((error as Error).message).to.match(/^rule "api": limit function threw: /);
    await limiter.close();
  });

  it('refuses an override on a store that has none, naming the store', async () => {
    const memory = new MemoryStore();
    // A store of someone else's making, without `override`.
    const store: Store = {
      local: true,
      now: () => memory.now(),
      evaluate: (ops, mode) => memory.evaluate(ops, mode),
      refund: (refunds) => memory.refund(refunds),
      reset: (rule, key, options) => memory.reset(rule, key, options),
      locked: (rule, limit) => memory.locked(rule, limit),
      close: () => memory.close(),
    };
    const limiter = createLimiter({ store, rules: [{ name: 'r', key: 'ip', limit: 1, window }] });
    const error = await limiter.override('r', 'k', 5).catch((e: unknown) => e);
    expect(error).to.be.instanceOf(RateLimitConfigError);
    expect((error as Error).message).to.equal('override: the store (Object) does not support overrides');
    await limiter.close();
  });
});

describe('GCRA when the limit of a key changes', () => {
  /** The figures of gcra.evaluate computed with BigInt on the formula backlog × limit (no 2^53 bound). */
  function reference(backlogUs: number, limit: number, burst: number, sizeMs: number, cost: number) {
    const unit = BigInt(sizeMs) * 1000n;
    const base = BigInt(backlogUs) * BigInt(limit);
    const capacity = BigInt(burst) * unit;
    const ceil = (a: bigint, b: bigint) => (a <= 0n ? -(-a / b) : (a + b - 1n) / b);
    const allowed = base + BigInt(cost) * unit <= capacity;
    const used = allowed ? base + BigInt(cost) * unit : base;
    const counted = Number(ceil(used, unit));
    const retry = ceil(base + BigInt(Math.min(cost, burst)) * unit - capacity, BigInt(limit) * 1000n);
    return { allowed, counted, retryAfterMs: allowed ? 0 : Math.max(1, Number(retry)) };
  }

  it('counts a backlog exactly where backlog × limit passes 2^53 (a week-long backlog, then 10000 a week)', () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 1, max: 10_000 }),
        fc.integer({ min: 1, max: 1000 }),
        // Up to 1000 units of a week at 1 a week: 6 × 10^14 µs.
        fc.maxSafeNat().map((n) => n % 1e15),
        fc.integer({ min: 0, max: 3 }),
        (limit, burst, backlogUs, cost) => {
          const sizeMs = 7 * 86_400_000;
          const nowMs = 1_767_225_600_000;
          const op: StoreOp = {
            rule: { name: 'g', type: 'gcra', sizeMs, buckets: 0, burst, lockout: undefined, dryRun: false },
            key: 'k',
            cost,
            limit,
          };
          const got = gcra.evaluate({ tatUs: nowMs * 1000 + backlogUs }, op, nowMs, false);
          const want = reference(backlogUs, limit, burst, sizeMs, cost);
          expect({ allowed: got.allowed, counted: got.count, retryAfterMs: got.retryAfterMs }).to.deep.equal(
            want,
          );
        },
      ),
      { numRuns: 2000 },
    );
  });
});
