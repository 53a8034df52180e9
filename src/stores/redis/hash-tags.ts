// Hash tags: the text between braces that decides a key's Cluster slot. Identities and rule names are
// escaped so that user material can neither move a key to another slot nor make two keys collide; the
// slot of a tag is computed as Redis does; and every slot has a short tag of its own.
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
  for (const byte of Buffer.from(tag, 'utf8')) crc = crcStep(crc, byte);
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
