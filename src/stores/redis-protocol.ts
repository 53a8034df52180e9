// The wire between the Redis store and its Lua scripts, in one place: key names, argument layouts,
// result flags and reply decoding. lua/protocol.lua and lua/check.lua are the other side.
import { algorithms } from '../algorithms/index.js';
import { escapeIdentity, escapeRuleName, slotTag, tagSlot } from './redis-hash-tags.js';
import type { EvalMode, OpResult, StoreOp, StoreRule } from './store.js';

// ---- Key names: `<prefix>:{<identity>}:<rule>`, identities and rule names escaped (redis-hash-tags.ts).

/** What makes a count key its lock key. */
const LOCK_SUFFIX = ':l';
/** What makes a count key its override key. */
const OVERRIDE_SUFFIX = ':o';

/** The count key of a rule for an identity already escaped (`tag`). */
export function countKey(prefix: string, tag: string, rule: string): string {
  return `${prefix}:{${tag}}:${escapeRuleName(rule)}`;
}

/** The lock state of a rule for an identity (rare: only rules with a lockout have one), beside its count key. */
export function lockKey(count: string): string {
  return count + LOCK_SUFFIX;
}

/** The key names of one rule for one identity; `tag` is the escaped identity that decides the slot. */
export interface RedisOpKeys {
  readonly tag: string;
  readonly count: string;
  readonly lock: string;
}

/**
 * The limit override of a rule for an identity (lua/override.lua writes it), beside its count key: read
 * by the scripts only for rules that have had an override (OverrideReads).
 */
export function overrideKey(count: string): string {
  return count + OVERRIDE_SUFFIX;
}

/**
 * The rules that have had an override, each listed once (SADD), so that a process learning of them
 * (redis-overrides.ts) knows which rules' overrides its scripts must read. Not read by any script:
 * any slot will do.
 */
export function overriddenRulesKey(prefix: string): string {
  return `${prefix}:overridden`;
}

export function opKeys(prefix: string, rule: string, identity: string): RedisOpKeys {
  const tag = escapeIdentity(identity);
  const count = countKey(prefix, tag, rule);
  return { tag, count, lock: lockKey(count) };
}

/**
 * A rule's lock index: a ZSET, score = untilMs (epoch ms), member `<level>:<identity>`, written by the
 * script that places the lock, so it must share the identity's slot. Standalone (and Sentinel), `slot`
 * undefined: one per rule, `<prefix>:locks:{<rule>}`. Cluster: one per rule and slot,
 * `<prefix>:{<slot tag>}:<rule>:locks`, where the slot tag is a short string that hashes to `slot`
 * (no count key ends in `:locks`: rule names hold no `:`; lock keys end in `:l`).
 */
export function lockIndexKey(prefix: string, rule: string, slot: number | undefined): string {
  const name = escapeRuleName(rule);
  return slot === undefined ? `${prefix}:locks:{${name}}` : `${prefix}:{${slotTag(slot)}}:${name}:locks`;
}

/** SCAN's MATCH pattern for a rule's Cluster lock indexes (the prefix's glob characters escaped). */
export function lockIndexPattern(prefix: string, rule: string): string {
  const glob = (text: string) => text.replace(/[*?[\]\\]/g, '\\$&');
  return `${glob(`${prefix}:{`)}*${glob(`}:${escapeRuleName(rule)}:locks`)}`;
}

/** Whether a key the pattern matched is a lock index: its hash tag is the slot tag of its slot. */
export function isLockIndexKey(key: string, prefix: string, rule: string): boolean {
  return key === lockIndexKey(prefix, rule, tagSlot(key.slice(prefix.length + 2, key.indexOf('}'))));
}

/** The slot of an escaped identity's lock index: undefined (one index per rule) off a Cluster. */
export function indexSlot(space: KeySpace, tag: string): number | undefined {
  return space.cluster ? tagSlot(tag) : undefined;
}

