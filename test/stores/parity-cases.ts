// The random cases of the algorithm parity tests and the TypeScript twin's step: the Lua and PL/pgSQL twins are held to it.
import fc from 'fast-check';
import { algorithms, type StoreOp, type StoreRule } from '../../src/algorithms/index.js';
import type { WindowType } from '../../src/types.js';

export const BASE_MS = 1_767_225_600_000; // 2026-01-01

/** A state as the numbers the driver script reads and writes (see its header), [] for none. */
export type Flat = number[];

export interface Case {
  type: WindowType;
  rule: StoreRule;
  op: StoreOp;
  nowMs: number;
  add: boolean;
  receipt: number;
  state: Flat;
}

const pairs = (min: number, max: number, first: fc.Arbitrary<number>, second: fc.Arbitrary<number>) =>
  fc
    .uniqueArray(fc.tuple(first, second), { minLength: min, maxLength: max, selector: ([key]) => key })
    .map((list) => list.sort((a, b) => a[0] - b[0]).flat());

/**
 * Random cases for one window type: states of every shape the store can hold, times around them, and
 * per-op limits: the state may have been written under another limit than the op's (a plan change, an
 * override), and token bucket and GCRA have an explicit burst or follow the op's limit (burst 0).
 */
export function cases(type: WindowType): fc.Arbitrary<Case> {
  const anyLimit = fc.oneof(fc.integer({ min: 1, max: 12 }), fc.integer({ min: 1, max: 1_000_000 }));
  return fc
    .record({
      limit: anyLimit,
      written: fc.option(anyLimit, { nil: undefined }),
      sizeMs: fc.oneof(fc.integer({ min: 1, max: 2000 }), fc.integer({ min: 1, max: 90_000_000 })),
      buckets: fc.integer({ min: 1, max: 12 }),
      burst: fc.option(fc.integer({ min: 1, max: 30 }), { nil: undefined }),
      cost: fc.oneof(fc.integer({ min: 0, max: 4 }), fc.integer({ min: 0, max: 40 })),
      nowMs: fc.integer({ min: BASE_MS, max: BASE_MS + 10_000_000 }),
      add: fc.boolean(),
    })
    .chain((p) => {
      const buckety = type === 'token-bucket' || type === 'gcra';
      const burst = buckety ? (p.burst ?? 0) : 0;
      /** The limit the state was written under. */
      const written = p.written ?? p.limit;
      // The limiter refuses bucket limits past max(burst, limit) x sizeMs x 1000 = 2^53 (GCRA: 2^52).
      const largest = Math.max(burst, p.limit, written);
      const bound = type === 'gcra' ? 2 ** 52 : 2 ** 53;
      const size = buckety ? Math.min(p.sizeMs, Math.floor(bound / (1000 * largest))) : p.sizeMs;
      const rule: StoreRule = {
        name: 'r',
        type,
        sizeMs: type === 'calendar' ? 0 : size,
        buckets: type === 'sliding' ? p.buckets : 0,
        burst,
        lockout: undefined,
        dryRun: false,
      };
      const around = (spanMs: number) => fc.integer({ min: p.nowMs - spanMs, max: p.nowMs + spanMs });
      const units = fc.oneof(fc.integer({ min: 1, max: 6 }), fc.integer({ min: 1, max: 2 * written }));
      type Periods = { periodEndMs?: number; nextPeriodEndMs?: number };
      const plain = (state: fc.Arbitrary<Flat>) =>
        state.map((flat) => ({ state: flat, periods: {} as Periods }));
      const optional = <T>(value: fc.Arbitrary<T>, flat: (v: T) => Flat) =>
        fc.option(value, { nil: undefined }).map((v) => (v === undefined ? [] : flat(v)));
      let shaped: fc.Arbitrary<{ state: Flat; periods: Periods }>;
      if (type === 'fixed') {
        const count = fc.oneof(units, fc.integer({ min: 9_999_990, max: 10_000_010 }));
        shaped = plain(optional(fc.tuple(count, around(2 * size)), (v) => v));
      } else if (type === 'calendar') {
        // The period the op was built in may have ended by the time the script runs (then the next).
        shaped = fc
          .tuple(fc.integer({ min: 1, max: size }), fc.integer({ min: 1, max: size }), fc.boolean())
          .map(([a, b, ended]) => ({
            periodEndMs: ended ? p.nowMs - a + 1 : p.nowMs + a,
            nextPeriodEndMs: p.nowMs + a + b,
          }))
          .chain((periods) =>
            optional(
              fc.tuple(
                units,
                // Or a period of another length still in progress (a period chosen per client), or ended.
                fc.oneof(
                  fc.constantFrom(periods.periodEndMs, periods.nextPeriodEndMs, p.nowMs - size),
                  around(2 * size),
                ),
              ),
              (v) => v,
            ).map((state) => ({ state, periods })),
          );
      } else if (type === 'sliding-log') {
        // Entries logged in the op's size, in none (a state of an earlier release: 0), or in another (a size
        // chosen per client).
        shaped = plain(
          fc
            .tuple(fc.constantFrom(0, size, size), fc.integer({ min: 1, max: 90_000_000 }), fc.boolean())
            .chain(([own, other, another]) =>
              pairs(0, 8, around(2 * (another ? other : size)), units).map((list) =>
                list.length === 0 ? [] : [another ? other : own, ...list],
              ),
            ),
        );
      } else if (type === 'sliding') {
        // Buckets counted in the op's size, in none (a state of an earlier release: 0), or in another (a size
        // chosen per client), from two windows before now to one bucket ahead (a clock ahead).
        shaped = plain(
          fc
            .tuple(fc.constantFrom(0, size, size), fc.integer({ min: 1, max: 90_000_000 }), fc.boolean())
            .chain(([own, other, another]) => {
              const stateSize = another ? other : own;
              const width = (stateSize || size) / p.buckets;
              const current = Math.floor(p.nowMs / width);
              return pairs(0, 8, fc.integer({ min: current - 2 * p.buckets, max: current + 1 }), units).map(
                (list) => (list.length === 0 ? [] : [stateSize, ...list]),
              );
            }),
        );
      } else if (type === 'concurrency') {
        // Holders taken up to two leases ago, lapsed or live, renewed or not; seq the last id handed out.
        const ids = fc.integer({ min: (p.nowMs - 2 * size) * 1024, max: p.nowMs * 1024 + 3000 });
        shaped = plain(
          fc
            .tuple(pairs(0, 8, ids, around(size)), fc.integer({ min: 0, max: 5000 }), fc.boolean())
            .map(([holders, ahead, empty]) => {
              if (holders.length === 0 && empty) return [];
              const top = holders.filter((_, i) => i % 2 === 0).reduce((a, b) => Math.max(a, b), 0);
              return [Math.max(top, (p.nowMs - 2 * size) * 1024) + ahead, ...holders];
            }),
        );
      } else if (type === 'token-bucket') {
        // Tokens counted in the op's size, in none (a state of an earlier release: 0), or in another (a size
        // chosen per client) that the limits hold exactly too.
        const largestOther = Math.floor(2 ** 53 / (1000 * largest));
        shaped = plain(
          fc
            .tuple(
              fc.constantFrom(0, size, size),
              fc.integer({ min: 1, max: Math.min(2 * size, largestOther) }),
              fc.boolean(),
            )
            .chain(([own, other, another]) => {
              const stateSize = another ? other : own;
              const capacity = (burst || written) * (stateSize || size);
              return optional(
                fc.tuple(fc.integer({ min: -capacity, max: capacity }), around(2 * size)),
                (v) => [...v, stateSize],
              );
            }),
        );
      } else {
        // A TAT up to twice the capacity ahead (a debt), never past MAX_TAT_US (2^53 - 1).
        const span = 2 * (burst || written) * size * 1000;
        const latest = Math.min(p.nowMs * 1000 + span, Number.MAX_SAFE_INTEGER);
        shaped = plain(optional(fc.integer({ min: p.nowMs * 1000 - span, max: latest }), (t) => [t]));
      }
      return fc
        .record({ shaped, pick: fc.nat() })
        .map(({ shaped: { state: flat, periods: ends }, pick }): Case => {
          // A receipt this state could have given (an entry's time, a bucket, a window end), or another.
          const receipts =
            type === 'concurrency'
              ? [0, ...flat.filter((_, i) => i % 2 === 1), (flat[0] ?? 0) + 1]
              : type === 'sliding' || type === 'sliding-log'
                ? [0, ...flat.filter((_, i) => i % 2 === 1)]
                : [0, ...flat.filter((_, i) => i % 2 === 0), ...flat.slice(1, 2)];
          return {
            type,
            rule,
            op: { rule, key: 'k', cost: p.cost, limit: p.limit, ...ends },
            nowMs: p.nowMs,
            add: p.add,
            receipt: receipts[pick % receipts.length] as number,
            state: flat,
          };
        });
    });
}

