// Calendar window: a fixed window whose end is a wall-clock boundary (midnight in a zone, a cron tick).

import type { StoreOp } from '../stores/store-ops.js';
import { type Algorithm, countingWindow } from './algorithm.js';
import { type CounterState, evaluateCounter, refundCounter } from './fixed.js';

/** The end of the period `nowMs` falls in: the op carries this period's end and the next one's. */
export function periodEnd(op: StoreOp, nowMs: number): number {
  const end = op.periodEndMs as number;
  return nowMs < end ? end : (op.nextPeriodEndMs as number);
}

function countIn(state: CounterState | undefined, endMs: number): number {
  return state !== undefined && state.endMs === endMs ? state.count : 0;
}

export const calendar: Algorithm<CounterState> = {
  kind: countingWindow('calendar', ['unit', 'cron', 'timezone'], {
    groupable: true,
    counter: true,
    unchosen:
      'a calendar window is the same wall-clock period for every client (midnight in its zone, a cron tick): give clients of another period a rule of their own',
    lease: 'counted',
  }),

  evaluate(state, op, nowMs, add) {
    const endMs = periodEnd(op, nowMs);
    return evaluateCounter(countIn(state, endMs), endMs, op, nowMs, add);
  },
  apply(state, op, nowMs) {
    const endMs = periodEnd(op, nowMs);
    if (state === undefined) return { count: op.cost, endMs };
    // In place: the store holds the only reference to its state.
    state.count = countIn(state, endMs) + op.cost;
    state.endMs = endMs;
    return state;
  },
  refund: refundCounter,
  expiresAt: (state) => state.endMs,
};
