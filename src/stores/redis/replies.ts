// Script replies read back: lua/check.lua's reply decoded request by request (its format is written
// once, in lua/protocol.lua's header), and the checks of the other scripts' integer replies.

import { SLOT_IDS_PER_MS } from '../../algorithms/concurrency.js';
import { algorithms, windowKind } from '../../algorithms/index.js';
import type { OpResult, StoreOp } from '../store.js';
import { type ScriptTime, SERVER_TIME } from './op-text.js';

/** The bits of a check reply head (lua/protocol.lua: the same names and values). */
export const Flag = {
  ALLOWED: 1,
  /** lockedUntil follows (after retryAfterMs). */
  LOCKED: 2,
  LOCKED_NOW: 4,
  RETRY_AFTER_FOLLOWS: 8,
  /** An override decided the limit, which follows (after retryAfterMs and lockedUntil). */
  OVERRIDDEN: 16,
  /** `remaining` was left out: it is max(0, the limit in force - count). */
  REMAINING_DERIVED: 32,
  /** `receipt` was left out: it is the request's time + resetMs (a window's end). */
  RECEIPT_DERIVED: 64,
  /** The key's override set the window, whose size (ms) follows the limit. */
  WINDOWED: 128,
} as const;
/** The level counts in multiples of this, above the flags (LEVEL_UNIT in lua/protocol.lua). */
export const LEVEL_UNIT = 256;
/** A head alone in place of a result: the op's key was empty and it counted at its own limit (FRESH in lua/protocol.lua). */
export const FRESH = -1;

/** The integers of a script reply (integer replies arrive as numbers). */
export function integers(reply: unknown, expected: number, script: string): number[] {
  if (!Array.isArray(reply) || reply.length !== expected || !reply.every((v) => typeof v === 'number')) {
    throw unexpected(reply, script);
  }
  return reply as number[];
}

export function unexpected(reply: unknown, script: string): Error {
  return new Error(`ratekeeper: unexpected reply from the ${script} script: ${JSON.stringify(reply)}`);
}

/**
 * A lua/check.lua reply, request by request: `outcome(r, results, serverMs)` with the results of
 * request r (of its ops, `opsOf(r)`), or `outcome(r, error)` when its evaluation failed on the server
 * (Redis's own message, e.g. "OOM command not allowed ...", as a failed call would give it) or the
 * reply lost its shape. `serverMs`: the server's time (epoch ms; 0 when no request asked for it).
 */
export function decodeCheckReply(
  reply: unknown,
  requests: number,
  opsOf: (r: number) => readonly StoreOp[],
  timeOf: (r: number) => ScriptTime,
  outcome: (r: number, results: OpResult[] | Error, serverMs: number) => void,
): void {
  if (!Array.isArray(reply) || typeof reply[0] !== 'number') {
    const error = unexpected(reply, 'check');
    for (let r = 0; r < requests; r++) outcome(r, error, 0);
    return;
  }
  const serverMs = reply[0];
  let at = 1;
  for (let r = 0; r < requests; r++) {
    const head: unknown = reply[at];
    if (typeof head === 'string') {
      outcome(r, new Error(head), serverMs);
      at++;
      continue;
    }
    const ops = opsOf(r);
    const results: OpResult[] = new Array(ops.length);
    const time = timeOf(r);
    at = decodeResults(reply, at, ops, time === SERVER_TIME ? serverMs : time, results);
    if (at < 0) {
      // The reply has lost its shape: nothing after this point can be read either.
      const error = unexpected(reply, 'check');
      for (let rest = r; rest < requests; rest++) outcome(rest, error, serverMs);
      return;
    }
    outcome(r, results, serverMs);
  }
}

/**
 * The result of an op answered FRESH: its algorithm's verdict on an empty state at `nowMs`, as the
 * script reached it. Computed here, not sent: it is fully the op's and the time's, and the reply's size
 * is the script's main cost per decision.
 */
function freshResult(op: StoreOp, nowMs: number): OpResult {
  const v = algorithms[op.rule.type].evaluate(undefined, op, nowMs, false);
  v.limit = op.limit;
  return v;
}

/**
 * Reads the results of one request (its `ops`, decided at `nowMs`) from `reply`, starting at `at`, into
 * `results`. Returns the position after them, or -1 when the reply does not have that shape.
 */
function decodeResults(
  reply: readonly unknown[],
  at: number,
  ops: readonly StoreOp[],
  nowMs: number,
  results: OpResult[],
): number {
  for (let k = 0; k < results.length; k++) {
    const head = reply[at];
    if (typeof head !== 'number') return -1;
    at++;
    if (head === FRESH) {
      results[k] = freshResult(ops[k] as StoreOp, nowMs);
      continue;
    }
    // A remainder rather than &: it stays exact past 2^31.
    const flags = head % LEVEL_UNIT;
    let remaining: unknown = 0;
    if ((flags & Flag.REMAINING_DERIVED) === 0) remaining = reply[at++];
    const resetMs = reply[at];
    const count = reply[at + 1];
    at += 2;
    let receipt: unknown = 0;
    if ((flags & Flag.RECEIPT_DERIVED) === 0) {
      receipt = reply[at++];
      // A slot id comes as its distance from the request's first (lua/protocol.lua putResult).
      if (
        receipt !== 0 &&
        typeof receipt === 'number' &&
        windowKind((ops[k] as StoreOp).rule.type).holdsSlots &&
        Number.isInteger(nowMs)
      )
        receipt += nowMs * SLOT_IDS_PER_MS;
    } else if (typeof resetMs === 'number') receipt = nowMs + resetMs;
    let retryAfterMs: unknown = 0;
    let lockedUntil: unknown = 0;
    const overridden = (flags & Flag.OVERRIDDEN) !== 0;
    let limit: unknown = (ops[k] as StoreOp).limit;
    if (flags & Flag.RETRY_AFTER_FOLLOWS) retryAfterMs = reply[at++];
    if (flags & Flag.LOCKED) lockedUntil = reply[at++];
    if (overridden) limit = reply[at++];
    const windowMs = flags & Flag.WINDOWED ? reply[at++] : undefined;
    if (
      typeof remaining !== 'number' ||
      typeof resetMs !== 'number' ||
      typeof count !== 'number' ||
      typeof receipt !== 'number' ||
      typeof retryAfterMs !== 'number' ||
      typeof lockedUntil !== 'number' ||
      typeof limit !== 'number' ||
      (windowMs !== undefined && typeof windowMs !== 'number')
    ) {
      return -1;
    }
    if ((flags & Flag.REMAINING_DERIVED) !== 0) remaining = Math.max(0, limit - count);
    results[k] = {
      allowed: (flags & Flag.ALLOWED) !== 0,
      limit,
      overridden,
      remaining: remaining as number,
      resetMs,
      retryAfterMs,
      locked: (flags & Flag.LOCKED) !== 0,
      count,
      receipt,
      level: (head - flags) / LEVEL_UNIT,
      lockedUntil,
      lockedNow: (flags & Flag.LOCKED_NOW) !== 0,
    };
    if (windowMs !== undefined) (results[k] as OpResult).windowMs = windowMs as number;
  }
  return at;
}
