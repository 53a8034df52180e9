// Calendar window: a fixed window whose end is a wall-clock boundary (midnight in a zone, a cron tick).
//
// A period chosen per client (a `window` function giving another unit, cron or zone): the period in
// progress keeps the end stored with its count, and the next period, started by the first hit after that
// end, ends at the boundary the op carries (the one its request chose). A client moved from 'day' to
// 'hour' at 10:15 stays in its day until midnight, then counts hours; one moved from 'hour' to 'day' counts
// its hour to 11:00, then the rest of that day.

import type { StoreOp } from '../stores/store-ops.js';
import { type Algorithm, countingWindow } from './algorithm.js';
import { type CounterState, evaluateCounter, refundCounter } from './fixed.js';

/** The end of the period `nowMs` falls in: the op carries this period's end and the next one's. */
export function periodEnd(op: StoreOp, nowMs: number): number {
  const end = op.periodEndMs as number;
  return nowMs < end ? end : (op.nextPeriodEndMs as number);
}

/** The end of the key's period at `nowMs`: the stored one while it lasts (whatever the op's boundary), else the op's. */
function windowEnd(state: CounterState | undefined, op: StoreOp, nowMs: number): number {
  return state !== undefined && nowMs < state.endMs ? state.endMs : periodEnd(op, nowMs);
}

function countIn(state: CounterState | undefined, endMs: number): number {
  return state !== undefined && state.endMs === endMs ? state.count : 0;
}

export const calendar: Algorithm<CounterState> = {
  kind: countingWindow('calendar', ['unit', 'cron', 'timezone'], {
    groupable: true,
    counter: true,
    lease: 'counted',
  }),

  evaluate(state, op, nowMs, add) {
    const endMs = windowEnd(state, op, nowMs);
    return evaluateCounter(countIn(state, endMs), endMs, op, nowMs, add);
  },
  apply(state, op, nowMs) {
    const endMs = windowEnd(state, op, nowMs);
    if (state === undefined) return { count: op.cost, endMs };
    // In place: the store holds the only reference to its state.
    state.count = countIn(state, endMs) + op.cost;
    state.endMs = endMs;
    return state;
  },
  refund: refundCounter,
  expiresAt: (state) => state.endMs,
};
