// What both client adapters (ioredis.ts, node-redis.ts) share about a client: whether it is slow or gone
// (its first connection still being made, how long its calls have waited unanswered), its faults named
// by their cause, and its replies read as RESP2.
import { errorCode } from '../../../errors.js';
import type { ConnectionLiveness } from '../../store.js';

/** The part of an EventEmitter the store listens on (the client's own errors and readiness). */
export interface ClientEvents {
  on(event: string, listener: (...args: never[]) => void): unknown;
  off?(event: string, listener: (...args: never[]) => void): unknown;
}

const faultsOf = new WeakMap<object, ConnectionFaults>();

/** Error classes of a reply from Redis (ioredis, iovalkey; node-redis): the server's own message, kept as is. */
const REPLY_ERRORS = new Set(['ReplyError', 'ErrorReply', 'SimpleError', 'BlobError', 'MultiErrorReply']);

/** True for an error reply from Redis (the server answered), false for a client's own refusal or a lost connection. */
export function isReply(error: unknown): boolean {
  return error instanceof Error && (REPLY_ERRORS.has(error.name) || REPLY_ERRORS.has(error.constructor.name));
}

/**
 * Keeps the last connection error a client emitted (refused, unknown host, wrong password) until it is
 * ready again. A command the client refuses meanwhile ("Stream isn't writeable ...", "The client is
 * offline") is rejected with that cause instead: its message first, its `code` (ECONNREFUSED, ENOTFOUND,
 * WRONGPASS, NOAUTH), and the client's own error as `cause`. Listening on 'error' also keeps a client
 * without a listener of its own from logging "Unhandled error event" (ioredis) or crashing the process
 * (node-redis, an EventEmitter): the limiter reports faults through `storeError` instead.
 */
export class ConnectionFaults {
  #last: Error | undefined;

  /**
   * The faults of `client`, listened to once however many stores share it: `errors` are the events
   * that carry an error, `ready` those that mean the client is usable again.
   */
  static of(client: ClientEvents, errors: readonly string[], ready: readonly string[]): ConnectionFaults {
    let faults = faultsOf.get(client);
    if (faults === undefined) {
      const created = new ConnectionFaults();
      // A stand-in client without events (a test's) has no faults to tell.
      const on = typeof client.on === 'function' ? client.on.bind(client) : () => {};
      for (const name of errors) on(name, (error: never) => created.#failed(error));
      for (const name of ready) on(name, () => created.#ready());
      faultsOf.set(client, created);
      faults = created;
    }
    return faults;
  }

  #failed(error: unknown): void {
    if (error instanceof Error) this.#last = error;
  }

  #ready(): void {
    this.#last = undefined;
  }

  /**
   * `error`, or when it is the client refusing a command for want of a connection, the cause named; an
   * error reply from Redis gets its code (`NOAUTH`, `NOSCRIPT`) as `code`.
   */
  explain(error: unknown): unknown {
    if (!(error instanceof Error)) return error;
    if (isReply(error)) {
      // Redis's reply names its code first ("NOAUTH Authentication required."): as `code`, like a Node error's.
      const reply = error as Error & { code?: unknown };
      if (reply.code === undefined) reply.code = errorCode(error);
      return error;
    }
    const cause = this.#last;
    if (cause === undefined || error === cause) return error;
    const named = new Error(`${cause.message} (${error.message})`, { cause: error });
    // node-redis's Sentinel wraps a node's error in its own, the code on the inner one.
    const code = errorCode(cause) ?? errorCode(cause.cause);
    return code === undefined ? named : Object.assign(named, { code });
  }

  /** `promise`, its rejection explained. */
  guard<T>(promise: Promise<T>): Promise<T> {
    return promise.catch((error: unknown) => Promise.reject(this.explain(error)));
  }
}

/**
 * `reply` as a RESP2 client decodes it, whether the connection speaks RESP2 or RESP3 (node-redis 6 and
 * ioredis 6 default to RESP3): RESP3 booleans as RESP2 gives Lua's (true 1, false nil), doubles and big
 * numbers as strings, maps as flat key-value arrays, sets as arrays, and the [member, score] pairs of a
 * WITHSCORES reply flattened, scores as strings. A reply already in that shape is returned as is.
 */
export function resp2(reply: unknown, argv: readonly string[]): unknown {
  const decoded = decode(reply);
  if (!Array.isArray(decoded) || decoded.length === 0 || !Array.isArray(decoded[0])) return decoded;
  if (!argv.some((arg) => arg.length === 10 && arg.toUpperCase() === 'WITHSCORES')) return decoded;
  return (decoded as unknown[][]).flatMap(([member, score]) => [member, String(score)]);
}

function decode(reply: unknown): unknown {
  switch (typeof reply) {
    case 'string':
      return reply;
    case 'number':
      // An integer stays a number; a RESP3 double is a string under RESP2.
      return Number.isInteger(reply) ? reply : formatDouble(reply);
    case 'bigint':
      return String(reply);
    case 'boolean':
      return reply ? 1 : null;
    case 'undefined':
      return null;
    case 'object':
      return reply === null ? null : decodeObject(reply);
    default:
      return reply;
  }
}

function decodeObject(reply: object): unknown {
  if (Array.isArray(reply)) {
    // Copied only when an element changes: a script's array of numbers goes through untouched.
    let copy: unknown[] | undefined;
    for (let i = 0; i < reply.length; i++) {
      const item: unknown = reply[i];
      const decoded = decode(item);
      if (decoded !== item) {
        copy ??= reply.slice(0, i);
      }
      if (copy !== undefined) copy.push(decoded);
    }
    return copy ?? reply;
  }
  if (Buffer.isBuffer(reply)) return reply.toString();
  if (reply instanceof String) return reply.valueOf();
  if (reply instanceof Set) return [...reply].map(decode);
  if (reply instanceof Map) return [...reply].flat().map(decode);
  if (reply instanceof Error) return reply;
  return Object.entries(reply).flat().map(decode);
}

