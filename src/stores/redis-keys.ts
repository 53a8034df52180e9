// Redis key names: `<prefix>:{<identity>}:<rule>`, with identities and rule names escaped so that user
// material can neither move a key to another Cluster slot nor make two keys collide.
import { createHash } from 'node:crypto';

/** Identities up to this long, of safe characters, are used as they are (readable in redis-cli). */
const MAX_PLAIN_LENGTH = 64;
/**
 * Printable ASCII without `{` and `}` (they decide the hash tag, hence the slot) and without `#`
 * (which starts every digest, so a plain identity never equals a digest).
 */
const PLAIN_IDENTITY = /^[\x20-\x22\x24-\x7a\x7c\x7e]+$/;
/** Rule names also exclude `:` so that no rule's count key is another rule's lock key (`<rule>:l`). */
const PLAIN_RULE = /^[\w.\-~]+$/;

/** `#` + base64url(SHA-256) of the string's UTF-16 code units: lossless for any JavaScript string, lone surrogates included. */
function digest(value: string): string {
  return `#${createHash('sha256').update(value, 'utf16le').digest('base64url')}`;
}

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

/** The key names of one rule for one identity; `tag` is the escaped identity that decides the slot. */
export interface RedisOpKeys {
  readonly tag: string;
  /** The count state. */
  readonly count: string;
  /** The lock state (rare). */
  readonly lock: string;
}

export function opKeys(prefix: string, rule: string, identity: string): RedisOpKeys {
  const tag = escapeIdentity(identity);
  const count = countKey(prefix, tag, rule);
  return { tag, count, lock: `${count}:l` };
}

/** The count key of a rule for an identity already escaped (`tag`); its lock key is this plus `:l`. */
export function countKey(prefix: string, tag: string, rule: string): string {
  return `${prefix}:{${tag}}:${escapeRuleName(rule)}`;
}

/** The ZSET of locks of one rule (member `<level>:<identity>`, score untilMs); its own slot, per rule. */
export function lockIndexKey(prefix: string, rule: string): string {
  return `${prefix}:locks:{${escapeRuleName(rule)}}`;
}

/** The pub/sub channel on which resets are announced to every process. */
export function resetChannel(prefix: string): string {
  return `${prefix}:reset`;
}

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

/**
 * The Cluster slot (0-16383) of every key of an identity, from its hash tag. Computed here rather than
 * with cluster-key-slot, which is only a transitive dependency of ioredis.
 */
export function tagSlot(tag: string): number {
  let crc = 0;
  for (const byte of Buffer.from(tag, 'utf8')) {
    crc = ((crc << 8) & 0xffff) ^ (CRC_TABLE[((crc >> 8) ^ byte) & 0xff] as number);
  }
  return crc % 16384;
}
