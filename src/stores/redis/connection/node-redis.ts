// RedisConnection over node-redis (the `redis` package, 5 and 6): createClient, createCluster and createSentinel.

import { keySlot } from '../keys.js';
import type { RedisConnection, RedisNode, RedisSubscription } from './connection.js';
import { type ClientEvents, ClientLiveness, ConnectionFaults, isReply, resp2 } from './liveness.js';

type Listener = (message: string) => void;

/** The part of a node-redis client (`createClient`) the store uses. */
interface NodeRedisClient extends ClientEvents {
  sendCommand(args: string[]): Promise<unknown>;
  duplicate(): NodeRedisClient;
  connect(): Promise<unknown>;
  subscribe(channel: string, listener: Listener): Promise<unknown>;
  destroy?(): void;
  readonly isOpen: boolean;
}

/** The part of a node-redis Cluster (`createCluster`) the store uses. */
interface NodeRedisCluster extends ClientEvents {
  sendCommand(firstKey: string | undefined, isReadonly: boolean, args: string[]): Promise<unknown>;
  readonly masters: readonly unknown[];
  /** The shard serving each slot, its master first. */
  readonly slots?: ReadonlyArray<{ master?: unknown } | undefined>;
  nodeClient(node: unknown): NodeRedisClient | Promise<NodeRedisClient>;
  subscribe(channel: string, listener: Listener): Promise<unknown>;
  unsubscribe(channel: string, listener: Listener): Promise<unknown>;
  readonly isOpen: boolean;
}

/** The part of a node-redis Sentinel client (`createSentinel`) the store uses. */
interface NodeRedisSentinel extends ClientEvents {
  sendCommand(isReadonly: boolean, args: string[]): Promise<unknown>;
  subscribe(channel: string, listener: Listener): Promise<unknown>;
  unsubscribe(channel: string, listener: Listener): Promise<unknown>;
  readonly isOpen: boolean;
}

/** A node-redis client, Cluster or Sentinel behind a RedisConnection, or undefined when `client` is none. */
export function nodeRedisConnection(client: unknown): RedisConnection | undefined {
  const c = client as Record<string, unknown> | null | undefined;
  if (typeof c?.sendCommand !== 'function' || typeof c.on !== 'function' || !('isOpen' in c)) {
    return undefined;
  }
  if (typeof c.nodeClient === 'function' && 'masters' in c) {
    return new NodeRedisClusterConnection(c as unknown as NodeRedisCluster);
  }
  if (typeof c.getMasterNode === 'function') {
    return new NodeRedisSentinelConnection(c as unknown as NodeRedisSentinel);
  }
  if (typeof c.duplicate === 'function')
    return new NodeRedisClientConnection(c as unknown as NodeRedisClient);
  return undefined;
}

/** node-redis refuses every command of a client never connected (or closed): say what to do. */
function closedError(): Error {
  return Object.assign(
    new Error(
      'the node-redis client is not open: call `await client.connect()` before deciding ' +
        '(RedisStore never opens or closes the client it is given)',
    ),
    { code: 'ERR_CLIENT_CLOSED' },
  );
}

/** Between a lost connection and the next: node-redis would queue the command (unless disableOfflineQueue). */
function offlineError(): Error {
  return new Error('the node-redis client is not connected (connecting or reconnecting)');
}

/** Whether a node-redis client, Cluster or Sentinel can send now. */
interface Readiness {
  readonly isOpen: boolean;
  readonly isReady?: boolean;
}

/**
 * What every node-redis kind shares: faults named by their cause, replies decoded, a closed client said,
 * and no command queued while disconnected, whatever `disableOfflineQueue` says: a decision fails at
 * once into the failure policy instead of waiting in node-redis's queue (and running when Redis is
 * back, counting a request the policy already answered).
 */
abstract class NodeRedisConnection implements RedisConnection {
  abstract readonly cluster: boolean;
  protected readonly faults: ConnectionFaults;
  readonly liveness: ClientLiveness;
  readonly #client: Readiness;

  /** `ready`: the events of the client usable again; `connected`: the one that ends its first connection. */
  constructor(client: ClientEvents & Readiness, errors: string[], ready: string[], connected: string) {
    this.#client = client;
    this.faults = ConnectionFaults.of(client, errors, ready);
    this.liveness = ClientLiveness.of(
      client,
      {
        errors: ['error', 'end'],
        ready: [connected],
        // connect() called (without being awaited) and not ready yet: the first connection is underway.
        connecting: () => client.isOpen && client.isReady === false,
        isReady: () => client.isOpen && client.isReady !== false,
      },
      (error) => this.faults.explain(error),
    );
  }

