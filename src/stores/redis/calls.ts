// The KEYS and ARGV of the script calls other than the check (check-call.ts): lua/refund.lua (a release,
// a refund), lua/renew.lua, lua/set-override.lua and lua/reset.lua.

import { windowKind } from '../../algorithms/index.js';
import type { StoreOp, StoreRule } from '../store.js';
import {
  identityKey,
  indexSlot,
  type KeySpace,
  limitsKeyOf,
  lockIndexKey,
  opKeys,
  overrideKey,
  readsOf,
  stateKey,
} from './check-call.js';
import { freeChannel } from './keys.js';
import {
  isGrouped,
  luaNumber,
  OpTable,
  READS_OVERRIDE,
  READS_RULE_LIMIT,
  type Reads,
  type ScriptTime,
  timeArgument,
} from './op-text.js';

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
