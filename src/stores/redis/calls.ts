// The KEYS and ARGV of each script call: lua/check.lua's batch of requests (CheckCall), and the calls of
// lua/refund.lua, lua/set-override.lua and lua/reset.lua.

import { windowKind } from '../../algorithms/index.js';
import type { EvalMode, StoreOp, StoreRule } from '../store.js';
import {
  countKey,
  escapeIdentity,
  freeChannel,
  identityKey,
  indexSlot,
  isGrouped,
  type KeySpace,
  lockIndexKey,
  lockKey,
  opKeys,
  overrideKey,
  ruleLimitsKey,
  stateKey,
} from './keys.js';
import {
  hasLockout,
  luaNumber,
  OpTable,
  opText,
  READS_OVERRIDE,
  READS_RULE_LIMIT,
  type Reads,
  type ScriptTime,
  timeArgument,
} from './op-text.js';

/** What the ops of `rule` read in a call on `space`: their override, their rule-wide limit (op-text.ts Reads). */
function readsOf(space: KeySpace | undefined, rule: StoreRule): Reads {
  const overrides = space?.overrides;
  if (overrides === undefined) return 0;
  return ((overrides.reads(rule.name) ? READS_OVERRIDE : 0) |
    (overrides.readsRuleLimit(rule.name) ? READS_RULE_LIMIT : 0)) as Reads;
}

/** The rule-limits hash a call whose keys are in the slot of `tag` reads (one per slot on a Cluster). */
function limitsKeyOf(space: KeySpace, tag: string): string {
  return ruleLimitsKey(space.prefix, indexSlot(space, tag));
}

/**
 * One call of lua/check.lua being filled: the KEYS and ARGV of several requests. Requests of the same
 * shape (time, mode, ops) are common (every request through one route has the same rules), so each
 * distinct shape is sent once and each request is its keys (and its shape's index, when the call has
 * several).
 */
