// The live slots of a concurrency key on Redis, for operators' `status` (lua/concurrency.lua's ZSET).

import type { HeldSlot } from '../store.js';
import type { RedisConnection } from './connection/connection.js';

/** lua/concurrency.lua's member holding the last slot id handed out, not a slot. */
const SEQ_MEMBER = '#';

/**
 * At most `limit` live slots of the count key `count` (lease end after `nowMs`, store clock), oldest
 * first: the `limit` soonest to lapse are read (one ZRANGEBYSCORE, routed by the key on a Cluster),
 * then ordered by id. The last-id member scores above every lease end, so one more is read.
 */
export async function readHolders(
  connection: RedisConnection,
  count: string,
  limit: number,
  nowMs: number,
): Promise<HeldSlot[]> {
  if (!(limit > 0)) return [];
  const args = [count, `(${nowMs}`, '+inf', 'WITHSCORES', 'LIMIT', '0', String(Math.floor(limit) + 1)];
  const flat = await connection.send('ZRANGEBYSCORE', args, count);
  const held: HeldSlot[] = [];
  if (!Array.isArray(flat)) return held;
  for (let i = 0; i + 1 < flat.length; i += 2) {
    const member = String(flat[i]);
    if (member !== SEQ_MEMBER) held.push({ slot: Number(member), untilMs: Number(flat[i + 1]) });
  }
  return held.sort((a, b) => a.slot - b.slot).slice(0, limit);
}
