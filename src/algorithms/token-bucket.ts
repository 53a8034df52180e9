// Token bucket: refills `limit` tokens per `size`, continuously, up to `burst`; a request takes `cost` tokens.
import type { StoreOp } from '../stores/store.js';
import type { Algorithm } from './algorithm.js';
import { ceilDiv, floorDiv } from './int-math.js';

/**
 * Tokens are kept in units of 1/sizeMs token (`scaled` = tokens × sizeMs), so refill is the whole
 * number `elapsed ms × limit` and every figure is exact integer arithmetic, in TypeScript and in Lua.
 */
export interface TokenState {
  scaled: number;
  /** Epoch ms of the last refill. */
  ts: number;
}

/** Scaled tokens at `nowMs`; time never runs backwards (a clock behind `ts` reads as `ts`). */
function refill(state: TokenState | undefined, op: StoreOp, nowMs: number): TokenState {
  const { burst, limit, sizeMs } = op.rule;
  const capacity = burst * sizeMs;
  if (state === undefined) return { scaled: capacity, ts: nowMs };
  const ts = Math.max(nowMs, state.ts);
  // Past capacity/limit ms the bucket is full anyway; the cap keeps elapsed × limit small.
  const elapsed = Math.min(ts - state.ts, ceilDiv(capacity, limit));
  return { scaled: Math.min(capacity, state.scaled + elapsed * limit), ts };
}

export const tokenBucket: Algorithm<TokenState> = {
  evaluate(state, op, nowMs, add) {
    const { burst, limit, sizeMs } = op.rule;
    const { scaled } = refill(state, op, nowMs);
    const need = op.cost * sizeMs;
    const allowed = scaled >= need;
    const after = allowed || add ? scaled - need : scaled;
    const whole = floorDiv(after, sizeMs);
    // Until one more whole token is there (0 when the bucket is full).
    const nextUnit = Math.max(1, whole + 1) * sizeMs;
    return {
      allowed,
      remaining: Math.max(0, whole),
      resetMs: after >= burst * sizeMs ? 0 : ceilDiv(nextUnit - after, limit),
      // A cost above the burst never fits; the best answer is the time until the bucket is full.
      retryAfterMs: allowed ? 0 : ceilDiv(Math.min(op.cost, burst) * sizeMs - scaled, limit),
      count: burst - whole,
      receipt: 0,
    };
  },
  apply(state, op, nowMs) {
    const live = refill(state, op, nowMs);
    return { scaled: live.scaled - op.cost * op.rule.sizeMs, ts: live.ts };
  },
  refund(state, op, nowMs) {
    const live = refill(state, op, nowMs);
    const capacity = op.rule.burst * op.rule.sizeMs;
    const scaled = Math.min(capacity, live.scaled + op.cost * op.rule.sizeMs);
    return scaled >= capacity ? undefined : { scaled, ts: live.ts };
  },
  expiresAt: (state, op) => state.ts + ceilDiv(op.rule.burst * op.rule.sizeMs - state.scaled, op.rule.limit),
  count: (state, op, nowMs) => op.rule.burst - floorDiv(refill(state, op, nowMs).scaled, op.rule.sizeMs),
};