  send(command: string, args: readonly string[], routingKey?: string): Promise<unknown> {
    const client = this.#client;
    if (!client.isOpen) return Promise.reject(this.faults.explain(closedError()));
    if (client.isReady === false) return Promise.reject(this.faults.explain(offlineError()));
    const argv = [command, ...args];
    return this.faults
      .guard(this.liveness.track(this.sendArgs(argv, routingKey), isReply, this.nodeOf(routingKey)))
      .then((reply) => resp2(reply, argv));
  }

  protected abstract sendArgs(argv: string[], routingKey: string | undefined): Promise<unknown>;

  /** The node a call with this routing key goes to, where it matters (a Cluster's master). */
  protected nodeOf(_routingKey: string | undefined): string | undefined {
    return undefined;
  }

  async eachMaster<T>(action: (node: RedisNode) => Promise<T>): Promise<T[]> {
    return [await action({ send: (command, args) => this.send(command, args) })];
  }

  abstract subscribe(
    channel: string,
    onMessage: (message: string) => void,
    onResubscribed: () => void,
  ): RedisSubscription;
}

class NodeRedisClientConnection extends NodeRedisConnection {
  readonly cluster = false;
  readonly #client: NodeRedisClient;

  constructor(client: NodeRedisClient) {
    super(client, ['error'], ['ready'], 'ready');
    this.#client = client;
  }

  protected sendArgs(argv: string[]): Promise<unknown> {
    return this.#client.sendCommand(argv);
  }

  subscribe(channel: string, onMessage: Listener, onResubscribed: () => void): RedisSubscription {
    // A node-redis connection in subscriber mode takes no other command: a connection of its own.
    const subscriber = this.#client.duplicate();
    // It reconnects by itself; an 'error' without a listener would crash the process.
    subscriber.on('error', () => {});
    let state: 'none' | 'pending' | 'subscribed' = 'none';
    const listener = (message: string) => onMessage(String(message));
    // node-redis subscribes again by itself before a reconnection is 'ready'; the first subscription
    // is made on 'ready' too, for with disableOfflineQueue a command sent earlier would fail.
    subscriber.on('ready', () => {
      if (state === 'subscribed') {
        onResubscribed();
      } else if (state === 'none') {
        state = 'pending';
        subscriber.subscribe(channel, listener).then(
          () => {
            state = 'subscribed';
          },
          () => {
            state = 'none';
          },
        );
      }
    });
    subscriber.connect().catch(() => {});
    return { close: () => closeQuietly(subscriber) };
  }
}

class NodeRedisClusterConnection extends NodeRedisConnection {
  readonly cluster = true;
  readonly #client: NodeRedisCluster;

  constructor(client: NodeRedisCluster) {
    // The Cluster is 'connect'ed once it has read the slot map from a node: it can route then.
    super(client, ['error', 'node-error'], ['node-ready'], 'connect');
    this.#client = client;
  }

  protected sendArgs(argv: string[], routingKey: string | undefined): Promise<unknown> {
    // Never readonly: a decision reads and writes, and must not land on a replica.
    return this.#client.sendCommand(routingKey, false, argv);
  }

  protected override nodeOf(routingKey: string | undefined): string | undefined {
    if (routingKey === undefined) return undefined;
    const slot = keySlot(routingKey);
    const master = this.#client.slots?.[slot]?.master as { address?: unknown } | undefined;
    return typeof master?.address === 'string' ? master.address : String(slot);
  }

  override async eachMaster<T>(action: (node: RedisNode) => Promise<T>): Promise<T[]> {
    const cluster = this.#client;
    if (!cluster.isOpen) throw this.faults.explain(closedError());
    return Promise.all(
      cluster.masters.map(async (master) => {
        const client = await cluster.nodeClient(master);
        return action({
          send: (command, args) => {
            const argv = [command, ...args];
            return this.faults.guard(client.sendCommand(argv)).then((reply) => resp2(reply, argv));
          },
        });
      }),
    );
  }

