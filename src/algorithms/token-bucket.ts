// Token bucket: refills `limit` tokens per `size`, continuously, up to `burst`; a request takes `cost` tokens.
//
// A size chosen per client (a `window` function) is a refill rate: the state keeps the size its tokens are
// counted in. A request of another size first refills the bucket up to now at the rate in force until now
// (the state's size), then keeps its whole tokens, counted in its own size from then on: the level is kept,
// the new rate applies from the change, and no token is gained for the time before it (the part of a token
// being refilled is dropped). The capacity in tokens (`burst`, else the limit) is the same in any size. A
// state written before sizes could be chosen has no size and counts in the op's.

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
  /** The window size (ms) the tokens are counted in; absent (a state of an earlier release): the op's. */
  sizeMs?: number;
}

/** Time of the refill at `nowMs`: time never runs backwards (a clock behind `ts` reads as `ts`). */
function refillTs(state: TokenState | undefined, nowMs: number): number {
  return state === undefined ? nowMs : Math.max(nowMs, state.ts);
}

/** Scaled tokens at `nowMs` (see refillTs), counted in units of 1/`sizeMs` token (the op's size by default). */
function refilled(
  state: TokenState | undefined,
  op: StoreOp,
  nowMs: number,
  sizeMs = op.rule.sizeMs,
): number {
  const { limit } = op;
  const capacity = burstOf(op) * sizeMs;
  if (state === undefined) return capacity;
  // Once full the bucket stays full; the cap keeps elapsed × limit small. Counted from the level it was
  // left at, which a record can take below zero (a debt takes longer than capacity/limit to refill).
  const elapsed = Math.min(refillTs(state, nowMs) - state.ts, ceilDiv(capacity - state.scaled, limit));
  return Math.min(capacity, state.scaled + elapsed * limit);
}

/** The bucket in the op's size (see the header); the same object when its size is the op's. */
function inOpSize(state: TokenState | undefined, op: StoreOp, nowMs: number): TokenState | undefined {
  const from = state?.sizeMs;
  if (state === undefined || from === undefined || from === op.rule.sizeMs) return state;
  const whole = floorDiv(refilled(state, op, nowMs, from), from);
  return { scaled: whole * op.rule.sizeMs, ts: refillTs(state, nowMs), sizeMs: op.rule.sizeMs };
}

export const tokenBucket: Algorithm<TokenState> = {
  kind: bucketWindow('token bucket'),

  evaluate(stored, op, nowMs, add) {
    const state = inOpSize(stored, op, nowMs);
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
  apply(stored, op, nowMs) {
    const state = inOpSize(stored, op, nowMs);
    const { sizeMs } = op.rule;
    const scaled = refilled(state, op, nowMs) - op.cost * sizeMs;
    const ts = refillTs(state, nowMs);
    if (state === undefined) return { scaled, ts, sizeMs };
    // In place: the store holds the only reference to its state.
    state.scaled = scaled;
    state.ts = ts;
    state.sizeMs = sizeMs;
    return state;
  },
  refund(state, op, nowMs) {
    // The tokens go back in the bucket's own size: a refund does not move it to the size of the op it returns.
    const sizeMs = state.sizeMs ?? op.rule.sizeMs;
    const capacity = burstOf(op) * sizeMs;
    const scaled = Math.min(capacity, refilled(state, op, nowMs, sizeMs) + op.cost * sizeMs);
    if (scaled >= capacity) return undefined;
    const ts = refillTs(state, nowMs);
    return state.sizeMs === undefined ? { scaled, ts } : { scaled, ts, sizeMs };
  },
  expiresAt: (state, op) =>
    state.ts + ceilDiv(burstOf(op) * (state.sizeMs ?? op.rule.sizeMs) - state.scaled, op.limit),
};
