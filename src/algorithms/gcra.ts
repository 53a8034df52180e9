// GCRA (leaky bucket as a meter): one number per key, the theoretical arrival time (TAT) in whole microseconds.
import type { StoreOp } from '../stores/store.js';
import type { Algorithm } from './algorithm.js';

/**
 * `tatUs`: epoch microseconds at which the bucket would be empty again. Stored as an integer
 * (rounded to the nearest µs after each op: at most 0.5 µs of error per admitted unit).
 */
export interface GcraState {
  tatUs: number;
}

/** Emission interval: µs per unit. */
function intervalUs(op: StoreOp): number {
  return (op.rule.sizeMs * 1000) / op.rule.limit;
}

/** Units free when `usedUs` of the bucket's capacity is taken; the small slack absorbs the µs rounding. */
function free(usedUs: number, op: StoreOp, t: number): number {
  return Math.floor((op.rule.burst * t - usedUs) / t + 0.001);
}

export const gcra: Algorithm<GcraState> = {
  evaluate(state, op, nowMs, add) {
    const t = intervalUs(op);
    const capUs = op.rule.burst * t;
    const nowUs = nowMs * 1000;
    const tat = state !== undefined && state.tatUs > nowUs ? state.tatUs : nowUs;
    const next = tat + op.cost * t;
    const allowed = next - nowUs <= capUs;
    const usedUs = (allowed || add ? next : tat) - nowUs;
    const freeUnits = free(usedUs, op, t);
    const remaining = Math.max(0, freeUnits);
    // One more unit is free once used capacity drops to the next multiple of the interval below it.
    const untilUnitUs = usedUs <= 0 ? 0 : usedUs - (op.rule.burst - remaining - 1) * t;
    return {
      allowed,
      remaining,
      resetMs: usedUs <= 0 || remaining >= op.rule.burst ? 0 : Math.max(1, Math.ceil(untilUnitUs / 1000)),
      retryAfterMs: allowed ? 0 : Math.max(1, Math.ceil((tat + Math.min(op.cost, op.rule.burst) * t - nowUs - capUs) / 1000)),
      count: op.rule.burst - freeUnits,
      receipt: 0,
    };
  },
  apply(state, op, nowMs) {
    const nowUs = nowMs * 1000;
    const tat = state !== undefined && state.tatUs > nowUs ? state.tatUs : nowUs;
    return { tatUs: Math.round(tat + op.cost * intervalUs(op)) };
  },
  refund(state, op, nowMs) {
    const nowUs = nowMs * 1000;
    const tatUs = Math.round(state.tatUs - op.cost * intervalUs(op));
    return tatUs <= nowUs ? undefined : { tatUs };
  },
  expiresAt: (state) => Math.ceil(state.tatUs / 1000),
  count(state, op, nowMs) {
    const nowUs = nowMs * 1000;
    const usedUs = state !== undefined && state.tatUs > nowUs ? state.tatUs - nowUs : 0;
    return op.rule.burst - free(usedUs, op, intervalUs(op));
  },
};
