// A Web `Request` as the core sees it (the client address from the runtime, the query, the body), and as the
// request sequence maps it: the rate-limit fields and the denial are a `Response` the wrapper returns.
import type { Decision, RequestInfo } from '../src/index.js';
import { errorStatus, heldUntilWritten, signalAborted } from './common.js';
import { type HttpExchange, pathOf } from './exchange.js';
import { clientAddress, type Trust } from './proxy-trust.js';
import { FETCH_TRUST, type TrustSetting, type WiringCheck } from './wiring.js';

/** The second argument Bun's `fetch` handler gets: its server, which knows each request's peer. */
interface BunServer {
  requestIP(request: Request): { address: string } | null;
}
/** The second argument Deno's `serve` handler gets: the connection's addresses. */
interface DenoServeInfo {
  remoteAddr: { hostname?: string; transport?: string };
}
/** The second argument `@hono/node-server`'s `serve` gives a fetch handler on Node: the request's socket. */
interface NodeServerBindings {
  incoming: { socket?: { remoteAddress?: string } };
}

/**
 * The peer address the runtime gives a handler: Bun's `server.requestIP(request)`, Deno's
 * `info.remoteAddr.hostname` (TCP), the socket's on Node under `@hono/node-server`, Cloudflare's `CF-Connecting-IP` when `cloudflare` is true, or, left
 * undefined, in a Worker on a request Cloudflare's edge delivered (`behindCloudflare`); never when false (a
 * client can send that header anywhere else). Undefined on a runtime that gives none (Next.js middleware
 * gives `request.ip` on some hosts: pass `clientAddress` there).
 */
export function runtimePeer(
  request: Request,
  rest: readonly unknown[],
  cloudflare: boolean | undefined,
): string | undefined {
  if (cloudflare ?? behindCloudflare(request)) return request.headers.get('cf-connecting-ip') ?? undefined;
  const second = rest[0] as Partial<BunServer & DenoServeInfo & NodeServerBindings> | null | undefined;
  if (second === null || typeof second !== 'object') return undefined;
  if (typeof second.requestIP === 'function') return second.requestIP(request)?.address;
  const socket = second.incoming?.socket;
  if (socket !== undefined) return socket.remoteAddress;
  const remote = second.remoteAddr;
  if (remote !== undefined && (remote.transport === undefined || remote.transport === 'tcp'))
    return remote.hostname;
  return undefined;
}

/**
 * Whether this is a Cloudflare Worker, which only Cloudflare's edge can reach: it sets `CF-Connecting-IP`
 * on every request, replacing what a client sent.
 */
export function onWorkers(): boolean {
  return (globalThis as { navigator?: { userAgent?: string } }).navigator?.userAgent === 'Cloudflare-Workers';
}

/**
 * A request that Cloudflare's edge delivered to a Worker: the runtime is workerd and the request carries the
 * edge's `cf` properties (colo, country ...). workerd run on its own (self-hosted, behind another proxy) says
 * it is a Worker too, but its requests have no `cf` unless its operator configures one: there a client could
 * send `CF-Connecting-IP` itself, so it is not believed.
 */
export function behindCloudflare(request: Request): boolean {
  const cf = (request as { cf?: unknown }).cf;
  return onWorkers() && typeof cf === 'object' && cf !== null;
}

/** How the wrapper reads a request, resolved once from its options. */
export interface FetchReading {
  trust: Trust | undefined;
  /** The app's own reading of the peer address, in place of the runtime's. */
  peer: ((request: Request, ...rest: unknown[]) => string | undefined) | undefined;
  /** `CF-Connecting-IP` is the peer: always (true), never (false), on a Worker behind Cloudflare (undefined). */
  cloudflare: boolean | undefined;
  user: ((request: Request, ...rest: unknown[]) => unknown) | undefined;
  /** Read a JSON or form body before the decision. */
  body: boolean;
  trustsAll: boolean;
  trustsNone: boolean;
}

/** The body as a handler would parse it: JSON, or a urlencoded form; undefined when it is neither or empty. */
export async function readBody(request: Request): Promise<unknown> {
  if (request.body === null) return undefined;
  const type = request.headers.get('content-type') ?? '';
  try {
    const text = await request.clone().text();
    if (text === '') return undefined;
    if (/^application\/x-www-form-urlencoded\b/i.test(type)) return queryObject(new URLSearchParams(text));
    return JSON.parse(text);
  } catch {
    // Not JSON: the handler's json() fails on it as well.
  }
  return undefined;
}

