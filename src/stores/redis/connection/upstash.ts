// RedisConnection over @upstash/redis: Redis over HTTP (its REST protocol), for runtimes without TCP. The
// commands of one turn go as one request (/pipeline, run in order), each request is aborted past a bound,
// and there is no subscription: HTTP has none the store could hold open between requests.
import type { ConnectionLiveness } from '../../store.js';
import type { RedisConnection, RedisNode } from './connection.js';

/** One request of the REST protocol as @upstash/redis's `Requester` takes it. */
interface UpstashRequest {
  path?: string[];
  body?: unknown;
  signal?: AbortSignal;
}

/** What the REST endpoint answered: `{ result }` or `{ error }` (base64 already decoded by the client). */
interface UpstashReply {
  result?: unknown;
  error?: string;
}

/** The part of an @upstash/redis `Redis` the store uses: its requester, which speaks the REST protocol. */
interface UpstashRedis {
  readonly client: { request(req: UpstashRequest): Promise<UpstashReply | UpstashReply[]> };
}

/**
 * An @upstash/redis `Redis` (or one built on a `Requester` of the user's) behind a RedisConnection, or
 * undefined when `client` is none. Recognized by shape: its `evalsha` and `scriptLoad` commands beside a
 * requester (`client.request`), so that this module imports nothing of the package.
 */
export function upstashConnection(client: unknown, requestTimeoutMs: number): RedisConnection | undefined {
  const c = client as Record<string, unknown> | null | undefined;
  if (typeof c?.evalsha !== 'function' || typeof c.scriptLoad !== 'function') return undefined;
  const requester = c.client as { request?: unknown } | undefined;
  if (typeof requester?.request !== 'function') return undefined;
  return new UpstashConnection(c as unknown as UpstashRedis, requestTimeoutMs);
}

/** A command waiting for the end of the turn, to go out with the others of that turn. */
interface Queued {
  readonly argv: string[];
  resolve(value: unknown): void;
  reject(error: unknown): void;
}

class UpstashConnection implements RedisConnection {
  readonly cluster = false;
  readonly functions = false;
  // A Worker cancels a request left waiting on another request's fetch: each request sends its own calls.
  readonly isolatedRequests =
    (globalThis as { navigator?: { userAgent?: string } }).navigator?.userAgent === 'Cloudflare-Workers';
  readonly liveness = new RequestLiveness();
  readonly #redis: UpstashRedis;
  readonly #timeoutMs: number;
  #queue: Queued[] = [];

  constructor(redis: UpstashRedis, timeoutMs: number) {
    this.#redis = redis;
    this.#timeoutMs = timeoutMs;
  }

  /**
   * Queues the command; the commands of one turn of the microtask queue go as one request, in the order
   * they were sent (a reset and its announcement, a batch and the refunds behind it), which Redis runs
   * in that order.
   */
  send(command: string, args: readonly string[]): Promise<unknown> {
    return new Promise((resolve, reject) => {
      if (this.#queue.length === 0) queueMicrotask(() => this.#flush());
      this.#queue.push({ argv: [command, ...args], resolve, reject });
    });
  }

  async eachMaster<T>(action: (node: RedisNode) => Promise<T>): Promise<T[]> {
    return [await action({ send: (command, args) => this.send(command, args) })];
  }

  #flush(): void {
    const queued = this.#queue;
    this.#queue = [];
    const one = queued.length === 1 ? (queued[0] as Queued) : undefined;
    const request: UpstashRequest =
      one !== undefined ? { body: one.argv } : { path: ['pipeline'], body: queued.map((q) => q.argv) };
    this.#request(request).then(
      (reply) => {
        if (one !== undefined) return settle(one, Array.isArray(reply) ? undefined : reply);
        const replies = Array.isArray(reply) ? reply : [];
        for (let i = 0; i < queued.length; i++) settle(queued[i] as Queued, replies[i]);
      },
      (error: unknown) => {
        for (const q of queued) q.reject(error);
      },
    );
  }

  /**
   * One request, given up and aborted once it has waited `#timeoutMs` (the client's own retries and their
   * pauses included): a request never hangs, and one the endpoint has not answered by then is not sent
   * again by the client's retries after the failure policy answered for it.
   */
  #request(request: UpstashRequest): Promise<UpstashReply | UpstashReply[]> {
    return new Promise((resolve, reject) => {
      const controller = new AbortController();
      const done = this.liveness.sent();
      let over = false;
      const end = (answered: boolean): boolean => {
        if (over) return false;
        over = true;
        clearTimeout(timer);
        done(answered);
        return true;
      };
      const timer = setTimeout(() => {
        // @upstash/redis resolves an aborted request with an "Aborted" result: never taken for an answer.
        if (end(false)) reject(timeoutError(this.#timeoutMs));
        controller.abort(new Error('timeout'));
      }, this.#timeoutMs);
      const failed = (error: unknown) => {
        const answered = isAnswer(error);
        if (end(answered)) reject(explain(error));
      };
      try {
        this.#redis.client.request({ ...request, signal: controller.signal }).then((reply) => {
          if (end(true)) resolve(reply);
        }, failed);
      } catch (error) {
        failed(error);
      }
    });
  }
}

