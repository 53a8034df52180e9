// Redis keys of the store beyond one op's own (those are check-call.ts's): Cluster slots and hash tags (the
// text between braces that decides a key's slot, computed as Redis does; every slot has a short tag of its
// own), lock indexes, the overridden-rules set, the rule-limits hash, and the reset and free channels.
// lua/check.lua's header describes the same names.
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

/**
 * The rules that have had an override, each listed once (SADD), so that a process learning of them
 * (overrides.ts) knows which rules' overrides its scripts must read. Not read by any script:
 * any slot will do.
 */
export function overriddenRulesKey(prefix: string): string {
  return `${prefix}:overridden`;
}

/** `<level>:<identity>` of a lock-index member (built by lockIndexMember in lua/protocol.lua). */
export function parseLockIndexMember(member: string): { level: number; identity: string } {
  const colon = member.indexOf(':');
  return { level: Number(member.slice(0, colon)), identity: member.slice(colon + 1) };
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