  subscribe(channel: string, onMessage: Listener, onResubscribed: () => void): RedisSubscription {
    // The Cluster subscribes on a connection of its own, and moves it (subscriptions too) when the
    // node it chose goes away. Any node ready again after the subscription may have been that one:
    // the caller hears a resubscription, which costs it no more than forgetting its caches.
    const cluster = this.#client;
    return subscription(
      (listener) => cluster.subscribe(channel, listener),
      (listener) => (cluster.isOpen ? cluster.unsubscribe(channel, listener) : Promise.resolve()),
      onMessage,
      [
        // A subscription refused (not ready yet, a node gone) is tried again once a node is ready.
        { hub: EventHub.of(cluster, 'node-ready'), retry: true, resubscribed: () => true },
      ],
      onResubscribed,
    );
  }
}

class NodeRedisSentinelConnection extends NodeRedisConnection {
  readonly cluster = false;
  readonly #client: NodeRedisSentinel;

  constructor(client: NodeRedisSentinel) {
    super(client, ['error'], ['ready'], 'ready');
    this.#client = client;
  }

  protected sendArgs(argv: string[]): Promise<unknown> {
    // Never readonly: always the master.
    return this.#client.sendCommand(false, argv);
  }

  subscribe(channel: string, onMessage: Listener, onResubscribed: () => void): RedisSubscription {
    // The Sentinel client subscribes on a connection of its own and moves it to a new master after a
    // failover, subscriptions included: messages published meanwhile were missed.
    const sentinel = this.#client;
    return subscription(
      (listener) => sentinel.subscribe(channel, listener),
      (listener) => (sentinel.isOpen ? sentinel.unsubscribe(channel, listener) : Promise.resolve()),
      onMessage,
      [
        { hub: EventHub.of(sentinel, 'ready'), retry: true, resubscribed: () => false },
        {
          hub: EventHub.of(sentinel, 'topology-change'),
          retry: false,
          resubscribed: (event) => (event as { type?: unknown } | undefined)?.type === 'MASTER_CHANGE',
        },
      ],
      onResubscribed,
    );
  }
}

/** An event of a client heard through one listener, however many subscriptions of its stores wait on it. */
class EventHub {
  readonly #callbacks = new Set<(event: unknown) => void>();

  static of(client: ClientEvents, event: string): EventHub {
    let hubs = eventHubs.get(client);
    if (hubs === undefined) {
      hubs = new Map();
      eventHubs.set(client, hubs);
    }
    let hub = hubs.get(event);
    if (hub === undefined) {
      const created = new EventHub();
      client.on(event, (arg: never) => {
        for (const callback of created.#callbacks) callback(arg);
      });
      hubs.set(event, created);
      hub = created;
    }
    return hub;
  }

  /** Calls `callback` on each event until the returned function is called. */
  add(callback: (event: unknown) => void): () => void {
    this.#callbacks.add(callback);
    return () => this.#callbacks.delete(callback);
  }
}

const eventHubs = new WeakMap<object, Map<string, EventHub>>();

interface Watch {
  hub: EventHub;
  /** Whether this event is the moment to try a subscription that failed again. */
  retry: boolean;
  /** Whether this event means the subscription was made again (messages may have been missed). */
  resubscribed: (event: unknown) => boolean;
}

/**
 * A subscription through a node-redis Cluster's or Sentinel's own subscriber: made now, made again on
 * a `retry` event while it failed, `onResubscribed` on a `resubscribed` event once made; undone on close,
 * also when it is made after the close.
 */
function subscription(
  subscribe: (listener: Listener) => Promise<unknown>,
  unsubscribe: (listener: Listener) => Promise<unknown>,
  onMessage: Listener,
  watches: Watch[],
  onResubscribed: () => void,
): RedisSubscription {
  const listener = (message: string) => onMessage(String(message));
  let state: 'none' | 'pending' | 'subscribed' = 'none';
  let closed = false;
  const attempt = () => {
    state = 'pending';
    subscribe(listener).then(
      () => {
        state = 'subscribed';
        if (closed) unsubscribe(listener).catch(() => {});
      },
      () => {
        state = 'none';
      },
    );
  };
  const removals = watches.map(({ hub, retry, resubscribed }) =>
    hub.add((event) => {
      if (closed) return;
      if (state === 'subscribed' && resubscribed(event)) onResubscribed();
      else if (state === 'none' && retry) attempt();
    }),
  );
  attempt();
  return {
    close: () => {
      closed = true;
      for (const remove of removals) remove();
      if (state === 'subscribed') unsubscribe(listener).catch(() => {});
    },
  };
}

function closeQuietly(client: NodeRedisClient): void {
  try {
    client.destroy?.();
  } catch {
    // Already closed.
  }
}
