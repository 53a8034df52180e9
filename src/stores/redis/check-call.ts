// One call of lua/check.lua, the one every request makes: the key names of each op (its count key
// `<prefix>:{<identity>}:<rule>`, the keys beside it, its identity's record), which rules' overrides it
// reads, and the KEYS and ARGV of a batch of requests (CheckCall). The key names are escaped so that user
// material can neither move a key to another slot nor make two keys collide; lua/check.lua's header
// describes the same names. Slots, hash tags and channels are keys.ts's.
import { digest } from '../../digest.js';
import type { EvalMode, StoreOp, StoreRule } from '../store.js';
import { slotTag, tagSlot } from './keys.js';
import {
  escapeRuleName,
  hasLockout,
  isGrouped,
  luaNumber,
  MAX_PLAIN_LENGTH,
  opText,
  READS_OVERRIDE,
  READS_RULE_LIMIT,
  type Reads,
  type ScriptTime,
  timeArgument,
} from './op-text.js';

/**
 * Printable ASCII without `{` and `}` (they decide the hash tag, hence the slot) and without `#`
 * (which starts every digest, so a plain identity never equals a digest).
 */
const PLAIN_IDENTITY = /^[\x20-\x22\x24-\x7a\x7c\x7e]+$/;
/**
 * The hash-tag text for an identity: the identity itself when it is short printable ASCII without
 * braces or `#`; otherwise (braces, control characters, newline, NUL, non-ASCII, long, empty) a digest.
 * @example escapeIdentity('1.2.3.4') // '1.2.3.4'
 * @example escapeIdentity('a}b')     // '#…' (44 characters)
 */
export function escapeIdentity(identity: string): string {
  return identity.length <= MAX_PLAIN_LENGTH && PLAIN_IDENTITY.test(identity) ? identity : digest(identity);
}

/** What makes a count key its lock key. */
const LOCK_SUFFIX = ':l';
/** What makes a count key its override key. */
const OVERRIDE_SUFFIX = ':o';

/** The count key of a rule for an identity already escaped (`tag`). */
export function countKey(prefix: string, tag: string, rule: string): string {
  return `${prefix}:{${tag}}:${escapeRuleName(rule)}`;
}

/**
 * The record of an identity (already escaped: `tag`) that holds the states of its grouped rules, each
 * under the rule's name (StoreRule.grouped, lua/identity-record.lua); its TTL is the latest of their window ends.
 */
export function identityKey(prefix: string, tag: string): string {
  return `${prefix}:{${tag}}`;
}

/**
 * Where the scripts find a rule's state for an identity (`tag` escaped, `count` its countKey): the
 * identity's record for a grouped rule, else the count key.
 */
export function stateKey(prefix: string, tag: string, count: string, rule: StoreRule): string {
  return isGrouped(rule) ? identityKey(prefix, tag) : count;
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
 * The limit override of a rule for an identity (lua/set-override.lua writes it), beside its count key: read
 * by the scripts only for rules that have had an override (OverrideReads).
 */
export function overrideKey(count: string): string {
  return count + OVERRIDE_SUFFIX;
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

/**
 * The rule-limits hash (limiter.setLimit): field = a rule's escaped name, value = its rule-wide limit
 * (lua/overrides.lua overrideValue). Read by the check script in the decision's own call, so on a
 * Cluster every slot has its copy, `<prefix>:{<slot tag>}:limits` (`slot` given), all written by each
 * change; standalone (and Sentinel) one, `<prefix>:limits`. No count key ends in `}:limits`.
 */
export function ruleLimitsKey(prefix: string, slot: number | undefined): string {
  return slot === undefined ? `${prefix}:limits` : `${prefix}:{${slotTag(slot)}}:limits`;
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

/**
 * Which rules' overrides, and rule-wide limits, the scripts must read: those of the rules that have had
 * one, once known (overrides.ts's Overrides learns them and keeps them up to date), so that every other
 * rule's decisions cost what they did before overrides; until then every rule's, and `learn` is asked
 * to start learning them.
 */
export class OverrideReads {
  /** Whether `rules` and `limited` are complete. */
  known = false;
  /** Rules that have had an override of a key. */
  readonly rules = new Set<string>();
  /** Rules (escaped names, escapeRuleName) that have had a rule-wide limit. */
  readonly limited = new Set<string>();
  readonly #learn: () => void;

  constructor(learn: () => void) {
    this.#learn = learn;
  }

  /** Whether the scripts must read the overrides of `rule`'s keys. */
  reads(rule: string): boolean {
    if (this.known) return this.rules.has(rule);
    this.#learn();
    return true;
  }

  /** Whether the scripts must read the rule-wide limit of `rule`. */
  readsRuleLimit(rule: string): boolean {
    if (this.known) return this.limited.size !== 0 && this.limited.has(escapeRuleName(rule));
    return this.reads(rule);
  }
}

/** What the ops of `rule` read in a call on `space`: their override, their rule-wide limit (op-text.ts Reads). */
export function readsOf(space: KeySpace | undefined, rule: StoreRule): Reads {
  const overrides = space?.overrides;
  if (overrides === undefined) return 0;
  return ((overrides.reads(rule.name) ? READS_OVERRIDE : 0) |
    (overrides.readsRuleLimit(rule.name) ? READS_RULE_LIMIT : 0)) as Reads;
}

/** The rule-limits hash a call whose keys are in the slot of `tag` reads (one per slot on a Cluster). */
export function limitsKeyOf(space: KeySpace, tag: string): string {
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
