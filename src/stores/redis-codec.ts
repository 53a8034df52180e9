// The flat wire format between the Redis store and its scripts: ops as ARGV strings, replies as integers.
import { countKey, escapeIdentity } from './redis-keys.js';
import type { EvalMode, OpResult, StoreOp, StoreRule } from './store.js';

/** Reply integers per refund of lua/refund.lua. */
export const REFUND_FIELDS = 3;

/** Numbers as text Lua's tonumber reads back exactly (JavaScript prints the shortest round-trip form). */
function luaNumber(value: number): string {
  return String(value);
}

/**
 * The first 10 of an op's 13 fields, its rule's (type, limit, sizeMs, buckets, burst, dryRun, lockout
 * durationMs (0: none), escalate, maxDurationMs, forgetAfterMs), computed once per rule: rules are
 * immutable once normalized. The limit and burst fields are placeholders here: OpTable.ref writes the
 * op's own (a limit may differ per request).
 */
const ruleFields = new WeakMap<StoreRule, readonly string[]>();

function fieldsOf(rule: StoreRule): readonly string[] {
  let fields = ruleFields.get(rule);
  if (fields === undefined) {
    const lockout = rule.lockout;
    fields = [
      rule.type,
      '',
      luaNumber(rule.sizeMs),
      luaNumber(rule.buckets),
      luaNumber(rule.burst),
      rule.dryRun ? '1' : '0',
      luaNumber(lockout?.durationMs ?? 0),
      luaNumber(lockout?.escalate ?? 1),
      luaNumber(lockout?.maxDurationMs ?? 0),
      luaNumber(lockout?.forgetAfterMs ?? 0),
    ];
    ruleFields.set(rule, fields);
  }
  return fields;
}

/** A distinct op of one script call: what its uses send. */
interface OpRef {
  readonly cost: number;
  readonly limit: number;
  readonly periodEndMs: number;
  readonly nextPeriodEndMs: number;
  /** Its 1-based index among the call's distinct ops, as text. */
  readonly index: string;
  /** Whether its uses send (and the scripts read) a lock key: only rules with a lockout have one. */
  readonly locks: boolean;
}

/**
 * The distinct ops of one call of lua/check.lua or lua/refund.lua (rule, cost and calendar periods:
 * usually one per rule), each sent once with its 13 fields (readOps in lua/prelude.lua); every use of
 * an op is then its index.
 */
export class OpTable {
  readonly #refs = new Map<StoreRule, OpRef[]>();
  /** m, then the fields of each distinct op. */
  readonly #fields: string[] = ['0'];
  #count = 0;

  /** The op's entry, added on its first use. */
  ref(op: StoreOp): OpRef {
    const periodEndMs = op.periodEndMs ?? 0;
    const nextPeriodEndMs = op.nextPeriodEndMs ?? 0;
    let refs = this.#refs.get(op.rule);
    if (refs === undefined) {
      refs = [];
      this.#refs.set(op.rule, refs);
    }
    for (let k = 0; k < refs.length; k++) {
      const ref = refs[k] as OpRef;
      if (
        ref.cost === op.cost &&
        ref.limit === op.limit &&
        ref.periodEndMs === periodEndMs &&
        ref.nextPeriodEndMs === nextPeriodEndMs
      ) {
        return ref;
      }
    }
    const fields = fieldsOf(op.rule);
    const at = this.#fields.length;
    for (let k = 0; k < fields.length; k++) this.#fields.push(fields[k] as string);
    // The op's limit, and the burst it gives when the rule has none of its own (StoreRule.burst 0).
    // Overrides are not sent yet: RedisStore has no `override` (see Store.override).
    this.#fields[at + 1] = luaNumber(op.limit);
    this.#fields[at + 4] = luaNumber(op.rule.burst || op.limit);
    this.#fields.push(luaNumber(op.cost), luaNumber(periodEndMs), luaNumber(nextPeriodEndMs));
    const ref: OpRef = {
      cost: op.cost,
      limit: op.limit,
      periodEndMs,
      nextPeriodEndMs,
      index: luaNumber(++this.#count),
      locks: (op.rule.lockout?.durationMs ?? 0) !== 0,
    };
    refs.push(ref);
    return ref;
  }

  /** m, then the 13 fields of each distinct op. */
  fields(): string[] {
    this.#fields[0] = luaNumber(this.#count);
    return this.#fields;
  }
}

/**
 * One call of lua/check.lua being filled: the KEYS and ARGV of several requests. Requests of the same
 * shape (clock, mode, ops) are common (every request through one route has the same rules), so each
 * distinct shape is sent once and each request is its shape's index plus its keys.
 */
export class CheckCall {
  readonly keys: string[] = [];
  readonly #ops = new OpTable();
  readonly #shapes = new Map<string, string>();
  /** Per shape: now, mode, consume nothing, n, then n op indexes. */
  readonly #shapeFields: string[] = [];
  /** The shape index of each request. */
  readonly #requestShapes: string[] = [];
  /** Ops in all the requests so far. */
  ops = 0;