function formatDouble(value: number): string {
  if (value === Number.POSITIVE_INFINITY) return 'inf';
  if (value === Number.NEGATIVE_INFINITY) return '-inf';
  return String(value);
}

/** How one client library shows its connection: the events it emits and whether the first one is underway. */
export interface ConnectionSignals {
  /** Events that carry a connection error (the first connection failed when one comes before ready). */
  readonly errors: readonly string[];
  /** Events that mean the client can send now. */
  readonly ready: readonly string[];
  /** True while the client is making a connection and could not send yet (read when asked, not cached). */
  connecting(): boolean;
  /** True when the client can send now. */
  isReady(): boolean;
}

const livenessOf = new WeakMap<object, ClientLiveness>();

/** Calls outstanding on one node, and since when none of them was answered. */
interface NodeCalls {
  outstanding: number;
  silentSinceMs: number;
}

/**
 * A client's liveness, shared by every store on that client. Two things tell a slow Redis from a
 * failed one without a timer of their own:
 * - the first connection: until it is ready, or has failed, decisions wait for it rather than being
 *   sent into a client that would refuse them (a fail-fast client) or hold them in its own queue;
 * - answers: while calls are outstanding on a node, the time since that node last answered any of
 *   them (or since the first of them was sent, when none was outstanding before). Replies arriving for
 *   calls sent earlier mean Redis is working through this process's pipeline: a call behind them is
 *   waiting its turn, not lost. An error reply (`NOSCRIPT`, `OOM`) is an answer too; a refusal of the
 *   client is not. On a Cluster each master is watched on its own, so that one lost master is not
 *   hidden by the others' answers; the store is as silent as its most silent node.
 */
export class ClientLiveness implements ConnectionLiveness {
  readonly #signals: ConnectionSignals;
  readonly #explain: (error: unknown) => unknown;
  /** Once ready, or once a connection attempt failed, this client is never waited for again. */
  #settled: boolean;
  #waiters: Array<{ resolve(): void; reject(error: unknown): void }> = [];
  #firstConnection: Promise<void> | undefined;
  /** By node ('' off a Cluster, or where the node is not known). */
  readonly #nodes = new Map<string, NodeCalls>();

  private constructor(
    client: ClientEvents,
    signals: ConnectionSignals,
    explain: (error: unknown) => unknown,
  ) {
    this.#signals = signals;
    this.#explain = explain;
    this.#settled = signals.isReady();
    const on = typeof client.on === 'function' ? client.on.bind(client) : () => {};
    for (const name of signals.ready) on(name, () => this.#settle(undefined));
    for (const name of signals.errors)
      on(name, (error: never) => this.#settle(error ?? new Error('the connection ended')));
  }

  /**
   * The liveness of `client`, listened to once however many stores share it. `explain` names a
   * connection fault as the store reports it (see `ConnectionFaults.explain`).
   */
  static of(
    client: ClientEvents,
    signals: ConnectionSignals,
    explain: (error: unknown) => unknown,
  ): ClientLiveness {
    let liveness = livenessOf.get(client);
    if (liveness === undefined) {
      liveness = new ClientLiveness(client, signals, explain);
      livenessOf.set(client, liveness);
    }
    return liveness;
  }

  connecting(): Promise<void> | undefined {
    if (this.#settled) return undefined;
    if (this.#signals.isReady()) {
      this.#settle(undefined);
      return undefined;
    }
    // Not connecting (never asked to, or between attempts): the call is sent, and the client decides.
    if (!this.#signals.connecting()) return undefined;
    this.#firstConnection ??= new Promise<void>((resolve, reject) => this.#waiters.push({ resolve, reject }));
    return this.#firstConnection;
  }

  silentSinceMs(): number | undefined {
    let since: number | undefined;
    for (const calls of this.#nodes.values())
      if (calls.outstanding > 0 && (since === undefined || calls.silentSinceMs < since))
        since = calls.silentSinceMs;
    return since;
  }

  /**
   * `call`, just sent to `node`, counted as outstanding until it settles; its answer, if Redis gave
   * one (`isAnswer` says which errors are), as a sign of that node's life.
   */
  track<T>(call: Promise<T>, isAnswer: (error: unknown) => boolean, node = ''): Promise<T> {
    let calls = this.#nodes.get(node);
    if (calls === undefined) {
      calls = { outstanding: 0, silentSinceMs: 0 };
      this.#nodes.set(node, calls);
    }
    const counted = calls;
    if (counted.outstanding++ === 0) counted.silentSinceMs = performance.now();
    return call.then(
      (value) => {
        answered(counted);
        return value;
      },
      (error: unknown) => {
        if (isAnswer(error)) answered(counted);
        else counted.outstanding--;
        throw error;
      },
    );
  }

  /** The first connection is ready (`error` undefined) or has failed: waiters go on, and it is never waited for again. */
  #settle(error: unknown): void {
    if (this.#settled) return;
    this.#settled = true;
    const waiters = this.#waiters;
    this.#waiters = [];
    this.#firstConnection = undefined;
    const explained = error === undefined ? undefined : this.#explain(error);
    for (const waiter of waiters) {
      if (explained === undefined) waiter.resolve();
      else waiter.reject(explained);
    }
  }
}

function answered(calls: NodeCalls): void {
  calls.outstanding--;
  calls.silentSinceMs = performance.now();
}
