// Token bucket: refills `limit` tokens per `size`, continuously, up to `burst`; a request takes `cost` tokens.

import type { StoreOp } from '../stores/store-ops.js';
import { type Algorithm, bucketWindow, burstOf, verdict } from './algorithm.js';
import { ceilDiv, floorDiv } from './int-math.js';

/**
 * Tokens are kept in units of 1/sizeMs token (`scaled` = tokens × sizeMs), so refill is the whole
 * number `elapsed ms × limit` and every figure is exact integer arithmetic, in TypeScript and in Lua.
 * The unit does not depend on the limit, so a key whose limit changes between requests (a plan
 * upgrade, an override) keeps its tokens: they refill at the rate of the request that reads them, up
 * to its capacity (tokens above it are cut), and a state left alone until it would have been full at
 * the rate it was written with has expired, so it reads as a full bucket.
 */
export interface TokenState {
  scaled: number;
  /** Epoch ms of the last refill. */
  ts: number;
}

/** Time of the refill at `nowMs`: time never runs backwards (a clock behind `ts` reads as `ts`). */
function refillTs(state: TokenState | undefined, nowMs: number): number {
  return state === undefined ? nowMs : Math.max(nowMs, state.ts);
}

/** Scaled tokens at `nowMs` (see refillTs). */
function refilled(state: TokenState | undefined, op: StoreOp, nowMs: number): number {
  const { limit } = op;
  const capacity = burstOf(op) * op.rule.sizeMs;
  if (state === undefined) return capacity;
  // Once full the bucket stays full; the cap keeps elapsed × limit small. Counted from the level it was
  // left at, which a record can take below zero (a debt takes longer than capacity/limit to refill).
  const elapsed = Math.min(refillTs(state, nowMs) - state.ts, ceilDiv(capacity - state.scaled, limit));
  return Math.min(capacity, state.scaled + elapsed * limit);
}

export const tokenBucket: Algorithm<TokenState> = {
  kind: bucketWindow(
    'token bucket',
    [],
    Number.MAX_SAFE_INTEGER,
    "a token bucket's level is kept in units of its size, so a size chosen per request would misread it: use a GCRA window (leaky-bucket), whose state is a time",
  ),

  evaluate(state, op, nowMs, add) {
    const { limit } = op;
    const { sizeMs } = op.rule;
    const burst = burstOf(op);
    const scaled = refilled(state, op, nowMs);
    const need = op.cost * sizeMs;
    const allowed = scaled >= need;
    const after = allowed || add ? scaled - need : scaled;
    const whole = floorDiv(after, sizeMs);
    // Until one more whole token is there (0 when the bucket is full).
    const nextUnit = Math.max(1, whole + 1) * sizeMs;
    return verdict(
      allowed,
      Math.max(0, whole),
      after >= burst * sizeMs ? 0 : ceilDiv(nextUnit - after, limit),
      // A cost above the burst never fits; the best answer is the time until the bucket is full.
      allowed ? 0 : ceilDiv(Math.min(op.cost, burst) * sizeMs - scaled, limit),
      burst - whole,
      0,
    );
  },
  apply(state, op, nowMs) {
    const scaled = refilled(state, op, nowMs) - op.cost * op.rule.sizeMs;
    const ts = refillTs(state, nowMs);
    if (state === undefined) return { scaled, ts };
    // In place: the store holds the only reference to its state.
    state.scaled = scaled;
    state.ts = ts;
    return state;
  },
  refund(state, op, nowMs) {
    const capacity = burstOf(op) * op.rule.sizeMs;
    const scaled = Math.min(capacity, refilled(state, op, nowMs) + op.cost * op.rule.sizeMs);
    return scaled >= capacity ? undefined : { scaled, ts: refillTs(state, nowMs) };
  },
  expiresAt: (state, op) => state.ts + ceilDiv(burstOf(op) * op.rule.sizeMs - state.scaled, op.limit),
};
