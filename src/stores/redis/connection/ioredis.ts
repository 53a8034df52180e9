// RedisConnection over ioredis (5 and 6) and its fork iovalkey: `Redis` (standalone or Sentinel) and `Cluster`.

import { keySlot } from '../keys.js';
import type { RedisConnection, RedisNode, RedisSubscription } from './connection.js';
import { type ClientEvents, ClientLiveness, ConnectionFaults, isReply, resp2 } from './liveness.js';

/** The part of an ioredis or iovalkey `Redis` the store uses; a `Cluster` adds `isCluster` and `nodes`. */
interface IoredisClient extends ClientEvents {
  call(command: string, args: string[]): Promise<unknown>;
  duplicate(): IoredisClient;
  subscribe(channel: string): Promise<unknown>;
  connect(): Promise<void>;
  disconnect(): void;
  readonly status: string;
  readonly isCluster?: boolean;
  nodes?(role: 'master'): IoredisClient[];
  /** A Cluster's slot map: the node keys ("host:port", the master first) serving each slot. */
  readonly slots?: ReadonlyArray<readonly string[] | undefined>;
}

/** An ioredis or iovalkey client behind a RedisConnection, or undefined when `client` is not one. */
export function ioredisConnection(client: unknown): RedisConnection | undefined {
  const candidate = client as Partial<IoredisClient> | null | undefined;
  if (typeof candidate?.call !== 'function' || typeof candidate.duplicate !== 'function') return undefined;
  return new IoredisConnection(candidate as IoredisClient);
}

class IoredisConnection implements RedisConnection {
  readonly cluster: boolean;
  readonly #client: IoredisClient;
  readonly #faults: ConnectionFaults;
  readonly liveness: ClientLiveness;

  constructor(client: IoredisClient) {
    this.#client = client;
    this.cluster = client.isCluster === true;
    // A Cluster tells its nodes' faults as 'node error'; 'ready' is the client (or Cluster) usable again.
    this.#faults = ConnectionFaults.of(client, this.cluster ? ['error', 'node error'] : ['error'], ['ready']);
    this.liveness = ClientLiveness.of(
      client,
      {
        errors: ['error', 'end'],
        ready: ['ready'],
        // 'connecting' (a Sentinel asking for its master too) and 'connect' (authenticating, selecting
        // the database, checking the server is loaded): the first connection is underway. 'wait'
        // (lazyConnect) connects on the first command, so that one is sent.
        connecting: () => client.status === 'connecting' || client.status === 'connect',
        isReady: () => client.status === 'ready',
      },
      (error) => this.#faults.explain(error),
    );
  }

  send(command: string, args: readonly string[], routingKey?: string): Promise<unknown> {
    // ioredis finds the keys of every command it knows, and routes on them by itself; the routing key
    // only names the master the call goes to, for the liveness of each.
    const node =
      this.cluster && routingKey !== undefined ? this.#client.slots?.[keySlot(routingKey)]?.[0] : undefined;
    return this.#sendTo(this.#client, command, args, node);
  }

  /** ioredis 6 speaks RESP3 by default: its WITHSCORES replies are pairs, and with replyMapping 'resp3' doubles are numbers. */
  #sendTo(client: IoredisClient, command: string, args: readonly string[], node?: string): Promise<unknown> {
    const call = this.liveness.track(client.call(command, args as string[]), isReply, node);
    return this.#faults.guard(call).then((reply) => resp2(reply, args));
  }

  async eachMaster<T>(action: (node: RedisNode) => Promise<T>): Promise<T[]> {
    const client = this.#client;
    if (!this.cluster || client.nodes === undefined) return [await action(this.#nodeOf(client))];
    // The nodes are known once the client has read the slot map: a first command makes it.
    if (client.nodes('master').length === 0) await this.send('PING', []);
    return Promise.all(client.nodes('master').map((node) => action(this.#nodeOf(node))));
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

  #nodeOf(client: IoredisClient): RedisNode {
    return { send: (command, args) => this.#sendTo(client, command, args, nodeKey(client)) };
  }
}

/** A Cluster node's key as the slot map names it ("host:port"). */
function nodeKey(client: IoredisClient): string | undefined {
  const options = (client as { options?: { host?: unknown; port?: unknown } }).options;
  return options?.host === undefined ? undefined : `${String(options.host)}:${String(options.port)}`;
}
