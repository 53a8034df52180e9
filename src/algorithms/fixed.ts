// Fixed window: starts at the first counted hit and lasts `size`; a count and the window's end.
import type { StoreOp } from '../stores/store.js';
import type { Algorithm, Verdict } from './algorithm.js';

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
  const limit = op.rule.limit;
  const total = count + op.cost;
  const allowed = total <= limit;
  const counted = allowed || add ? total : count;
  const untilEnd = endMs - nowMs;
  return {
    allowed,
    remaining: Math.max(0, limit - counted),
    resetMs: counted > 0 ? untilEnd : 0,
    retryAfterMs: allowed ? 0 : untilEnd,
    count: counted,
    receipt: endMs,
  };
}

function current(state: CounterState | undefined, op: StoreOp, nowMs: number): CounterState {
  if (state !== undefined && nowMs < state.endMs) return state;
  return { count: 0, endMs: nowMs + op.rule.sizeMs };
}

export const fixed: Algorithm<CounterState> = {
  evaluate(state, op, nowMs, add) {
    const { count, endMs } = current(state, op, nowMs);
    return evaluateCounter(count, endMs, op, nowMs, add);
  },
  apply(state, op, nowMs) {
    const live = current(state, op, nowMs);
    return { count: live.count + op.cost, endMs: live.endMs };
  },
  refund(state, op, nowMs, receipt) {
    // Only the window the reservation was made in can give it back.
    if (state.endMs !== receipt || nowMs >= state.endMs) return state;
    const count = Math.max(0, state.count - op.cost);
    return count === 0 ? undefined : { count, endMs: state.endMs };
  },
  expiresAt: (state) => state.endMs,
  count: (state, _op, nowMs) => (state !== undefined && nowMs < state.endMs ? state.count : 0),
};