export class CheckCall {
  readonly keys: string[] = [];
  /** The rule-limits hash, once a request reads a rule-wide limit: sent after every request's keys. */
  #limitsKey: string | undefined;
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
   * Adds a request: its keys (per op the count key, or its identity's record for a grouped rule, once
   * for the grouped ops of one identity in a row: the shape marks the others '^'; its override key when
   * its rule's overrides are read, and the lock key and lock index when its rule has a lockout) and its
   * shape.
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
    // Whether the op before was grouped: a grouped op of the same identity shares its record's key.
    let groupedBefore = false;
    for (let i = 0; i < ops.length; i++) {
      const op = ops[i] as StoreOp;
      const grouped = isGrouped(op.rule);
      // The rules of a request usually share one identity: escaped once.
      let sameRecord = grouped && groupedBefore;
      if (op.key !== identity) {
        identity = op.key;
        tag = escapeIdentity(identity);
        sameRecord = false;
      }
      groupedBefore = grouped;
      const count = countKey(space.prefix, tag, op.rule.name);
      // The record's key is sent once for the grouped ops of one identity that follow each other.
      if (!sameRecord) this.keys.push(stateKey(space.prefix, tag, count, op.rule));
      const reads = readsOf(space, op.rule);
      if ((reads & READS_OVERRIDE) !== 0) this.keys.push(overrideKey(count));
      if ((reads & READS_RULE_LIMIT) !== 0) this.#limitsKey ??= limitsKeyOf(space, tag);
      if (hasLockout(op.rule)) {
        this.keys.push(lockKey(count), lockIndexKey(space.prefix, op.rule.name, indexSlot(space, tag)));
        this.#requestFields.push(identity);
      }
      texts.push(sameRecord ? `^${opText(op, reads)}` : opText(op, reads));
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

  /** The KEYS (see lua/check.lua): the requests', then the rule-limits hash when one reads it. */
  allKeys(): string[] {
    return this.#limitsKey === undefined ? this.keys : [...this.keys, this.#limitsKey];
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
 * KEYS and ARGV of one call of lua/refund.lua; all the count keys (identity hashes for grouped rules) in
 * one slot, then the override keys
 * of the refunds whose rule's overrides are read.
 */
export function refundCall(
  space: KeySpace,
  refunds: ReadonlyArray<{ readonly op: StoreOp; readonly receipt: number }>,
  time: ScriptTime,
  quiet = false,
): { keys: string[]; args: string[] } {
  const keys: string[] = [];
  const overrideKeys: string[] = [];
  const ops = new OpTable();
  const body = [timeArgument(time), luaNumber(refunds.length)];
  // The refunds of one call are mostly of one rule and identity (a route's releases): its keys made once.
  let rule: StoreRule | undefined;
  let identity: string | undefined;
  let state = '';
  let count = '';
  let reads: Reads = 0;
  let limitsKey: string | undefined;
  for (const { op, receipt } of refunds) {
    if (op.rule !== rule || op.key !== identity) {
      rule = op.rule;
      identity = op.key;
      const made = opKeys(space.prefix, rule.name, identity);
      count = made.count;
      state = stateKey(space.prefix, made.tag, count, rule);
      reads = readsOf(space, rule);
      if ((reads & READS_RULE_LIMIT) !== 0) limitsKey ??= limitsKeyOf(space, made.tag);
    }
    keys.push(state);
    if ((reads & READS_OVERRIDE) !== 0) overrideKeys.push(overrideKey(count));
    body.push(ops.index(op, reads), luaNumber(receipt));
  }
  if (limitsKey !== undefined) overrideKeys.push(limitsKey);
  // No figures wanted: the reply is empty, and a concurrency release is one ZREM (lua/refund.lua).
  if (quiet) {
    body.push('quiet');
    const freed = freedSlots(refunds);
    if (freed !== undefined) body.push(freeChannel(space.prefix), freed);
  }
  return { keys: keys.concat(overrideKeys), args: ops.fields().concat(body) };
}

/** The announcement made last for the frees of one rule and key (freedSlots). */
let lastFreed: { readonly rule: string; readonly key: string; readonly text: string } | undefined;

/**
 * The announcement of the concurrency slots these refunds free (redis-frees.ts): `[rule, key, ...]` as
 * JSON, each rule and key once; undefined when they free none.
 */
function freedSlots(refunds: ReadonlyArray<{ readonly op: StoreOp }>): string | undefined {
  // [rule, key, rule, key, ...]; the releases of one call are mostly of one rule and key (a route's),
  // told apart from the pair before without an id made for each.
  let names: string[] | undefined;
  let seen: Set<string> | undefined;
  for (const { op } of refunds) {
    if (!windowKind(op.rule.type).holdsSlots) continue;
    const rule = op.rule.name;
    const key = op.key;
    if (names === undefined) {
      names = [rule, key];
      continue;
    }
    if (names[names.length - 2] === rule && names[names.length - 1] === key) continue;
    if (seen === undefined) {
      seen = new Set();
      for (let i = 0; i < names.length; i += 2) seen.add(`${names[i]}\u0000${names[i + 1]}`);
    }
    const id = `${rule}\u0000${key}`;
    if (seen.has(id)) continue;
    seen.add(id);
    names.push(rule, key);
  }
  if (names === undefined) return undefined;
  if (names.length > 2) return JSON.stringify(names);
  // One rule and key, as a route's releases are: the text of the last such call, when it is the same.
  const [rule, key] = names as [string, string];
  const last = lastFreed;
  if (last !== undefined && last.rule === rule && last.key === key) return last.text;
  const text = JSON.stringify(names);
  lastFreed = { rule, key, text };
  return text;
}

/** KEYS and ARGV of one call of lua/renew.lua: the count keys of held concurrency slots, all in one slot. */
export function renewCall(
  space: KeySpace,
  slots: ReadonlyArray<{ readonly op: StoreOp; readonly receipt: number }>,
  time: ScriptTime,
): { keys: string[]; args: string[] } {
  const keys: string[] = [];
  const ops = new OpTable();
  const body = [timeArgument(time), luaNumber(slots.length)];
  for (const { op, receipt } of slots) {
    keys.push(opKeys(space.prefix, op.rule.name, op.key).count);
    body.push(ops.index(op), luaNumber(receipt));
  }
  return { keys, args: ops.fields().concat(body) };
}

/**
 * KEYS and ARGV of lua/set-override.lua: `limit` null clears (with `windowMs`: sets the window only), `forMs`
 * undefined holds until cleared.
 */
export function overrideCall(
  space: KeySpace,
  rule: string,
  identity: string,
  limit: number | null,
  forMs: number | undefined,
  time: ScriptTime,
  windowMs?: number,
): { keys: string[]; args: string[] } {
  return {
    keys: [overrideKey(opKeys(space.prefix, rule, identity).count)],
    args: [
      timeArgument(time),
      limit === null ? '' : luaNumber(limit),
      forMs === undefined ? '' : luaNumber(forMs),
      windowMs === undefined ? '' : luaNumber(windowMs),
    ],
  };
}

/**
 * KEYS and ARGV of lua/reset.lua for one rule and identity (a grouped rule: its state in the identity's
 * record); `clear`, for a grouped rule only: its state alone, the lock and level kept (store.clear).
 */
export function resetCall(
  space: KeySpace,
  rule: StoreRule,
  identity: string,
  time: ScriptTime,
  clear = false,
) {
  const keys = opKeys(space.prefix, rule.name, identity);
  const grouped = isGrouped(rule);
  return {
    keys: [
      grouped ? identityKey(space.prefix, keys.tag) : keys.count,
      keys.lock,
      lockIndexKey(space.prefix, rule.name, indexSlot(space, keys.tag)),
    ],
    args: grouped
      ? [timeArgument(time), identity, rule.name, ...(clear ? ['clear'] : [])]
      : [timeArgument(time), identity],
  };
}
