// The one door through which the Redis store talks to Redis: a small interface, implemented once per client
// library (ioredis.ts, node-redis.ts, upstash.ts for Redis over HTTP; ../client.ts picks one).
import type { ConnectionLiveness } from '../../store.js';

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
  readonly liveness: ConnectionLiveness;
  /**
   * Sends one command. `routingKey`, one of the command's keys, picks the node on a Cluster; without
   * one the client chooses (commands without keys).
   */
  send(command: string, args: readonly string[], routingKey?: string): Promise<unknown>;
  /**
   * False where loading the function library costs more than it saves (over HTTP each of its commands is
   * a request of its own, at every cold start): scripts then run by EVALSHA, EVAL on NOSCRIPT. @default true
   */
  readonly functions?: false;
  /**
   * True where a request's I/O belongs to the request that made it (Cloudflare Workers cancel a request
   * left waiting on a call another request made): no call is shared by several requests, so decisions and
   * refunds go out on their own rather than batched with the others of the turn. @default false
   */
  readonly isolatedRequests?: boolean;
  /** Runs `action` on every master node (the one server, off a Cluster), all at once. */
  eachMaster<T>(action: (node: RedisNode) => Promise<T>): Promise<T[]>;
  /**
   * Subscribes to `channel` on a connection of its own, kept subscribed across reconnections.
   * `onMessage` gets each message; `onResubscribed` is called each time the subscription is made again
   * after a reconnection (messages published meanwhile were missed). Absent where the protocol has no
   * subscriptions (Redis over HTTP): PUBLISH still reaches the subscribers of other clients.
   */
  subscribe?(
    channel: string,
    onMessage: (message: string) => void,
    onResubscribed: () => void,
  ): RedisSubscription;
}
