// The shape every window algorithm has; the memory store drives it, and lua/<type>.lua mirrors it step for step.
import type { OpResult, StoreOp } from './types.js';

/**
 * What an algorithm answers for one op, before anything is written: the store's `OpResult` with the
 * lock fields still at "not locked", which the store fills in on the same object (no second one).
 * - `remaining`, `count`: after this op if it is applied (or as now, when denied).
 * - `retryAfterMs`: 0 when allowed. `receipt`: what `refund` needs to find this op's consumption again.
 */
export type Verdict = OpResult;

/** Builds every verdict (and every locked result): one allocation site, one object shape. */
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

export interface Algorithm<S> {
  /** Decides an op against the state (undefined: nothing stored). Reads only. `add`: count even past the limit (record). */
  evaluate(state: S | undefined, op: StoreOp, nowMs: number, add: boolean): Verdict;
  /** Writes the op's cost into the state (creating it), as evaluated. May mutate `state`. */
  apply(state: S | undefined, op: StoreOp, nowMs: number): S;
  /** Gives a consumption back; never below empty. Returns the state, or undefined when it is now empty. */
  refund(state: S, op: StoreOp, nowMs: number, receipt: number): S | undefined;
  /** Epoch ms after which the state means nothing any more (drop it). */
  expiresAt(state: S, op: StoreOp): number;
}
