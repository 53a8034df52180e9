// A store fault named by its cause: the client's last connection error, attached to the command it made fail.
import { errorCode } from '../../../errors.js';

/** The part of an EventEmitter the store listens on (the client's own errors and readiness). */
export interface ClientEvents {
  on(event: string, listener: (...args: never[]) => void): unknown;
  off?(event: string, listener: (...args: never[]) => void): unknown;
}

const watched = new WeakMap<object, ConnectionFaults>();

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
    let faults = watched.get(client);
    if (faults === undefined) {
      const created = new ConnectionFaults();
      // A stand-in client without events (a test's) has no faults to tell.
      const on = typeof client.on === 'function' ? client.on.bind(client) : () => {};
      for (const name of errors) on(name, (error: never) => created.#failed(error));
      for (const name of ready) on(name, () => created.#ready());
      watched.set(client, created);
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
