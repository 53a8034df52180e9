// Redis key names of the store: `<prefix>:{<identity>}:<rule>` and the keys beside it (lock, override), the
// identity record `<prefix>:{<identity>}` of an identity's grouped rules, lock indexes, the
// overridden-rules set and the reset channel; and their hash tags, the text between braces that decides a
// key's Cluster slot: identities and rule names are escaped so that user material can neither move a key
// to another slot nor make two keys collide, the slot of a tag is computed as Redis does, and every slot
// has a short tag of its own. lua/check.lua's header describes the same names.
import { windowKind } from '../../algorithms/index.js';
import { digest } from '../../digest.js';
import type { StoreRule } from '../store-ops.js';

/** Identities up to this long, of safe characters, are used as they are (readable in redis-cli). */
const MAX_PLAIN_LENGTH = 64;
/**
 * Printable ASCII without `{` and `}` (they decide the hash tag, hence the slot) and without `#`
 * (which starts every digest, so a plain identity never equals a digest).
 */
const PLAIN_IDENTITY = /^[\x20-\x22\x24-\x7a\x7c\x7e]+$/;
/** Rule names also exclude `:` so that no rule's count key is another rule's lock key (`<rule>:l`). */
const PLAIN_RULE = /^[\w.\-~]+$/;

/**
 * The hash-tag text for an identity: the identity itself when it is short printable ASCII without
 * braces or `#`; otherwise (braces, control characters, newline, NUL, non-ASCII, long, empty) a digest.
 * @example escapeIdentity('1.2.3.4') // '1.2.3.4'
 * @example escapeIdentity('a}b')     // '#…' (44 characters)
 */
export function escapeIdentity(identity: string): string {
  return identity.length <= MAX_PLAIN_LENGTH && PLAIN_IDENTITY.test(identity) ? identity : digest(identity);
}

/** A rule name as used in keys: rule names are validated at compile time, this guards direct store use. */
export function escapeRuleName(name: string): string {
  return name.length <= MAX_PLAIN_LENGTH && PLAIN_RULE.test(name) ? name : digest(name);
}

/** Slots of a Redis Cluster. */
export const SLOTS = 16384;

/** CRC16/XMODEM table, as Redis Cluster uses for key slots. */
const CRC_TABLE = (() => {
  const table = new Uint16Array(256);
  for (let i = 0; i < 256; i++) {
    let crc = i << 8;
    for (let bit = 0; bit < 8; bit++)
      crc = crc & 0x8000 ? ((crc << 1) ^ 0x1021) & 0xffff : (crc << 1) & 0xffff;
    table[i] = crc;
  }
  return table;
})();

/** The CRC16 after one more byte. */
function crcStep(crc: number, byte: number): number {
  return ((crc << 8) & 0xffff) ^ (CRC_TABLE[((crc >> 8) ^ byte) & 0xff] as number);
}

/**
 * The Cluster slot (0-16383) of every key with this hash tag. Computed here rather than with
 * cluster-key-slot, which is only a transitive dependency of ioredis.
 */
export function tagSlot(tag: string): number {
  let crc = 0;
  for (const byte of new TextEncoder().encode(tag)) crc = crcStep(crc, byte);
  return crc % SLOTS;
}

/** The Cluster slot of a key: of its hash tag (the first `{...}` with something inside), else of the whole key. */
export function keySlot(key: string): number {
  const open = key.indexOf('{');
  if (open >= 0) {
    const close = key.indexOf('}', open + 1);
    if (close > open + 1) return tagSlot(key.slice(open + 1, close));
  }
  return tagSlot(key);
}

/** Characters of slot tags: no braces (they end a hash tag) and nothing a glob or redis-cli would mangle. */
const TAG_ALPHABET = 'abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789';

let tags: string[] | undefined;

/**
 * A short string whose hash tag lands in `slot`: the first, in order of length then alphabet, of the
 * strings of TAG_ALPHABET. Three characters reach every slot (checked by a test); the table is built
 * on first use (about 240,000 CRCs of 3 bytes), only by stores talking to a Cluster.
 */
export function slotTag(slot: number): string {
  return allSlotTags()[slot] as string;
}

/** The tag of every slot, in slot order. */
export function allSlotTags(): readonly string[] {
  tags ??= buildTags();
  return tags;
}

function buildTags(): string[] {
  const table: string[] = new Array(SLOTS);
  let missing = SLOTS;
  const found = (tag: string, crc: number) => {
    const slot = crc % SLOTS;
    if (table[slot] === undefined) {
      table[slot] = tag;
      missing--;
    }
  };
  const chars = [...TAG_ALPHABET];
  const step = (crc: number, c: string) => crcStep(crc, c.charCodeAt(0));
  for (const a of chars) found(a, step(0, a));
  for (const a of chars) for (const b of chars) found(a + b, step(step(0, a), b));
  for (const a of chars) {
    const crcA = step(0, a);
    for (const b of chars) {
      const crcB = step(crcA, b);
      for (const c of chars) if (missing > 0) found(a + b + c, step(crcB, c));
    }
  }
  if (missing > 0) throw new Error(`ratekeeper: ${missing} Cluster slots have no 3-character tag`);
  return table;
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
 * What a rule's name must be for its state to go in a record, where it is the state's label and travels
 * in the op's text: a limiter's rule names always are (rules/compile.ts); a StoreRule made by hand
 * with another name keeps a key of its own.
 */
const RECORD_NAME = /^[\w.~-]{1,64}$/;

/** Whether a rule's state is in its identity's record (identityKey) rather than a key of its own. */
export function isGrouped(rule: StoreRule): boolean {
  return rule.grouped === true && windowKind(rule.type).groupable && RECORD_NAME.test(rule.name);
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

/**
 * The rule-limits hash (limiter.setLimit): field = a rule's escaped name, value = its rule-wide limit
 * (lua/overrides.lua overrideValue). Read by the check script in the decision's own call, so on a
 * Cluster every slot has its copy, `<prefix>:{<slot tag>}:limits` (`slot` given), all written by each
 * change; standalone (and Sentinel) one, `<prefix>:limits`. No count key ends in `}:limits`.
 */
export function ruleLimitsKey(prefix: string, slot: number | undefined): string {
  return slot === undefined ? `${prefix}:limits` : `${prefix}:{${slotTag(slot)}}:limits`;
}

/** The counter that orders the changes of rule-wide limits on a Cluster (each copy keeps the latest). */
export function ruleLimitsVersionKey(prefix: string): string {
  return `${prefix}:limits:version`;
}

/** The pub/sub channel on which resets are announced to every process. */
export function resetChannel(prefix: string): string {
  return `${prefix}:reset`;
}

/** The pub/sub channel on which freed concurrency slots are announced (redis-frees.ts). */
export function freeChannel(prefix: string): string {
  return `${prefix}:free`;
}

/** Whether the scripts must read the override of a rule's keys, and its rule-wide limit (redis-overrides.ts). */
export interface OverrideReads {
  reads(rule: string): boolean;
  readsRuleLimit(rule: string): boolean;
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