  /**
   * Adds a request: its keys (count key, and lock key when its rule has a lockout, per op) and its
   * shape. `nowArg` is the injected clock's time, or '' for the server's TIME.
   */
  add(
    prefix: string,
    ops: readonly StoreOp[],
    mode: EvalMode,
    consumeNothing: boolean,
    nowArg: string,
  ): void {
    let shape = consumeNothing ? `${mode}!${nowArg}` : `${mode} ${nowArg}`;
    let identity: string | undefined;
    let tag = '';
    for (let i = 0; i < ops.length; i++) {
      const op = ops[i] as StoreOp;
      // The rules of a request usually share one identity: escaped once.
      if (op.key !== identity) {
        identity = op.key;
        tag = escapeIdentity(identity);
      }
      const ref = this.#ops.ref(op);
      const count = countKey(prefix, tag, op.rule.name);
      this.keys.push(count);
      if (ref.locks) this.keys.push(`${count}:l`);
      shape += `,${ref.index}`;
    }
    let index = this.#shapes.get(shape);
    if (index === undefined) {
      index = luaNumber(this.#shapes.size + 1);
      this.#shapes.set(shape, index);
      this.#shapeFields.push(nowArg, mode, consumeNothing ? '1' : '0', luaNumber(ops.length));
      for (let i = 0; i < ops.length; i++) this.#shapeFields.push(this.#ops.ref(ops[i] as StoreOp).index);
    }
    this.#requestShapes.push(index);
    this.ops += ops.length;
  }

  /** The keys, then the ARGV (see lua/check.lua). */
  args(): string[] {
    return this.keys.concat(
      this.#ops.fields(),
      luaNumber(this.#shapes.size),
      this.#shapeFields,
      luaNumber(this.#requestShapes.length),
      this.#requestShapes,
    );
  }
}

/** The integers of a script reply (ioredis hands integer replies over as numbers). */
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
 * Reads the results of one request of lua/check.lua (its `ops`) from `reply`, starting at `at` (see
 * the reply format there), into `results`. Returns the position after them, or -1 when the reply does not
 * have that shape.
 */
export function decodeResults(
  reply: readonly unknown[],
  at: number,
  ops: readonly StoreOp[],
  results: OpResult[],
): number {
  for (let k = 0; k < results.length; k++) {
    const head = reply[at];
    const remaining = reply[at + 1];
    const resetMs = reply[at + 2];
    const count = reply[at + 3];
    const receipt = reply[at + 4];
    if (
      typeof head !== 'number' ||
      typeof remaining !== 'number' ||
      typeof resetMs !== 'number' ||
      typeof count !== 'number' ||
      typeof receipt !== 'number'
    ) {
      return -1;
    }
    at += 5;
    // Flags in the low 5 bits, the level above them (a remainder stays exact past 2^31, & would not).
    const flags = head % 32;
    let retryAfterMs: unknown = 0;
    let lockedUntil: unknown = 0;
    if (flags & 8) retryAfterMs = reply[at++];
    if (flags & 16) lockedUntil = reply[at++];
    if (typeof retryAfterMs !== 'number' || typeof lockedUntil !== 'number') return -1;
    results[k] = {
      allowed: (flags & 1) !== 0,
      limit: (ops[k] as StoreOp).limit,
      overridden: false,
      remaining,
      resetMs,
      retryAfterMs,
      locked: (flags & 2) !== 0,
      count,
      receipt,
      level: (head - flags) / 32,
      lockedUntil,
      lockedNow: (flags & 4) !== 0,
    };
  }
  return at;
}
