// The flat wire format between the Redis store and its scripts: ops as ARGV strings, replies as integers.
import type { OpResult, StoreOp } from './store.js';

/** ARGV entries per op; the order of readOp in lua/prelude.lua. */
export const OP_FIELDS = 13;
/** Reply integers per op of lua/check.lua. */
export const RESULT_FIELDS = 10;
/** Reply integers per refund of lua/refund.lua. */
export const REFUND_FIELDS = 3;

/** Numbers as text Lua's tonumber reads back exactly (JavaScript prints the shortest round-trip form). */
function text(value: number): string {
  return String(value);
}

/**
 * Appends one op's fields to `argv`: type, limit, sizeMs, buckets, burst, cost, periodEndMs,
 * nextPeriodEndMs, dryRun, lockout durationMs (0: none), escalate, maxDurationMs, forgetAfterMs.
 */
export function encodeOp(op: StoreOp, argv: string[]): void {
  const { rule } = op;
  const lockout = rule.lockout;
  argv.push(
    rule.type,
    text(rule.limit),
    text(rule.sizeMs),
    text(rule.buckets),
    text(rule.burst),
    text(op.cost),
    text(op.periodEndMs ?? 0),
    text(op.nextPeriodEndMs ?? 0),
    rule.dryRun ? '1' : '0',
    text(lockout?.durationMs ?? 0),
    text(lockout?.escalate ?? 1),
    text(lockout?.maxDurationMs ?? 0),
    text(lockout?.forgetAfterMs ?? 0),
  );
}

/** The integers of a script reply (ioredis hands integer replies over as numbers). */
export function integers(reply: unknown, expected: number, script: string): number[] {
  if (!Array.isArray(reply) || reply.length !== expected || !reply.every((v) => typeof v === 'number')) {
    throw new Error(`ratekeeper: unexpected reply from the ${script} script: ${JSON.stringify(reply)}`);
  }
  return reply as number[];
}

/** Op `i`'s result from a check reply (the reply's first integer is the time). */
export function decodeResult(reply: readonly number[], i: number): OpResult {
  const at = 1 + i * RESULT_FIELDS;
  const field = (k: number) => reply[at + k] as number;
  return {
    allowed: field(0) === 1,
    remaining: field(1),
    resetMs: field(2),
    retryAfterMs: field(3),
    locked: field(4) === 1,
    count: field(5),
    receipt: field(6),
    level: field(7),
    lockedUntil: field(8),
    lockedNow: field(9) === 1,
  };
}
