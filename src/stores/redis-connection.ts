// The one door through which the Redis store talks to Redis: a small interface, and its ioredis implementation.
import type { Cluster, Redis } from 'ioredis';

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
 * Error whose message is Redis's own (`NOSCRIPT ...`, `OOM ...`).
 */
export interface RedisConnection {
  /** True for a Redis Cluster: the keys of one command must share a slot, and they pick the node. */
  readonly cluster: boolean;
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

/** An ioredis client (`Redis` or `Cluster`) behind a RedisConnection, or undefined when `client` is not one. */
export function ioredisConnection(client: unknown): RedisConnection | undefined {
  const candidate = client as (Redis | Cluster) | undefined;
  if (typeof candidate?.evalsha !== 'function') return undefined;
  return new IoredisConnection(candidate);
}

class IoredisConnection implements RedisConnection {
  readonly cluster: boolean;
  readonly #client: Redis | Cluster;

  constructor(client: Redis | Cluster) {
    this.#client = client;
    this.cluster = (client as { isCluster?: boolean }).isCluster === true;
  }

  send(command: string, args: readonly string[]): Promise<unknown> {
    // ioredis finds the keys of every command it knows, and routes on them by itself.
    return this.#client.call(command, args as string[]);
  }

  async eachMaster<T>(action: (node: RedisNode) => Promise<T>): Promise<T[]> {
    if (!this.cluster) return [await action(nodeOf(this.#client as Redis))];
    const client = this.#client as Cluster;
    // The nodes are known once the client has read the slot map: a first command makes it.
    if (client.nodes('master').length === 0) await client.call('PING');
    return Promise.all(client.nodes('master').map((node) => action(nodeOf(node))));
  }

  subscribe(
    channel: string,
    onMessage: (message: string) => void,
    onResubscribed: () => void,
  ): RedisSubscription {
    const subscriber = this.#client.duplicate();
    // It reconnects by itself; an 'error' without a listener would crash the process.
    subscriber.on('error', () => {});
    subscriber.on('message', (_channel: string, message: string) => onMessage(message));
    // Subscribed on every 'ready', not once at creation: with the recommended enableOfflineQueue: false
    // a command sent before the connection is up fails at once, and the subscription would never be made.
    let subscribed = false;
    subscriber.on('ready', () => {
      subscriber.subscribe(channel).then(
        () => {
          if (subscribed) onResubscribed();
          subscribed = true;
        },
        () => {},
      );
    });
    if (subscriber.status === 'wait') subscriber.connect().catch(() => {});
    return { close: () => subscriber.disconnect() };
  }
}

function nodeOf(client: Redis): RedisNode {
  return { send: (command, args) => client.call(command, args as string[]) };
}
