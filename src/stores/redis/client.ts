// Which client library is behind a Redis connection: an ioredis (or iovalkey) client, a node-redis one, or an
// @upstash/redis one (Redis over HTTP), recognized by shape; anything else is refused at construction.
import { refuse } from '../../config/refuse.js';
import { REDIS_STORE_DEFAULTS } from '../../defaults.js';
import type { RedisConnection } from './connection/connection.js';
import { ioredisConnection } from './connection/ioredis.js';
import { nodeRedisConnection } from './connection/node-redis.js';
import { upstashConnection } from './connection/upstash.js';

/**
 * A client of ioredis (`Redis`, `Cluster`; versions 5 and 6) or iovalkey, or of node-redis (the `redis`
 * package 5 and 6: `createClient`, `createCluster`, `createSentinel`), or an @upstash/redis `Redis` (Redis
 * over HTTP). Described by shape, so that the package's types need none of these libraries installed;
 * `RedisStore` checks the kind at construction.
 */
export type RedisClient =
  | { call(...args: never[]): unknown; duplicate(...args: never[]): unknown }
  | { sendCommand(...args: never[]): unknown }
  | { evalsha(...args: never[]): unknown; scriptLoad(...args: never[]): unknown };

/**
 * The client behind a RedisConnection, whatever its library; throws naming what was passed otherwise.
 * `requestTimeoutMs` bounds each request of a client over HTTP (the others have their own timeouts).
 */
export function connectionOf(
  client: unknown,
  requestTimeoutMs: number = REDIS_STORE_DEFAULTS.requestTimeoutMs,
): RedisConnection {
  const connection =
    ioredisConnection(client) ?? nodeRedisConnection(client) ?? upstashConnection(client, requestTimeoutMs);
  if (connection !== undefined) return connection;
  return refuse(
    'ERR_OPTION',
    'RedisStore',
    'client must be an ioredis or iovalkey Redis or Cluster, a node-redis client (createClient, ' +
      `createCluster or createSentinel of the redis package), or an @upstash/redis Redis, got ${clientKind(client)}`,
  );
}

/** What was passed as a client, by its class: `a Redis`, `an object`, or the value itself when it is no object. */
function clientKind(value: unknown): string {
  if (value === null || typeof value !== 'object') {
    return typeof value === 'string' ? JSON.stringify(value) : String(value);
  }
  const name = (value as { constructor?: { name?: unknown } }).constructor?.name;
  return typeof name === 'string' && name !== 'Object' ? `a ${name}` : 'an object';
}