/** Settles one command from its entry of the reply: its result, or its error as Redis worded it. */
function settle(queued: Queued, reply: UpstashReply | undefined): void {
  if (reply === null || typeof reply !== 'object') {
    queued.reject(
      withCode(new Error('the Upstash REST endpoint answered without a result for this command')),
    );
  } else if (typeof reply.error === 'string') {
    queued.reject(withCode(new Error(reply.error)));
  } else if (reply.result === undefined) {
    queued.reject(
      withCode(new Error('the Upstash REST endpoint answered without a result for this command')),
    );
  } else {
    queued.resolve(reply.result);
  }
}

function timeoutError(ms: number): Error {
  return Object.assign(
    new Error(`the Upstash REST endpoint did not answer within ${ms} ms (request aborted)`),
    {
      code: 'ETIMEDOUT',
    },
  );
}

/**
 * Whether the endpoint answered (a Redis error, an HTTP error with a body, a body that is not JSON), as
 * opposed to a request that reached nothing (`fetch` itself failed: refused, unknown host, reset).
 */
function isAnswer(error: unknown): boolean {
  return error instanceof Error && error.name.startsWith('Upstash');
}

/** What @upstash/redis appends to an HTTP error: the whole command, keys and script text, kept out of logs. */
const COMMAND_SUFFIX = /, command was: [\s\S]*$/;

/**
 * The fault as the store reports it: Redis's own message (its code as `code`: NOSCRIPT, WRONGPASS ...),
 * without the command @upstash/redis quotes; a failed `fetch` named by its cause (ECONNREFUSED ...).
 */
function explain(error: unknown): unknown {
  if (!(error instanceof Error)) return error;
  if (isAnswer(error)) {
    const message = error.message.replace(COMMAND_SUFFIX, '');
    return withCode(new Error(message, { cause: error }));
  }
  const cause = error.cause as { code?: unknown; message?: unknown } | undefined;
  if (typeof cause?.message !== 'string') return error;
  const named = new Error(`${error.message}: ${cause.message}`, { cause: error });
  return typeof cause.code === 'string' ? Object.assign(named, { code: cause.code }) : named;
}

/** Redis replies name their code first ("NOSCRIPT No matching script"): as `code`, like a Node error's. */
function withCode(error: Error): Error {
  const code = /^([A-Z][A-Z0-9_]{1,31})(?: |$)/.exec(error.message)?.[1];
  return code === undefined ? error : Object.assign(error, { code });
}

/**
 * Liveness over HTTP: no connection to wait for (each request opens or reuses one by itself), and the
 * time since the endpoint last answered any of the requests in flight, the failure policy's measure of
 * silence. `performance` is the Web platform's (every runtime has it).
 */
class RequestLiveness implements ConnectionLiveness {
  #outstanding = 0;
  #silentSinceMs = 0;

  connecting(): undefined {
    return undefined;
  }

  silentSinceMs(): number | undefined {
    return this.#outstanding > 0 ? this.#silentSinceMs : undefined;
  }

  /** A request sent: the returned function is told when it ended, and whether the endpoint answered. */
  sent(): (answered: boolean) => void {
    if (this.#outstanding++ === 0) this.#silentSinceMs = performance.now();
    return (answered) => {
      this.#outstanding--;
      if (answered) this.#silentSinceMs = performance.now();
    };
  }
}