/** Parameters as an object, a repeated name as an array of its values (refused where a rule reads it as a key). */
function queryObject(params: URLSearchParams): Record<string, unknown> {
  const query: Record<string, unknown> = {};
  for (const [name, value] of params) {
    const seen = query[name];
    if (seen === undefined) query[name] = value;
    else if (Array.isArray(seen)) seen.push(value);
    else query[name] = [seen, value];
  }
  return query;
}

export class FetchRequestInfo implements RequestInfo {
  readonly method: string;
  readonly path: string;
  readonly body: unknown;
  readonly #request: Request;
  readonly #rest: readonly unknown[];
  readonly #reading: FetchReading;
  readonly #queryAt: number;
  #headers: RequestInfo['headers'] | undefined;
  #query: Record<string, unknown> | undefined;
  #ip: string | undefined;
  #ipRead = false;

  constructor(request: Request, rest: readonly unknown[], reading: FetchReading, body: unknown) {
    this.#request = request;
    this.#rest = rest;
    this.#reading = reading;
    this.method = request.method;
    const url = request.url;
    // An absolute URL, as every runtime gives it: the path starts at the first '/' after the authority.
    const start = url.indexOf('/', url.indexOf('//') + 2);
    const target = start < 0 ? '/' : url.slice(start);
    this.path = pathOf(target);
    this.#queryAt = start < 0 ? -1 : url.indexOf('?', start);
    this.body = body;
  }

