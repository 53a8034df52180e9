// Fixed window: starts at the first counted hit and lasts `size`; a count and the window's end.

import type { StoreOp } from '../stores/store-ops.js';
import { type Algorithm, countingWindow, type Verdict, verdict } from './algorithm.js';

export interface CounterState {
  count: number;
  endMs: number;
}

/** Counting against a window that ends at `endMs`; shared with calendar windows, which only choose the end differently. */
export function evaluateCounter(
  count: number,
  endMs: number,
  op: StoreOp,
  nowMs: number,
  add: boolean,
): Verdict {
  const limit = op.limit;
  const total = count + op.cost;
  const allowed = total <= limit;
  const counted = allowed || add ? total : count;
  const untilEnd = endMs - nowMs;
  return verdict(
    allowed,
    Math.max(0, limit - counted),
    counted > 0 ? untilEnd : 0,
    allowed ? 0 : untilEnd,
    counted,
    endMs,
  );
}

/** Gives a reservation back; shared with calendar windows. Only the window it was made in can. */
export function refundCounter(
  state: CounterState,
  op: StoreOp,
  nowMs: number,
  receipt: number,
): CounterState | undefined {
  if (state.endMs !== receipt || nowMs >= state.endMs) return state;
  const count = Math.max(0, state.count - op.cost);
  return count === 0 ? undefined : { count, endMs: state.endMs };
}

export const fixed: Algorithm<CounterState> = {
  kind: countingWindow('fixed window', ['size'], { groupable: true, counter: true, lease: 'counted' }),

  evaluate(state, op, nowMs, add) {
    // A missing or ended window reads as a fresh one starting now.
    if (state !== undefined && nowMs < state.endMs)
      return evaluateCounter(state.count, state.endMs, op, nowMs, add);
    return evaluateCounter(0, nowMs + op.rule.sizeMs, op, nowMs, add);
  },
  apply(state, op, nowMs) {
    if (state === undefined) return { count: op.cost, endMs: nowMs + op.rule.sizeMs };
    // In place: the store holds the only reference to its state.
    if (nowMs >= state.endMs) {
      state.count = 0;
      state.endMs = nowMs + op.rule.sizeMs;
    }
    state.count += op.cost;
    return state;
  },
  refund: refundCounter,
  expiresAt: (state) => state.endMs,
};
