// Script calls run and their replies read back: a call sent as FCALL (or EVALSHA where the server has no
// functions), the library or script loaded when the server lacks it (function-library.ts); lua/check.lua's
// reply decoded request by request (its format is written once, in lua/protocol.lua's header), and the
// checks of the other scripts' integer replies.

import { SLOT_IDS_PER_MS } from '../../algorithms/concurrency.js';
import { algorithms } from '../../algorithms/index.js';
import { FUNCTION_CONFLICT_WARNING, warnOnce } from '../../warnings.js';
import type { OpResult, StoreOp } from '../store.js';
import type { RedisConnection } from './connection/connection.js';
import {
  FunctionConflict,
  loadLibrary,
  NO_FUNCTIONS,
  type RedisLibrary,
  type RedisScript,
} from './function-library.js';
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
/**
 * A head alone in place of a result: the op's key was empty and it counted at its own limit; below it,
 * FRESH less the rule-wide limit it counted at (FRESH in lua/protocol.lua).
 */
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
 * is the script's main cost per decision. `ruleWide`: the rule-wide limit it was decided at (its head
 * was FRESH less it), which replaces the op's limit (and a burst that follows it) as the script's did.
 */
function freshResult(op: StoreOp, nowMs: number, ruleWide?: number): OpResult {
  const decided = ruleWide === undefined ? op : { ...op, limit: ruleWide };
  const v = algorithms[op.rule.type].evaluate(undefined, decided, nowMs, false);
  v.limit = decided.limit;
  v.overridden = ruleWide !== undefined;
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
    if (head < 0) {
      results[k] = freshResult(ops[k] as StoreOp, nowMs, head === FRESH ? undefined : FRESH - head);
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
        algorithms[(ops[k] as StoreOp).rule.type].kind.holdsSlots &&
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

/** What a server without the library, or a script cache without the script, answers. */
const NOT_LOADED = /^(NOSCRIPT|ERR Function not found)/;

/**
 * Per connection: whether its servers run our functions (until one says it does not, or holds our names
 * for another library), whether the library was loaded or found to be ours, and a load under way.
 */
interface FunctionState {
  functions: boolean;
  checked: boolean;
  loading: Promise<void> | undefined;
  readonly warn: (message: string) => void;
}

const states = new WeakMap<RedisConnection, FunctionState>();

function stateOf(connection: RedisConnection): FunctionState {
  let state = states.get(connection);
  if (state === undefined) {
    // A connection that never loads the library (over HTTP) runs every script by EVALSHA from the start.
    const functions = connection.functions !== false;
    state = {
      functions,
      checked: !functions,
      loading: undefined,
      warn: warnOnce(FUNCTION_CONFLICT_WARNING),
    };
    states.set(connection, state);
  }
  return state;
}

function messageOf(error: unknown): string {
  return error instanceof Error ? error.message : '';
}

/**
 * Loads the library on every master, or finds ours there, before any function of it is called (on first
 * use, and when a server answers that it has none). Where functions are refused, or another library
 * holds our names, the connection runs its scripts by SHA from then on: another tenant's code is never
 * called. Shared by the calls that need it at the same time.
 */
function ensureLibrary(
  connection: RedisConnection,
  state: FunctionState,
  library: RedisLibrary,
): Promise<void> {
  state.loading ??= loadLibrary(connection, library).then(
    () => {
      state.loading = undefined;
      state.checked = true;
    },
    (error: unknown) => {
      state.loading = undefined;
      if (error instanceof FunctionConflict) {
        state.warn(
          `a Redis function library that is not ratekeeper's holds its names (${error.conflict}): ` +
            'ratekeeper never calls it, and runs its own scripts by EVALSHA instead. Delete that library ' +
            '(FUNCTION DELETE), or give each tenant its own ACL user without the FUNCTION command.',
        );
      } else if (!NO_FUNCTIONS.test(messageOf(error))) {
        throw error;
      }
      state.functions = false;
      state.checked = true;
    },
  );
  return state.loading;
}

/**
 * Runs a script: FCALL of its function, the library loaded (or found there with our code) before the
 * connection's first call, and again when the server answers that it has none (a new server, a restart,
 * a failover to a node that never had it, FUNCTION FLUSH); where functions are refused or another
 * library holds our names, EVALSHA from then on, and EVAL (which also caches the script again) only on
 * NOSCRIPT. One round trip in the usual case. On a Cluster every key must share a slot: the first one routes the call.
 */
export function runScript(
  connection: RedisConnection,
  script: RedisScript,
  keys: readonly string[],
  args: readonly string[],
): Promise<unknown> {
  return runScriptThen(connection, script, keys, args, undefined);
}

/**
 * runScript, with `next()` sent right behind the script call, so that Redis runs it right after the
 * script, and again after the script had to be loaded (the first one then ran before it). Resolves
 * with the script's reply once both have answered.
 */
export async function runScriptThen(
  connection: RedisConnection,
  script: RedisScript,
  keys: readonly string[],
  args: readonly string[],
  next: (() => Promise<unknown>) | undefined,
): Promise<unknown> {
  const state = stateOf(connection);
  if (!state.checked) await ensureLibrary(connection, state, script.library);
  const functions = state.functions;
  const argv = [functions ? script.fn : script.sha, String(keys.length)];
  for (let i = 0; i < keys.length; i++) argv.push(keys[i] as string);
  for (let i = 0; i < args.length; i++) argv.push(args[i] as string);
  const call = connection.send(functions ? 'FCALL' : 'EVALSHA', argv, keys[0]);
  const followed = next?.();
  try {
    const reply = await call;
    // Awaiting undefined would still cost a turn of the microtask queue per call.
    if (followed !== undefined) await followed;
    return reply;
  } catch (error) {
    const message = messageOf(error);
    const refused = functions && NO_FUNCTIONS.test(message);
    if (!NOT_LOADED.test(message) && !refused) {
      // The call failed (a timeout, a lost connection): the command behind it may fail the same way,
      // and nothing awaits it any more.
      followed?.catch(() => {});
      throw error;
    }
    await followed;
    const reply = await runLoaded(connection, state, script, argv, functions && !refused, keys[0]);
    await next?.();
    return reply;
  }
}

/**
 * The call again, after the first found its code missing: FCALL once the library is loaded, or, where
 * the server refuses functions or holds our names for another library, EVAL (which caches the script
 * for the EVALSHA calls that follow).
 */
async function runLoaded(
  connection: RedisConnection,
  state: FunctionState,
  script: RedisScript,
  argv: readonly string[],
  functions: boolean,
  routingKey: string | undefined,
): Promise<unknown> {
  if (functions) await ensureLibrary(connection, state, script.library);
  if (functions && state.functions) {
    try {
      return await connection.send('FCALL', argv, routingKey);
    } catch (error) {
      if (!NO_FUNCTIONS.test(messageOf(error))) throw error;
    }
  }
  state.functions = false;
  const again = argv.slice();
  again[0] = script.source;
  return connection.send('EVAL', again, routingKey);
}