/** `<level>:<identity>` of a lock-index member (built by lockIndexMember in lua/protocol.lua). */
export function parseLockIndexMember(member: string): { level: number; identity: string } {
  const colon = member.indexOf(':');
  return { level: Number(member.slice(0, colon)), identity: member.slice(colon + 1) };
}

/** The pub/sub channel on which resets are announced to every process. */
export function resetChannel(prefix: string): string {
  return `${prefix}:reset`;
}

// ---- Arguments.

/** The `now` argument asking a script for the server's own clock (TIME); SERVER_TIME in lua/protocol.lua. */
export const SERVER_TIME = 'server';

/** When a script call decides: an injected clock's epoch ms, or the Redis server's own clock. */
export type ScriptTime = number | typeof SERVER_TIME;

/** Numbers as text Lua's tonumber reads back exactly (JavaScript prints the shortest round-trip form). */
export function luaNumber(value: number): string {
  return String(value);
}

/** A script's `now` argument. */
export function timeArgument(time: ScriptTime): string {
  return time === SERVER_TIME ? SERVER_TIME : luaNumber(time);
}

/**
 * The first 10 of an op's 13 fields (readOp in lua/protocol.lua), its rule's (type, limit, sizeMs,
 * buckets, burst, dryRun, lockout durationMs (0: none), escalate, maxDurationMs, forgetAfterMs), as
 * the text before and after the limit and burst, computed once per rule: rules are immutable once
 * normalized. The op's own limit and burst go between (a limit may differ per request).
 */
interface RuleText {
  /** `type,` */
  readonly head: string;
  /** `,sizeMs,buckets,` */
  readonly size: string;
  /** `,flags,lockout fields,` for an op whose override is not read, and for one whose override is. */
  readonly tail: string;
  readonly tailReadingOverride: string;
  /** The last op text made for the rule, and what it was made of. */
  last?: {
    readonly limit: number;
    readonly cost: number;
    readonly readsOverride: boolean;
    readonly periodEndMs: number | undefined;
    readonly nextPeriodEndMs: number | undefined;
    readonly text: string;
  };
}

const ruleTexts = new WeakMap<StoreRule, RuleText>();

function textOf(rule: StoreRule): RuleText {
  let text = ruleTexts.get(rule);
  if (text === undefined) {
    const lockout = rule.lockout;
    const lockFields = [
      luaNumber(lockout?.durationMs ?? 0),
      luaNumber(lockout?.escalate ?? 1),
      luaNumber(lockout?.maxDurationMs ?? 0),
      luaNumber(lockout?.forgetAfterMs ?? 0),
    ].join(',');
    text = {
      head: `${rule.type},`,
      size: `,${luaNumber(rule.sizeMs)},${luaNumber(rule.buckets)},`,
      tail: `,${rule.dryRun ? '1' : '0'},${lockFields},`,
      tailReadingOverride: `,${overrideFlags(rule)},${lockFields},`,
    };
    ruleTexts.set(rule, text);
  }
  return text;
}

/** Whether an op's uses send (and the scripts read) a lock key and a lock index: only rules with a lockout. */
export function hasLockout(rule: StoreRule): boolean {
  return (rule.lockout?.durationMs ?? 0) !== 0;
}

/**
 * The flags field of an op whose override is read (readOp in lua/protocol.lua): 2, + 1 for a dry run,
 * + 4 when its burst follows the limit (the rule has none of its own). Other ops send '0' or '1'.
 */
function overrideFlags(rule: StoreRule): string {
  return luaNumber(2 + (rule.dryRun ? 1 : 0) + (rule.burst === 0 ? 4 : 0));
}

/**
 * An op as the scripts read it (readOp in lua/protocol.lua): its 13 fields joined by ','. The scripts
 * keep what they read of each text, so an op seen before costs them a table lookup.
 */
