// The one door through which the Redis store talks to Redis: a small interface, and which client library is behind it.
import { RateLimitConfigError } from '../errors.js';
import { ioredisConnection } from './redis-connection-ioredis.js';
import { nodeRedisConnection } from './redis-connection-node-redis.js';
import type { StoreLiveness } from './store.js';

/** A subscription made by `RedisConnection.subscribe`. */
export interface RedisSubscription {
  /** Unsubscribes and closes the connection it used. */
  close(): void;
}

/** Sends commands to one node (a Cluster master picked by `eachMaster`). */
export interface RedisNode {
  send(command: string, args: readonly string[]): Promise<unknown>;
}

/**
 * Every command the Redis store sends goes through this interface, so that supporting another client
 * library means implementing it once. Replies are decoded as RESP2 clients do: integers as numbers,
 * bulk and simple strings as strings, arrays as arrays, nil as null; an error reply rejects with an
 * Error whose message is Redis's own (`NOSCRIPT ...`, `OOM ...`). A command that fails because the
 * client has no connection rejects with the cause of the last connection fault (`ECONNREFUSED`,
 * `WRONGPASS` ...) as its message and `code` (see `ConnectionFaults`).
 */
export interface RedisConnection {
  /** True for a Redis Cluster: the keys of one command must share a slot, and they pick the node. */
  readonly cluster: boolean;
  /** The client's first connection and how long its calls have waited unanswered (see `ClientLiveness`). */
  readonly liveness: StoreLiveness;
  /**
   * Sends one command. `routingKey`, one of the command's keys, picks the node on a Cluster; without
   * one the client chooses (commands without keys).
   */
  send(command: string, args: readonly string[], routingKey?: string): Promise<unknown>;
  /** Runs `action` on every master node (the one server, off a Cluster), all at once. */
  eachMaster<T>(action: (node: RedisNode) => Promise<T>): Promise<T[]>;
  /**
   * Subscribes to `channel` on a connection of its own, kept subscribed across reconnections.
   * `onMessage` gets each message; `onResubscribed` is called each time the subscription is made again
   * after a reconnection (messages published meanwhile were missed).
   */
  subscribe(
    channel: string,
    onMessage: (message: string) => void,
    onResubscribed: () => void,
  ): RedisSubscription;
}

/**
 * A client of ioredis (`Redis`, `Cluster`; versions 5 and 6) or iovalkey, or of node-redis (the `redis`
 * package 5 and 6: `createClient`, `createCluster`, `createSentinel`). Described by shape, so that the
 * package's types need none of these libraries installed; `RedisStore` checks the kind at construction.
 */
export type RedisClient =
  | { call(...args: never[]): unknown; duplicate(...args: never[]): unknown }
  | { sendCommand(...args: never[]): unknown };

/** The client behind a RedisConnection, whatever its library; throws naming what was passed otherwise. */
export function connectionOf(client: unknown): RedisConnection {
  const connection = ioredisConnection(client) ?? nodeRedisConnection(client);
  if (connection !== undefined) return connection;
  throw new RateLimitConfigError(
    'ERR_OPTION',
    'RedisStore: client must be an ioredis or iovalkey Redis or Cluster, or a node-redis client ' +
      `(createClient, createCluster or createSentinel of the redis package), got ${describe(client)}`,
  );
}

function describe(value: unknown): string {
  if (value === null || typeof value !== 'object') {
    return typeof value === 'string' ? JSON.stringify(value) : String(value);
  }
  const name = (value as { constructor?: { name?: unknown } }).constructor?.name;
  return typeof name === 'string' && name !== 'Object' ? `a ${name}` : 'an object';
}
