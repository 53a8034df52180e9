// GCRA (leaky bucket as a meter): one number per key, the theoretical arrival time (TAT) in whole microseconds.
import { type Algorithm, verdict } from './algorithm.js';
import { ceilDiv, floorDiv } from './int-math.js';
import type { StoreOp } from './types.js';

/**
 * `tatUs`: epoch µs at which the bucket would be empty again. It advances by cost × size/limit per
 * op, rounded to the nearest µs (at most 0.5 µs of error per op; none when size×1000 is a multiple of
 * limit). Decisions compare in units of 1/limit µs relative to now, which are exact integers.
 */
export interface GcraState {
  tatUs: number;
}

/** Backlog (TAT − now) in µs, never negative; time never runs backwards (a TAT ahead of now stays). */
function backlogUs(state: GcraState | undefined, nowMs: number): number {
  const nowUs = nowMs * 1000;
  return state !== undefined && state.tatUs > nowUs ? state.tatUs - nowUs : 0;
}

/** How far an op moves the TAT: cost × size/limit, rounded to the nearest µs (lua/gcra.lua's stepUs). */
function stepUs(op: StoreOp): number {
  return Math.round((op.cost * op.rule.sizeMs * 1000) / op.rule.limit);
}

export const gcra: Algorithm<GcraState> = {
  evaluate(state, op, nowMs, add) {
    const { burst, limit, sizeMs } = op.rule;
    // Scaled units: 1 = 1/limit µs, so one request unit is exactly sizeMs × 1000.
    const unit = sizeMs * 1000;
    const capacity = burst * unit;
    const base = backlogUs(state, nowMs) * limit;
    const allowed = base + op.cost * unit <= capacity;
    const used = allowed || add ? base + op.cost * unit : base;
    const free = floorDiv(capacity - used, unit);
    const remaining = Math.max(0, free);
    // One more unit is free once the backlog drops to the multiple of a unit below it.
    const untilUnit = used - (burst - remaining - 1) * unit;
    return verdict(
      allowed,
      remaining,
      used <= 0 || remaining >= burst ? 0 : ceilDiv(untilUnit, limit * 1000),
      allowed ? 0 : Math.max(1, ceilDiv(base + Math.min(op.cost, burst) * unit - capacity, limit * 1000)),
      burst - free,
      0,
    );
  },
  apply(state, op, nowMs) {
    const nowUs = nowMs * 1000;
    const tat = state !== undefined && state.tatUs > nowUs ? state.tatUs : nowUs;
    const tatUs = tat + stepUs(op);
    if (state === undefined) return { tatUs };
    // In place: the store holds the only reference to its state.
    state.tatUs = tatUs;
    return state;
  },
  refund(state, op, nowMs) {
    const tatUs = state.tatUs - stepUs(op);
    return tatUs <= nowMs * 1000 ? undefined : { tatUs };
  },
  expiresAt: (state) => Math.ceil(state.tatUs / 1000),
};
