// Ops as the scripts read them: the time argument, and each op as one text (readOp in lua/protocol.lua),
// made once per rule and reused while a rule's requests look alike.

import type { StoreOp, StoreRule } from '../store.js';
import { isGrouped } from './keys.js';

/** The `now` argument asking a script for the server's own clock (TIME); SERVER_TIME in lua/protocol.lua. */
export const SERVER_TIME = 'server';

/** When a script call decides: an injected clock's epoch ms, or the Redis server's own clock. */
export type ScriptTime = number | typeof SERVER_TIME;

/** Numbers as text Lua's tonumber reads back exactly (JavaScript prints the shortest round-trip form). */
export function luaNumber(value: number): string {
  // Integers past 2^31 (slot ids, epoch ms) print faster as two small integers, the same text (bench/RESULTS.md).
  if (value > 0x7fffffff && value <= Number.MAX_SAFE_INTEGER && Number.isInteger(value)) {
    const high = Math.floor(value / 1e9);
    const low = String(value - high * 1e9);
    return `${high}${NINE_ZEROS.slice(low.length)}${low}`;
  }
  return String(value);
}

const NINE_ZEROS = '000000000';

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
  /** After the period fields: `,<rule name>` for a grouped rule (its name in the record), else ''. */
  readonly field: string;
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
      tail: `,${ruleFlags(rule, false)},${lockFields},`,
      tailReadingOverride: `,${ruleFlags(rule, true)},${lockFields},`,
      field: isGrouped(rule) ? `,${rule.name}` : '',
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
 * The flags field of an op (readOp in lua/protocol.lua): 1 for a dry run, + 2 when its override is read,
 * + 4 when it is and its burst follows the limit (the rule has none of its own), + 8 when the rule is
 * grouped (its state in the identity's record, under the rule's name, sent after the period fields).
 */
function ruleFlags(rule: StoreRule, readsOverride: boolean): string {
  let flags = rule.dryRun ? 1 : 0;
  if (readsOverride) flags += 2 + (rule.burst === 0 ? 4 : 0);
  if (isGrouped(rule)) flags += 8;
  return luaNumber(flags);
}

/**
 * An op as the scripts read it (readOp in lua/protocol.lua): its 13 fields joined by ',', and a 14th,
 * the rule's name, for a grouped rule. The scripts
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
      : `,${luaNumber(op.periodEndMs)},${luaNumber(op.nextPeriodEndMs ?? 0)}`) +
    text.field
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
