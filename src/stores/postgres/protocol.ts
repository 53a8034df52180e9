// The PostgreSQL store's wire format: ops as the arrays sql/check.sql reads, and its reply as OpResults.
import { verdict } from '../../algorithms/algorithm.js';
import { WINDOW_TYPES } from '../../algorithms/index.js';
import type { OpResult, StoreOp, WindowType } from '../store-ops.js';

/** Window types as sql/algorithms.sql numbers them: 1, 2, ... in the registry's order. */
export const TYPE_CODES = Object.fromEntries(WINDOW_TYPES.map((type, i) => [type, i + 1])) as Readonly<
  Record<WindowType, number>
>;

/** Numbers per op in `nums` (sql/check.sql's header), and per op in its reply. */
const OP_NUMBERS = 13;
const RESULT_NUMBERS = 9;

/** The flags of a reply head (sql/check.sql). */
const ALLOWED = 1;
const LOCKED = 2;
const LOCKED_NOW = 4;
const OVERRIDDEN = 8;

/** The arguments every call on ops takes after the time: rule names, keys as UTF-8, and 13 numbers per op. */
export interface OpArrays {
  rules: string[];
  keys: Buffer[];
  nums: number[];
}

/** A key as PostgreSQL stores it: UTF-8 bytes (bytea), so that any identity, NUL included, is safe. */
export function keyBytes(key: string): Buffer {
  return Buffer.from(key, 'utf8');
}

export function opArrays(ops: readonly StoreOp[]): OpArrays {
  const rules: string[] = [];
  const keys: Buffer[] = [];
  const nums: number[] = new Array(ops.length * OP_NUMBERS);
  let at = 0;
  for (const op of ops) {
    const rule = op.rule;
    const lockout = rule.lockout;
    rules.push(rule.name);
    keys.push(keyBytes(op.key));
    nums[at++] = TYPE_CODES[rule.type];
    nums[at++] = rule.sizeMs;
    nums[at++] = rule.buckets;
    nums[at++] = rule.burst;
    nums[at++] = op.cost;
    nums[at++] = op.limit;
    nums[at++] = op.periodEndMs ?? 0;
    nums[at++] = op.nextPeriodEndMs ?? 0;
    nums[at++] = lockout?.durationMs ?? 0;
    nums[at++] = lockout?.escalate ?? 1;
    nums[at++] = lockout?.maxDurationMs ?? 0;
    nums[at++] = lockout?.forgetAfterMs ?? 0;
    nums[at++] = rule.dryRun ? 1 : 0;
  }
  return { rules, keys, nums };
}

/** The results of `n` ops from sql/check.sql's reply; its first number is the time decided at. */
export function readResults(reply: unknown, n: number): { nowMs: number; results: OpResult[] } {
  if (!Array.isArray(reply) || reply.length !== 1 + n * RESULT_NUMBERS) {
    throw new Error(`ratekeeper: unexpected reply from PostgreSQL check: ${String(reply).slice(0, 200)}`);
  }
  const results: OpResult[] = [];
  for (let i = 0, at = 1; i < n; i++, at += RESULT_NUMBERS) {
    // The bits, plus 16 × the window the key's override set (ms): past 2^31, so a remainder rather than &.
    const head = reply[at] as number;
    const flags = head % 16;
    const result = verdict(
      (flags & ALLOWED) !== 0,
      reply[at + 2] as number,
      reply[at + 3] as number,
      reply[at + 4] as number,
      reply[at + 5] as number,
      reply[at + 6] as number,
    );
    result.limit = reply[at + 1] as number;
    result.overridden = (flags & OVERRIDDEN) !== 0;
    result.locked = (flags & LOCKED) !== 0;
    result.lockedNow = (flags & LOCKED_NOW) !== 0;
    result.level = reply[at + 7] as number;
    result.lockedUntil = reply[at + 8] as number;
    if (head >= 16) result.windowMs = (head - flags) / 16;
    results.push(result);
  }
  return { nowMs: reply[0] as number, results };
}

/** A NOTIFY payload is at most 8000 bytes: a longer announcement says "forget everything" instead. */
const MAX_PAYLOAD_BYTES = 7999;

/**
 * The announcement of a reset (`override`: an override changed; 'returned': a leased block gave units
 * back) of `key` for `rule`, as JSON; an empty key with `override`: the rule's rule-wide limit changed.
 */
export function announcement(rule: string, key: string, override: boolean | 'returned'): string {
  const payload = JSON.stringify(
    override === 'returned' ? [rule, key, 'u'] : override ? [rule, key, 'o'] : [rule, key],
  );
  return Buffer.byteLength(payload) <= MAX_PAYLOAD_BYTES ? payload : JSON.stringify(['', '']);
}

/** An announcement as (rule, key, override, returned), or undefined for anything else on the channel. */
export function readAnnouncement(
  payload: string | undefined,
): [string, string, boolean, boolean] | undefined {
  let parsed: unknown;
  try {
    parsed = JSON.parse(payload ?? '');
  } catch {
    return undefined;
  }
  if (!Array.isArray(parsed) || typeof parsed[0] !== 'string' || typeof parsed[1] !== 'string')
    return undefined;
  return [parsed[0], parsed[1], parsed[2] === 'o', parsed[2] === 'u'];
}