export function opText(op: StoreOp, readsOverride: boolean): string {
  const rule = op.rule;
  const text = textOf(rule);
  // The last text made for the rule is usually the next one's (the same limit and cost on every request).
  const last = text.last;
  if (
    last !== undefined &&
    last.limit === op.limit &&
    last.cost === op.cost &&
    last.readsOverride === readsOverride &&
    last.periodEndMs === op.periodEndMs &&
    last.nextPeriodEndMs === op.nextPeriodEndMs
  ) {
    return last.text;
  }
  const made = makeOpText(op, text, readsOverride);
  text.last = {
    limit: op.limit,
    cost: op.cost,
    readsOverride,
    periodEndMs: op.periodEndMs,
    nextPeriodEndMs: op.nextPeriodEndMs,
    text: made,
  };
  return made;
}

function makeOpText(op: StoreOp, text: RuleText, readsOverride: boolean): string {
  const rule = op.rule;
  const limit = luaNumber(op.limit);
  // The burst an op gives when its rule has none of its own (StoreRule.burst 0): its limit.
  const burst = rule.burst === 0 ? limit : luaNumber(rule.burst);
  return (
    text.head +
    limit +
    text.size +
    burst +
    (readsOverride ? text.tailReadingOverride : text.tail) +
    luaNumber(op.cost) +
    (op.periodEndMs === undefined
      ? ',0,0'
      : `,${luaNumber(op.periodEndMs)},${luaNumber(op.nextPeriodEndMs ?? 0)}`)
  );
}

/** The distinct ops of one call of lua/refund.lua, each sent once as its text; every use is then its index. */
export class OpTable {
  readonly #indexes = new Map<string, string>();
  /** m, then the text of each distinct op. */
  readonly #texts: string[] = ['0'];

  /** The op's index, as text; the op is added on its first use. `readsOverride`: see OverrideReads. */
  index(op: StoreOp, readsOverride = false): string {
    const text = opText(op, readsOverride);
    let index = this.#indexes.get(text);
    if (index === undefined) {
      this.#texts.push(text);
      index = luaNumber(this.#texts.length - 1);
      this.#indexes.set(text, index);
    }
    return index;
  }

  /** m, then the text of each distinct op. */
  fields(): string[] {
    this.#texts[0] = luaNumber(this.#texts.length - 1);
    return this.#texts;
  }
}

/** Whether the scripts must read the override of a rule's keys (redis-overrides.ts). */
export interface OverrideReads {
  reads(rule: string): boolean;
}

/**
 * Where the keys of a call go: the store's prefix, whether it talks to a Cluster (lock-index names),
 * and which rules' overrides are read (none without `overrides`).
 */
export interface KeySpace {
  readonly prefix: string;
  readonly cluster: boolean;
  readonly overrides?: OverrideReads;
}

/** Whether the ops of `rule` read their override in a call on `space`. */
function readsOverride(space: KeySpace | undefined, rule: StoreRule): boolean {
  return space?.overrides?.reads(rule.name) === true;
}

/**
 * One call of lua/check.lua being filled: the KEYS and ARGV of several requests. Requests of the same
 * shape (time, mode, ops) are common (every request through one route has the same rules), so each
 * distinct shape is sent once and each request is its keys (and its shape's index, when the call has
 * several).
 */
export class CheckCall {
  readonly keys: string[] = [];
  /** `now shape text` -> its 1-based index. */
  readonly #shapes = new Map<string, string>();
  /** Per shape: now, its text. */
  readonly #shapeFields: string[] = [];
  /** Per request: its shape's index, then the identity of each of its lockout ops. */
  readonly #requestFields: string[] = [];
  /** Where each request's shape index is in #requestFields (left out when the call has one shape). */
  readonly #indexAt: number[] = [];
  /** Requests and ops added so far. */
  requests = 0;
  ops = 0;
  /** The op texts of the request being added (reused). */
  readonly #texts: string[] = [];
  /** The shape of the request added last. */
  #last:
    | {
        readonly now: string;
        readonly mode: EvalMode;
        readonly consumeNothing: boolean;
        readonly texts: readonly string[];
        readonly index: string;
      }
    | undefined;

