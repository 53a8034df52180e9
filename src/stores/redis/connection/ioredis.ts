// RedisConnection over ioredis (5 and 6) and its fork iovalkey: `Redis` (standalone or Sentinel) and `Cluster`.

import { keySlot } from '../keys.js';
import type { RedisConnection, RedisNode, RedisSubscription } from './connection.js';
import { type ClientEvents, ConnectionFaults, isReply } from './faults.js';
import { ClientLiveness } from './liveness.js';
import { resp2 } from './replies.js';

/** The part of an ioredis or iovalkey `Redis` the store uses; a `Cluster` adds `isCluster` and `nodes`. */
interface IoredisClient extends ClientEvents {
  call(command: string, args: string[]): Promise<unknown>;
  /** Sends a Command made by the caller (ioredis's own `call` makes one and sends it here). */
  sendCommand?(command: IoredisCommand): Promise<unknown>;
  readonly options?: {
    readonly keyPrefix?: unknown;
    readonly enableAutoPipelining?: unknown;
    readonly showFriendlyErrorStack?: unknown;
  };
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

/** One command of ioredis or iovalkey (`Redis.Command`): its arguments, read as it is written out. */
interface IoredisCommand {
  args: unknown[];
}

/** `Redis.Command`: the class of the commands `call` makes. */
type IoredisCommandClass = new (
  name: string,
  args: unknown[],
  options: { replyEncoding: 'utf8'; errorStack: Error | undefined },
) => IoredisCommand;

/**
 * The script calls, sent as a Command of their own (see `IoredisConnection.send`): commands without an
 * argument transformer in ioredis, sent once per batch of decisions or releases.
 */
const SCRIPT_CALLS = new Set(['EVALSHA', 'FCALL', 'EVAL']);

/**
 * Whether `client.call` only makes a Command and sends it: no key prefix (applied to the arguments as the
 * Command is made) and no auto-pipelining (which sends through a pipeline instead).
 */
function plainCalls(client: IoredisClient): boolean {
  const options = client.options;
  return (
    typeof client.sendCommand === 'function' &&
    options !== undefined &&
    !options.keyPrefix &&
    !options.enableAutoPipelining
  );
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
  /** The client's Command class (see #call): null when it has none to use, undefined until known. */
  #command: IoredisCommandClass | null | undefined;

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
    const call = this.liveness.track(this.#call(client, command, args), isReply, node);
    return this.#faults.guard(call).then((reply) => resp2(reply, args));
  }

  /**
   * The command sent, as `client.call` sends it; a script call is made into a Command here, its arguments
   * given after it is made, because the constructor `call` uses copies them one by one (bench/RESULTS.md).
   */
  #call(client: IoredisClient, command: string, args: readonly string[]): Promise<unknown> {
    if (!SCRIPT_CALLS.has(command)) return client.call(command, args as string[]);
    const Command = this.#commandClass();
    // A Cluster's node (eachMaster) has options of its own: its calls are looked at too.
    if (
      Command === undefined ||
      client.sendCommand === undefined ||
      (client !== this.#client && !plainCalls(client))
    )
      return client.call(command, args as string[]);
    // As `call` makes it: the stack of the caller kept when the client was asked to.
    const made = new Command(command, [], {
      replyEncoding: 'utf8',
      errorStack: client.options?.showFriendlyErrorStack ? new Error() : undefined,
    });
    // Read, never changed, by ioredis (the key prefix that would change them is excluded above).
    made.args = args as string[];
    return client.sendCommand(made);
  }

  /**
   * The class of the Commands the client's `call` makes, when its calls are plain (see plainCalls): found
   * once, by a `call` on an object made from the client whose own `sendCommand` keeps the Command it is
   * given and sends nothing (the client itself is not touched). `client.constructor` does not name it:
   * ioredis mixes EventEmitter into its classes, and a Cluster's commands are not of the Cluster's class.
   */
  #commandClass(): IoredisCommandClass | undefined {
    if (this.#command !== undefined) return this.#command ?? undefined;
    const client = this.#client;
    let found: unknown;
    if (plainCalls(client)) {
      const probe = Object.create(client) as IoredisClient;
      Object.defineProperty(probe, 'sendCommand', {
        value: (command: object) => {
          found = command.constructor;
          return Promise.resolve(null);
        },
      });
      try {
        void probe.call('PING', []).catch(() => {});
      } catch {
        found = undefined;
      }
    }
    this.#command = typeof found === 'function' ? (found as IoredisCommandClass) : null;
    return this.#command ?? undefined;
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
