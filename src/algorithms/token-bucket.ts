// Token bucket: refills `limit` tokens per `size`, continuously, up to `burst`; a request takes `cost` tokens.
import type { StoreOp } from '../stores/store.js';
import type { Algorithm } from './algorithm.js';

/** Tokens left at `ts` (epoch ms). Tokens are fractional; lua/token-bucket.lua stores them with 17 digits, so both stores compute alike. */
export interface TokenState {
  tokens: number;
  ts: number;
}

/** Tokens at `nowMs`; time never runs backwards (a clock behind `ts` reads as `ts`). */
function refill(state: TokenState | undefined, op: StoreOp, nowMs: number): TokenState {
  const { burst, limit, sizeMs } = op.rule;
  if (state === undefined) return { tokens: burst, ts: nowMs };
  const ts = nowMs > state.ts ? nowMs : state.ts;
  return { tokens: Math.min(burst, state.tokens + ((ts - state.ts) * limit) / sizeMs), ts };
}

/** Ms for the bucket to gain `tokens`. */
function msFor(tokens: number, op: StoreOp): number {
  return Math.ceil((tokens * op.rule.sizeMs) / op.rule.limit);
}

export const tokenBucket: Algorithm<TokenState> = {
  evaluate(state, op, nowMs, add) {
    const { burst } = op.rule;
    const { tokens } = refill(state, op, nowMs);
    const allowed = tokens >= op.cost;
    const after = allowed || add ? tokens - op.cost : tokens;
    const remaining = Math.max(0, Math.floor(after));
    return {
      allowed,
      remaining,
      // Until one more whole token is there (0 when the bucket is full).
      resetMs: after >= burst ? 0 : msFor(Math.max(1, Math.floor(after) + 1) - after, op),
      // A cost above the burst never fits; the best answer is the time until the bucket is full.
      retryAfterMs: allowed ? 0 : msFor(Math.min(op.cost, burst) - tokens, op),
      count: burst - Math.floor(after),
      receipt: 0,
    };
  },
  apply(state, op, nowMs) {
    const live = refill(state, op, nowMs);
    return { tokens: live.tokens - op.cost, ts: live.ts };
  },
  refund(state, op, nowMs) {
    const live = refill(state, op, nowMs);
    const tokens = Math.min(op.rule.burst, live.tokens + op.cost);
    return tokens >= op.rule.burst ? undefined : { tokens, ts: live.ts };
  },
  expiresAt: (state, op) => state.ts + msFor(op.rule.burst - state.tokens, op),
  count: (state, op, nowMs) => op.rule.burst - Math.floor(refill(state, op, nowMs).tokens),
};