/** A flat state as the TypeScript algorithm holds it. */
export function toState(type: WindowType, flat: Flat): unknown {
  if (flat.length === 0) return undefined;
  const [a = 0, b = 0] = flat;
  if (type === 'fixed' || type === 'calendar') return { count: a, endMs: b };
  if (type === 'token-bucket') return flat[2] ? { scaled: a, ts: b, sizeMs: flat[2] } : { scaled: a, ts: b };
  if (type === 'gcra') return { tatUs: a };
  if (type === 'concurrency') {
    const holders = new Map<number, number>();
    for (let i = 1; i < flat.length; i += 2) holders.set(flat[i] as number, flat[i + 1] as number);
    return { seq: a, holders };
  }
  const list = [];
  // Sliding and sliding-log: the size its buckets (entries) count in first (0: none).
  const from = 1;
  for (let i = from; i < flat.length; i += 2) list.push([flat[i] as number, flat[i + 1] as number]);
  if (type === 'sliding-log') {
    const entries = list.map(([ts, cost]) => ({ ts, cost }));
    return a === 0 ? { entries } : { entries, sizeMs: a };
  }
  const buckets = list.map(([index, count]) => ({ index, count }));
  return a === 0 ? { buckets } : { buckets, sizeMs: a };
}

/** The TypeScript state as flat numbers, the fields of its type only. */
export function toFlat(type: WindowType, state: unknown): Flat {
  if (state === undefined) return [];
  const s = state as {
    count: number;
    endMs: number;
    scaled: number;
    ts: number;
    tatUs: number;
    seq: number;
    holders: Map<number, number>;
    entries: Array<{ ts: number; cost: number }>;
    buckets: Array<{ index: number; count: number }>;
    sizeMs?: number;
  };
  if (type === 'fixed' || type === 'calendar') return [s.count, s.endMs];
  if (type === 'token-bucket') return [s.scaled, s.ts, s.sizeMs ?? 0];
  if (type === 'gcra') return [s.tatUs];
  if (type === 'concurrency') return [s.seq, ...[...s.holders].sort((a, b) => a[0] - b[0]).flat()];
  if (type === 'sliding-log')
    return s.entries.length === 0 ? [] : [s.sizeMs ?? 0, ...s.entries.flatMap((e) => [e.ts, e.cost])];
  if (s.buckets.length === 0) return [];
  return [s.sizeMs ?? 0, ...s.buckets.flatMap((b) => [b.index, b.count])];
}

