// `locked(rule)`: the keys of a rule locked now, read from the lock indexes lua/decide.lua writes with each lock.
import type { LockInfo } from '../../types.js';
import { isLockIndexKey, type KeySpace, lockIndexKey, lockIndexPattern } from './check-call.js';
import type { RedisConnection, RedisNode } from './connection/connection.js';
import { parseLockIndexMember } from './keys.js';
import { luaNumber } from './op-text.js';

/** Keys SCAN looks at per call: a call costs Redis about a millisecond. */
const SCAN_COUNT = '10000';

/** A lock as an index lists it. */
interface Listed {
  member: string;
  untilMs: number;
}

/**
 * The locks of `rule` still in force at `nowMs`, soonest unlock first (ties in member order, as a ZSET
 * orders them), at most `limit` (Infinity: all). A standalone server has one index per rule. On a
 * Cluster each slot holding a lock of the rule has its own (a lock is indexed in its identity's slot,
 * by the same script call that places it): each master's are found with SCAN, so the time this takes
 * grows with the number of keys the masters hold (SCAN returns every key present from its start to
 * its end; a key moving between nodes meanwhile can be missed).
 */
export async function readLocks(
  connection: RedisConnection,
  space: KeySpace,
  rule: string,
  limit: number,
  nowMs: number,
): Promise<LockInfo[]> {
  if (!(limit > 0)) return [];
  const count = Number.isFinite(limit) ? luaNumber(Math.floor(limit)) : '-1';
  const listed: Listed[] = [];
  const read = async (key: string) => {
    const args = [key, `(${nowMs}`, '+inf', 'WITHSCORES', 'LIMIT', '0', count];
    const flat = await connection.send('ZRANGEBYSCORE', args, key);
    if (!Array.isArray(flat)) return;
    for (let i = 0; i + 1 < flat.length; i += 2) {
      listed.push({ member: String(flat[i]), untilMs: Number(flat[i + 1]) });
    }
  };
  if (!space.cluster) {
    await read(lockIndexKey(space.prefix, rule, undefined));
  } else {
    const indexes = (
      await connection.eachMaster((node) => scan(node, lockIndexPattern(space.prefix, rule)))
    ).flat();
    await Promise.all(indexes.filter((key) => isLockIndexKey(key, space.prefix, rule)).map(read));
    listed.sort((a, b) => a.untilMs - b.untilMs || byteOrder(a.member, b.member));
    if (Number.isFinite(limit)) listed.length = Math.min(listed.length, Math.floor(limit));
  }
  return listed.map(({ member, untilMs }) => {
    const { level, identity } = parseLockIndexMember(member);
    return { rule, key: identity, remainingMs: untilMs - nowMs, lockedUntil: untilMs, level };
  });
}

/** The sorted sets of one node whose names match `pattern`. */
async function scan(node: RedisNode, pattern: string): Promise<string[]> {
  const found: string[] = [];
  let cursor = '0';
  do {
    const reply = await node.send('SCAN', [cursor, 'MATCH', pattern, 'COUNT', SCAN_COUNT, 'TYPE', 'zset']);
    const [next, keys] = reply as [string, string[]];
    cursor = String(next);
    for (const key of keys) found.push(String(key));
  } while (cursor !== '0');
  return found;
}

/** Orders two strings by their UTF-8 bytes, as Redis orders a sorted set's members of equal score. */
function byteOrder(a: string, b: string): number {
  const x = new TextEncoder().encode(a);
  const y = new TextEncoder().encode(b);
  const n = Math.min(x.length, y.length);
  for (let i = 0; i < n; i++) if (x[i] !== y[i]) return (x[i] as number) - (y[i] as number);
  return x.length - y.length;
}