  /**
   * Adds a request: its keys (per op the count key, its override key when its rule's overrides are
   * read, and the lock key and lock index when its rule has a lockout) and its shape.
   * `consumeNothing`: decide and lock, but consume nothing.
   */
  add(
    space: KeySpace,
    ops: readonly StoreOp[],
    mode: EvalMode,
    consumeNothing: boolean,
    time: ScriptTime,
  ): void {
    const now = timeArgument(time);
    // The texts of the request's ops, joined after its mode into its shape below.
    const texts = this.#texts;
    texts.length = 0;
    this.#indexAt.push(this.#requestFields.length);
    this.#requestFields.push('');
    let identity: string | undefined;
    let tag = '';
    for (let i = 0; i < ops.length; i++) {
      const op = ops[i] as StoreOp;
      // The rules of a request usually share one identity: escaped once.
      if (op.key !== identity) {
        identity = op.key;
        tag = escapeIdentity(identity);
      }
      const count = countKey(space.prefix, tag, op.rule.name);
      this.keys.push(count);
      const reads = readsOverride(space, op.rule);
      if (reads) this.keys.push(overrideKey(count));
      if (hasLockout(op.rule)) {
        this.keys.push(lockKey(count), lockIndexKey(space.prefix, op.rule.name, indexSlot(space, tag)));
        this.#requestFields.push(identity);
      }
      texts.push(opText(op, reads));
    }
    const last = this.#last;
    let index: string | undefined;
    // The request before had the same shape (every request through one route does): no text to build.
    if (
      last !== undefined &&
      last.now === now &&
      last.mode === mode &&
      last.consumeNothing === consumeNothing &&
      sameTexts(last.texts, texts)
    ) {
      index = last.index;
    } else {
      const shape = `${mode}|${consumeNothing ? '1' : '0'}|${texts.join('|')}`;
      const key = `${now} ${shape}`;
      index = this.#shapes.get(key);
      if (index === undefined) {
        index = luaNumber(this.#shapes.size + 1);
        this.#shapes.set(key, index);
        this.#shapeFields.push(now, shape);
      }
      this.#last = { now, mode, consumeNothing, texts: texts.slice(), index };
    }
    this.#requestFields[this.#indexAt[this.#indexAt.length - 1] as number] = index;
    this.requests++;
    this.ops += ops.length;
  }

  /** The ARGV (see lua/check.lua). */
  args(): string[] {
    const fields = this.#requestFields;
    if (this.#shapes.size > 1) {
      return [
        'shapes',
        luaNumber(this.#shapes.size),
        ...this.#shapeFields,
        luaNumber(this.requests),
        ...fields,
      ];
    }
    // One shape: the number of requests and their shape's index go unsaid.
    const args = this.#shapeFields.slice();
    let next = 0;
    for (let i = 0; i < fields.length; i++) {
      if (i === this.#indexAt[next]) next++;
      else args.push(fields[i] as string);
    }
    return args;
  }
}

function sameTexts(a: readonly string[], b: readonly string[]): boolean {
  if (a.length !== b.length) return false;
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return false;
  return true;
}

/** Reply integers per refund of lua/refund.lua: remaining, resetMs, count. */
export const REFUND_FIELDS = 3;

/**
 * KEYS and ARGV of one call of lua/refund.lua; all the count keys in one slot, then the override keys
 * of the refunds whose rule's overrides are read.
 */
export function refundCall(
  space: KeySpace,
  refunds: ReadonlyArray<{ readonly op: StoreOp; readonly receipt: number }>,
  time: ScriptTime,
): { keys: string[]; args: string[] } {
  const keys: string[] = [];
  const overrideKeys: string[] = [];
  const ops = new OpTable();
  const body = [timeArgument(time), luaNumber(refunds.length)];
  for (const { op, receipt } of refunds) {
    const count = opKeys(space.prefix, op.rule.name, op.key).count;
    const reads = readsOverride(space, op.rule);
    keys.push(count);
    if (reads) overrideKeys.push(overrideKey(count));
    body.push(ops.index(op, reads), luaNumber(receipt));
  }
  return { keys: keys.concat(overrideKeys), args: ops.fields().concat(body) };
}

/** KEYS and ARGV of lua/override.lua: `limit` null clears, `forMs` undefined holds until cleared. */
export function overrideCall(
  space: KeySpace,
  rule: string,
  identity: string,
  limit: number | null,
  forMs: number | undefined,
  time: ScriptTime,
): { keys: string[]; args: string[] } {
  return {
    keys: [overrideKey(opKeys(space.prefix, rule, identity).count)],
    args: [
      timeArgument(time),
      limit === null ? '' : luaNumber(limit),
      forMs === undefined ? '' : luaNumber(forMs),
    ],
  };
}

/** KEYS and ARGV of lua/reset.lua for one rule and identity. */
export function resetCall(space: KeySpace, rule: string, identity: string, time: ScriptTime) {
  const keys = opKeys(space.prefix, rule, identity);
  return {
    keys: [keys.count, keys.lock, lockIndexKey(space.prefix, rule, indexSlot(space, keys.tag))],
    args: [timeArgument(time), identity],
  };
}

// ---- Replies.

/** The bits of a lua/check.lua reply head (Flag in lua/check.lua: the same names and values). */
export const Flag = {
  ALLOWED: 1,
  LOCKED: 2,
  LOCKED_NOW: 4,
  RETRY_AFTER_FOLLOWS: 8,
  LOCKED_UNTIL_FOLLOWS: 16,
  /** An override decided the limit, which follows (after retryAfterMs and lockedUntil). */
  OVERRIDDEN: 32,
  /** Alone: the key was empty and the op counted; its result is its algorithm's on an empty state. */
  FRESH: 64,
} as const;
/** The level counts in multiples of this, above the flags (LEVEL_UNIT in lua/check.lua). */
export const LEVEL_UNIT = 128;

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
 * The result of an op whose key was empty and which counted (Flag.FRESH): its algorithm's verdict on an
 * empty state at `nowMs`, as lua/check.lua reached it.
 */
function freshResult(op: StoreOp, nowMs: number): OpResult {
  const v = algorithms[op.rule.type].evaluate(undefined, op, nowMs, false);
  return {
    allowed: v.allowed,
    limit: op.limit,
    overridden: false,
    remaining: v.remaining,
    resetMs: v.resetMs,
    retryAfterMs: v.retryAfterMs,
    locked: false,
    count: v.count,
    receipt: v.receipt,
    level: 0,
    lockedUntil: 0,
    lockedNow: false,
  };
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
    if (head === Flag.FRESH) {
      results[k] = freshResult(ops[k] as StoreOp, nowMs);
      at++;
      continue;
    }
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
    // A remainder rather than &: it stays exact past 2^31.
    const flags = head % LEVEL_UNIT;
    let retryAfterMs: unknown = 0;
    let lockedUntil: unknown = 0;
    const overridden = (flags & Flag.OVERRIDDEN) !== 0;
    let limit: unknown = (ops[k] as StoreOp).limit;
    if (flags & Flag.RETRY_AFTER_FOLLOWS) retryAfterMs = reply[at++];
    if (flags & Flag.LOCKED_UNTIL_FOLLOWS) lockedUntil = reply[at++];
    if (overridden) limit = reply[at++];
    if (typeof retryAfterMs !== 'number' || typeof lockedUntil !== 'number' || typeof limit !== 'number') {
      return -1;
    }
    results[k] = {
      allowed: (flags & Flag.ALLOWED) !== 0,
      limit,
      overridden,
      remaining,
      resetMs,
      retryAfterMs,
      locked: (flags & Flag.LOCKED) !== 0,
      count,
      receipt,
      level: (head - flags) / LEVEL_UNIT,
      lockedUntil,
      lockedNow: (flags & Flag.LOCKED_NOW) !== 0,
    };
  }
  return at;
}
