// The shape every window algorithm has; the memory store drives it, and lua/<type>.lua mirrors it step for step.
import type { StoreOp } from '../stores/store.js';

/** What an algorithm answers for one op, before anything is written. */
export interface Verdict {
  allowed: boolean;
  /** Units left after this op, if it is applied (or as now, when denied). */
  remaining: number;
  resetMs: number;
  /** 0 when allowed. */
  retryAfterMs: number;
  /** Units counted after this op, if it is applied (or as now, when denied). */
  count: number;
  /** What `refund` needs to find this op's consumption again. */
  receipt: number;
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
  /** Units counted now (status). */
  count(state: S | undefined, op: StoreOp, nowMs: number): number;
}