  /** Built on first read, from the request's `Headers` (names in lower case). */
  get headers(): RequestInfo['headers'] {
    if (this.#headers === undefined) {
      const headers: Record<string, string> = {};
      for (const [name, value] of this.#request.headers) headers[name] = value;
      this.#headers = headers;
    }
    return this.#headers;
  }

  /** The peer, or the right-most `X-Forwarded-For` entry not appended by a trusted proxy. */
  get ip(): string | undefined {
    if (this.#ipRead) return this.#ip;
    this.#ipRead = true;
    const { peer, cloudflare, trust } = this.#reading;
    const request = this.#request;
    const address =
      peer !== undefined ? peer(request, ...this.#rest) : runtimePeer(request, this.#rest, cloudflare);
    this.#ip =
      trust === undefined || address === undefined
        ? address
        : clientAddress(address, request.headers.get('x-forwarded-for') ?? undefined, trust);
    return this.#ip;
  }

  get query(): Record<string, unknown> {
    if (this.#query === undefined) {
      const at = this.#queryAt;
      if (at < 0) this.#query = {};
      else {
        const url = this.#request.url;
        const hash = url.indexOf('#', at);
        this.#query = queryObject(new URLSearchParams(url.slice(at + 1, hash < 0 ? undefined : hash)));
      }
    }
    return this.#query;
  }

  get params(): Record<string, unknown> {
    return {};
  }

  get user(): unknown {
    return this.#reading.user?.(this.#request, ...this.#rest);
  }
}

/**
 * The `waitUntil` among the handler's other arguments: a Worker's `ctx` (the third) or Vercel Edge
 * middleware's `event` (the second); undefined on Bun, Deno and Node, whose work outlives the response.
 */
function waitUntilOf(rest: readonly unknown[]): ((work: Promise<unknown>) => void) | undefined {
  for (const argument of rest) {
    const context = argument as { waitUntil?: unknown } | null;
    if (typeof context === 'object' && context !== null && typeof context.waitUntil === 'function') {
      const waitUntil = context.waitUntil as (work: Promise<unknown>) => void;
      return (work) => waitUntil.call(context, work);
    }
  }
  return undefined;
}

/** Where `rateLimitOf` finds the decision of a request. */
// Module-level: `rateLimitOf` is given the request alone, an object of the runtime that any handler in the process may hold.
const decisions = new WeakMap<Request, Decision>();

/** The rate-limit decision for `request`, once `withRateLimit` decided it; undefined before, or when no rule matched. */
export function rateLimitOf(request: Request): Decision | undefined {
  return decisions.get(request);
}

/**
 * One request to a fetch handler as the request sequence needs it. The rate-limit fields are gathered and
 * put on the response the wrapper returns: its denial, or the handler's.
 */
export class FetchExchange implements HttpExchange {
  readonly #request: Request;
  readonly #rest: readonly unknown[];
  readonly #reading: FetchReading;
  readonly handle: ((decision: Decision) => Promise<void>) | undefined;
  readonly #fields = new Headers();
  #done: ((status: number) => void) | undefined;
  #handled: (() => void) | undefined;
  /** A Worker's `ctx.waitUntil` or Vercel Edge's `event.waitUntil`: keeps work after the response alive. */
  readonly #waitUntil: ((work: Promise<unknown>) => void) | undefined;
  /** The denial, once the sequence answered. */
  response: Response | undefined;

  constructor(
    request: Request,
    rest: readonly unknown[],
    reading: FetchReading,
    handler: ((request: Request, decision: Decision) => Response | Promise<Response>) | undefined,
  ) {
    this.#request = request;
    this.#rest = rest;
    this.#reading = reading;
    this.#waitUntil = waitUntilOf(rest);
    this.handle =
      handler &&
      (async (decision) => {
        this.response = withFields(await handler(request, decision), this.#fields);
      });
  }

  /** No socket is shown to a fetch handler: a client gone is told by the request's signal. */
  socket(): undefined {
    return undefined;
  }

  spoofable(): string | undefined {
    return this.#reading.trustsAll
      ? `withRateLimit's trustProxy is true (${FETCH_TRUST.spoofable})`
      : undefined;
  }

  untrusted(): TrustSetting | undefined {
    return this.#reading.trustsNone ? FETCH_TRUST : undefined;
  }

  whenGone(cancel: () => void): () => void {
    return signalAborted(this.#request.signal, cancel);
  }

  info(): RequestInfo | Promise<RequestInfo> {
    const request = this.#request;
    if (!this.#reading.body) return new FetchRequestInfo(request, this.#rest, this.#reading, undefined);
    return readBody(request).then((body) => new FetchRequestInfo(request, this.#rest, this.#reading, body));
  }

  keep(decision: Decision): void {
    decisions.set(this.#request, decision);
  }

  /** A fetch handler has no routes the wrapper could see. */
  unmatched(_info: RequestInfo, _wiring: WiringCheck): void {}

  /** The response is the wrapper's to return: nothing is out before. */
  sent(): boolean {
    return false;
  }

  header(name: string, value: string, list: boolean): void {
    if (list) this.#fields.append(name, value);
    else this.#fields.set(name, value);
  }

  send(status: number, body: unknown): void {
    const headers = new Headers(this.#fields);
    if (typeof body === 'string') {
      headers.set('content-type', 'text/plain; charset=utf-8');
      this.response = new Response(body, { status, headers });
    } else {
      headers.set('content-type', 'application/json');
      this.response = new Response(JSON.stringify(body), { status, headers });
    }
  }

  /** Never called: nothing is out before the wrapper returns its response. */
  end(): void {}

  finished(done: (status: number) => unknown): void {
    this.#done = (status) => this.#keepAlive(done(status));
  }

  handled(done: () => unknown): void {
    this.#handled = () => this.#keepAlive(done());
  }

  /**
   * Work the limiter does after the response (a slot's release, an outcome's report), handed to the
   * runtime's `waitUntil` where it has one: a Worker may otherwise end the request's I/O with the response.
   */
  #keepAlive(work: unknown): void {
    if (this.#waitUntil !== undefined && work instanceof Promise) this.#waitUntil(work.catch(() => {}));
  }

  /**
   * Runs the handler, then gives its response the rate-limit fields, judges the outcome by its status, and
   * holds a concurrency rule's slot until its body is read to its end, fails or is cancelled, or the
   * request's signal aborts. A handler that throws is judged by the status the error names, else 500.
   */
  async pass(run: () => Response | Promise<Response>): Promise<Response> {
    const handled = this.#handled;
    let response: Response;
    try {
      response = await run();
    } catch (error) {
      handled?.();
      this.#done?.(errorStatus(error));
      throw error;
    }
    response = withFields(response, this.#fields);
    if (handled !== undefined) response = heldUntilWritten(response, this.#request.signal, handled);
    this.#done?.(response.status);
    return response;
  }
}

/**
 * `response` with the rate-limit fields added. A response whose headers are immutable (one `fetch` returned,
 * `Response.redirect`) is copied first; a protocol switch (101, a WebSocket upgrade) is returned as it is.
 */
function withFields(response: Response, fields: Headers): Response {
  if (response.status === 101) return response;
  let out = response;
  for (const [name, value] of fields) {
    try {
      // Headers names are lower case: the list fields of `appendsField` (src/headers.ts).
      if (name === 'ratelimit-policy' || (name === 'ratelimit' && value.startsWith('"')))
        out.headers.append(name, value);
      else out.headers.set(name, value);
    } catch {
      out = new Response(response.body, response);
      return withFields(out, fields);
    }
  }
  return out;
}
