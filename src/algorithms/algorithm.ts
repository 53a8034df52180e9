// The shape every window algorithm has; the memory store drives it, and lua/<type>.lua mirrors it step for step.
import type { OpResult, StoreOp } from '../stores/store-ops.js';

/**
 * What an algorithm answers for one op, before anything is written: the store's `OpResult` with the
 * lock fields still at "not locked", which the store fills in on the same object (no second one).
 * - `remaining`, `count`: after this op if it is applied (or as now, when denied).
 * - `retryAfterMs`: 0 when allowed. `receipt`: what `refund` needs to find this op's consumption again.
 */
export type Verdict = OpResult;

/** Builds every verdict (and every locked result), so that all have the same fields in the same order. */
export function verdict(
  allowed: boolean,
  remaining: number,
  resetMs: number,
  retryAfterMs: number,
  count: number,
  receipt: number,
): Verdict {
  return {
    allowed,
    // Filled in by the store, with the lock fields: the limit in force may be an override.
    limit: 0,
    overridden: false,
    remaining,
    resetMs,
    retryAfterMs,
    count,
    receipt,
    locked: false,
    level: 0,
    lockedUntil: 0,
    lockedNow: false,
  };
}

/** Token bucket and GCRA capacity: the explicit `window.burst`, else the op's limit (`StoreRule.burst` 0). */
export function burstOf(op: StoreOp): number {
  return op.rule.burst || op.limit;
}

/** The fields a `window` may have besides `type`; a field no type had before is validated in src/rules/window.ts. */
export type WindowField = 'size' | 'buckets' | 'burst' | 'unit' | 'cron' | 'timezone' | 'lease';

/**
 * A window type as the rest of the library knows it, so that no other part lists types by name: the rule
 * compiler reads its fields and bound, the limiter its capacity, the stores what its state allows, the
 * operators' tools its name.
 */
export interface WindowKind {
  /** The type in plain words, for people: `'token bucket'`. */
  readonly title: string;
  /** Its `window` fields besides `type`. With `'burst'` it is a bucket: its count drains unit by unit. */
  readonly fields: readonly WindowField[];
  /** Other names a rule may give the type (`'leaky-bucket'` for GCRA). */
  readonly aliases: readonly string[];
  /** Units a key holds at `limit` (the limit in force), given the rule's explicit burst (0: none). */
  capacity(limit: number, burst: number): number;
  /**
   * The largest limit (and burst) its exact integer arithmetic holds for a window of `sizeMs`, where
   * that arithmetic has a bound (buckets: max(limit, burst) × size in µs below 2^53, GCRA 2^52); undefined: none.
   */
  readonly maxLimit: ((sizeMs: number) => number) | undefined;
  /** An admitted request holds its units until they are released or their lease ends (the `lease` field). */
  readonly holdsSlots: boolean;
  /**
   * Its state is one small value, so a store may keep it in one record with the states of its identity's
   * other rules (`StoreRule.grouped`, set by src/rules/compile.ts; lua/identity-record.lua).
   */
  readonly groupable: boolean;
  /**
   * Its state is a count and its window's end, started afresh at that end (fixed, calendar): the state
   * sql/check-batch.sql computes in place for the requests of one rule batched together.
   */
  readonly counter: boolean;
  /**
   * Why its size cannot be chosen per request (a `window` function, src/rules/window-choice.ts), for the
   * rule's refusal; undefined when it can: a key's window then keeps the size it started with.
   */
  readonly unchosen: string | undefined;
  /**
   * How a store may lease a hot key's units to a process (src/stores/leasing/, docs/exactness.md
   * "Leasing"): `'counted'`, units of the current window counted when reserved (fixed, calendar);
   * `'capacity'`, a bucket's units and its refill over the block's life reserved (token bucket, GCRA);
   * `'slots'`, slots held by a process in a pool, handed out and taken back there, released to the store
   * when idle (concurrency); undefined: never leased.
   */
  readonly lease: LeaseKind | undefined;
}

/** How a window type's units are leased (see WindowKind.lease). */
export type LeaseKind = 'counted' | 'capacity' | 'slots';

/** What a window type's state allows a store, besides its fields (see WindowKind). */
export interface WindowTraits {
  /** @default false */
  readonly groupable?: boolean;
  /** @default false */
  readonly counter?: boolean;
  /** @default undefined: its size may be chosen per request */
  readonly unchosen?: string;
  /** @default undefined */
  readonly lease?: LeaseKind;
}

/** A window whose capacity is its limit, with no bound of its own on the limit. */
export function countingWindow(
  title: string,
  fields: readonly WindowField[],
  traits: WindowTraits = {},
): WindowKind {
  return {
    title,
    fields,
    aliases: [],
    capacity: (limit) => limit,
    maxLimit: undefined,
    holdsSlots: fields.includes('lease'),
    groupable: traits.groupable ?? false,
    counter: traits.counter ?? false,
    unchosen: traits.unchosen,
    lease: traits.lease,
  };
}

/**
 * Token bucket and GCRA: the explicit burst, else the limit; state in µs of max(limit, burst) × size,
 * which must stay at most `bound` (2^53 - 1 unless the window needs room for more, as GCRA's TAT does).
 */
export function bucketWindow(
  title: string,
  aliases: readonly string[] = [],
  bound = Number.MAX_SAFE_INTEGER,
  unchosen: string | undefined = undefined,
): WindowKind {
  return {
    title,
    fields: ['size', 'burst'],
    aliases,
    capacity: (limit, burst) => burst || limit,
    maxLimit: (sizeMs) => largestUnder(sizeMs * 1000, bound),
    holdsSlots: false,
    // A bucket's state is one number or two (a level and a time, a TAT).
    groupable: true,
    counter: false,
    unchosen,
    // The refill over a block's life is reserved with its units.
    lease: 'capacity',
  };
}

/** The largest n with n × unit ≤ bound, exactly (a float quotient may round up to the next integer). */
function largestUnder(unit: number, bound: number): number {
  const n = Math.floor(bound / unit);
  return n * unit > bound ? n - 1 : n;
}

export interface Algorithm<S> {
  /** What the window is: its fields, capacity and name (see WindowKind). */
  readonly kind: WindowKind;
  /** Decides an op against the state (undefined: nothing stored). Reads only. `add`: count even past the limit (record). */
  evaluate(state: S | undefined, op: StoreOp, nowMs: number, add: boolean): Verdict;
  /** Writes the op's cost into the state (creating it), as evaluated. May mutate `state`. */
  apply(state: S | undefined, op: StoreOp, nowMs: number): S;
  /** Gives a consumption back; never below empty. Returns the state, or undefined when it is now empty. */
  refund(state: S, op: StoreOp, nowMs: number, receipt: number): S | undefined;
  /** Epoch ms after which the state means nothing any more (drop it). */
  expiresAt(state: S, op: StoreOp): number;
}