/**
 * decide: evaluate then apply (the algorithms' own step); create: the Redis store's check of one op,
 * through the path that creates an empty key with SET NX GET (string states); refund.
 */
export type Step = 'decide' | 'create' | 'refund';

export interface StepOutcome {
  expiresAt: number | undefined;
  verdict: {
    allowed: boolean;
    remaining: number;
    resetMs: number;
    retryAfterMs: number;
    count: number;
    receipt: number;
  };
  after: Flat;
}

/** The TypeScript twin's step, as the memory store runs it. */
export function stepTs(c: Case, step: Step): StepOutcome {
  const alg = algorithms[c.type];
  let state = toState(c.type, c.state);
  const expiresAt = state === undefined ? undefined : alg.expiresAt(state, c.op);
  let v: ReturnType<typeof alg.evaluate>;
  if (step === 'create') {
    // The Redis store's check: an ended state reads as none; an admitted op counts.
    if (expiresAt !== undefined && expiresAt <= c.nowMs) state = undefined;
    v = alg.evaluate(state, c.op, c.nowMs, false);
    if (c.op.cost > 0 && v.allowed) state = alg.apply(state, c.op, c.nowMs);
    // Read back as the store reads it (an ended state is none).
    if (state !== undefined && alg.expiresAt(state, c.op) <= c.nowMs) state = undefined;
  } else if (step === 'decide') {
    v = alg.evaluate(state, c.op, c.nowMs, c.add);
    if (c.op.cost > 0) state = alg.apply(state, c.op, c.nowMs);
  } else {
    if (state !== undefined) state = alg.refund(state, c.op, c.nowMs, c.receipt);
    v = alg.evaluate(state, { ...c.op, cost: 0 }, c.nowMs, false);
  }
  const { allowed, remaining, resetMs, retryAfterMs, count, receipt } = v;
  const after = toFlat(c.type, state);
  return {
    expiresAt,
    verdict: { allowed, remaining, resetMs, retryAfterMs, count, receipt },
    after: step === 'create' ? counting(c, after) : after,
  };
}

/**
 * A log's entries or a sliding window's buckets that still count at the case's time: the store writes a
 * new entry beside ended ones, which no decision counts and the next write drops.
 */
export function counting(c: Case, flat: Flat): Flat {
  if (c.type !== 'sliding-log' && c.type !== 'sliding') return flat;
  // In the size the entries (buckets) count in: the flat's first number (0: the rule's).
  const sizeMs = flat[0] || c.rule.sizeMs;
  const width = sizeMs / c.rule.buckets;
  const counts = (first: number) =>
    c.type === 'sliding-log'
      ? first + sizeMs > c.nowMs
      : first >= Math.floor(c.nowMs / width) - c.rule.buckets;
  const kept: Flat = [];
  for (let i = 1; i < flat.length; i += 2) {
    if (counts(flat[i] as number)) kept.push(flat[i] as number, flat[i + 1] as number);
  }
  if (kept.length > 0) kept.unshift(flat[0] as number);
  return kept;
}
