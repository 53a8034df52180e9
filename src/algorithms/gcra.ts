// GCRA (leaky bucket as a meter): one number per key, the theoretical arrival time (TAT) in whole microseconds.

import type { StoreOp } from '../stores/store-ops.js';
import { type Algorithm, bucketWindow, burstOf, verdict } from './algorithm.js';
import { ceilDiv, floorDiv } from './int-math.js';

/**
 * `tatUs`: epoch µs at which the bucket would be empty again. It advances by cost × size/limit per
 * op, rounded to the nearest µs (at most 0.5 µs of error per op; none when size×1000 is a multiple of
 * limit). Decisions count whole units relative to now, exactly (see unitsIn).
 * The state is time, so a key whose limit changes between requests (a plan upgrade, an override)
 * keeps its backlog: what it holds is counted in units of the new limit (a key half a window behind
 * stays half a window behind: 50 of 100 become 500 of 1000).
 */
export interface GcraState {
  tatUs: number;
}

/** Backlog (TAT − now) in µs, never negative; time never runs backwards (a TAT ahead of now stays). */
function backlogUs(state: GcraState | undefined, nowMs: number): number {
  const nowUs = nowMs * 1000;
  return state !== undefined && state.tatUs > nowUs ? state.tatUs - nowUs : 0;
}

/**
 * The latest TAT a state holds: 2^53 - 1 µs (year 2255), so that every TAT is an exact integer in a
 * double (TypeScript, Lua) as in a bigint (PL/pgSQL). Only a debt reaches it (ops counted past the limit:
 * `add`, a settled cost above its estimate): the window's bound (kind.maxLimit, 2^52 µs of backlog) keeps
 * an admitted backlog far below it, and a key at the ceiling is denied for centuries either way.
 */
export const MAX_TAT_US = Number.MAX_SAFE_INTEGER;

/** How far an op moves the TAT: cost × size/limit, rounded to the nearest µs (lua/gcra.lua's stepUs), at most MAX_TAT_US. */
function stepUs(op: StoreOp): number {
  return Math.min(MAX_TAT_US, Math.round((op.cost * op.rule.sizeMs * 1000) / op.limit));
}

/**
 * Units a backlog of `backlogUs` holds at `limit` (one unit takes `unitUs` / limit µs): ceil(backlog ×
 * limit / unitUs), without forming backlog × limit, which passes 2^53 when the limit of a key grows
 * (a plan upgrade after a long backlog). Exact: every product here stays below limit × unitUs.
 */
function unitsIn(backlogUs: number, limit: number, unitUs: number): number {
  const whole = floorDiv(backlogUs, unitUs);
  return whole * limit + ceilDiv((backlogUs - whole * unitUs) * limit, unitUs);
}

/** Ms until (backlog × limit + units × unitUs) µs·limit have drained at limit × 1000 per ms, rounded up; exact as unitsIn. */
function msUntil(backlogUs: number, units: number, op: StoreOp): number {
  const ms = floorDiv(backlogUs, 1000);
  return ms + ceilDiv((backlogUs - ms * 1000) * op.limit + units * op.rule.sizeMs * 1000, op.limit * 1000);
}

export const gcra: Algorithm<GcraState> = {
  // The TAT is epoch µs plus the backlog: half of 2^53 for the backlog leaves the epoch (1.8e15 µs in
  // 2026, 2^52 in 2112) room below MAX_TAT_US.
  kind: bucketWindow('GCRA', ['leaky-bucket'], 2 ** 52),

  evaluate(state, op, nowMs, add) {
    const burst = burstOf(op);
    const backlog = backlogUs(state, nowMs);
    // Units in use, rounded up: the backlog's, plus this op's when it counts.
    const inUse = unitsIn(backlog, op.limit, op.rule.sizeMs * 1000);
    const allowed = inUse + op.cost <= burst;
    const added = allowed || add ? op.cost : 0;
    const counted = inUse + added;
    const remaining = Math.max(0, burst - counted);
    return verdict(
      allowed,
      remaining,
      // One more unit is free once the backlog drops to the multiple of a unit below it.
      counted === 0 ? 0 : msUntil(backlog, added - burst + remaining + 1, op),
      allowed ? 0 : Math.max(1, msUntil(backlog, Math.min(op.cost, burst) - burst, op)),
      counted,
      0,
    );
  },
  apply(state, op, nowMs) {
    const nowUs = nowMs * 1000;
    const tat = state !== undefined && state.tatUs > nowUs ? state.tatUs : nowUs;
    const tatUs = Math.min(MAX_TAT_US, tat + stepUs(op));
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
