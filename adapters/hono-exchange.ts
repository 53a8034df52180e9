// Hono's context as the core sees it (the client address through connection info and trusted proxies, the
// body), and as the request sequence maps it.
import type { Context, Next } from 'hono';
import type { GetConnInfo } from 'hono/conninfo';
import type { ContentfulStatusCode } from 'hono/utils/http-status';
import type { Decision, RequestInfo } from '../src/index.js';
import { heldUntilWritten, signalAborted } from './common.js';
import type { HttpExchange } from './exchange.js';
import { runtimePeer } from './fetch-exchange.js';
import { clientAddress, onUnixSocket, type Trust, unixSocketClient } from './proxy-trust.js';
import { type ResponseToWrite, responseWritten } from './response-ends.js';
import { HONO_TRUST, type TrustSetting, type WiringCheck } from './wiring.js';

/**
 * The body as the handler will read it, through Hono's own cached readers. A form (`urlencoded`,
 * `multipart`) by `parseBody()`: once it is read so, `c.req.json()` fails on it, so the form is all a
 * handler gets. Anything else is what `c.req.json()` parses, whatever the content type says (`text/plain`,
 * none, `application/x-json`): Hono's `json()` does not look at it. It is read as bytes, so `text()`,
 * `json()` and `arrayBuffer()` in the handler get them exactly. An empty body is undefined; one that is
 * neither a form nor JSON too, and the core then counts it on the shared `'#unparsed-body'` key.
 */
export async function readBody(c: Context): Promise<unknown> {
  const type = c.req.header('content-type') ?? '';
  try {
    if (/^(application\/x-www-form-urlencoded|multipart\/form-data)\b/i.test(type))
      return await c.req.parseBody();
    const bytes = await c.req.arrayBuffer();
    return bytes.byteLength === 0 ? undefined : JSON.parse(new TextDecoder().decode(bytes));
  } catch {
    // Not JSON (or a malformed form): the handler's json() fails on it as well.
  }
  return undefined;
}

/** The Node socket under `@hono/node-server` (whose `getConnInfo` reads its peer address), if any. */
export function nodeSocket(c: Context): NodeSocket | undefined {
  const env = c.env as { server?: { incoming?: NodeRequest }; incoming?: NodeRequest } | undefined;
  return (env?.server?.incoming ?? env?.incoming)?.socket;
}
interface NodeSocket {
  remoteAddress?: string;
  localPort?: number;
  destroyed?: boolean;
}
interface NodeRequest {
  socket?: NodeSocket;
}

/** The Node response under `@hono/node-server`, if any. */
function nodeResponse(c: Context): ResponseToWrite | undefined {
  const env = c.env as { server?: { outgoing?: ResponseToWrite }; outgoing?: ResponseToWrite } | undefined;
  return env?.server?.outgoing ?? env?.outgoing;
}

export class HonoRequestInfo implements RequestInfo {
  readonly method: string;
  readonly body: unknown;
  readonly #c: Context;
  readonly #trust: Trust | undefined;
  readonly #getConnInfo: GetConnInfo | undefined;
  #headers: RequestInfo['headers'] | undefined;
  #ip: string | undefined;
  #ipRead = false;

  constructor(c: Context, body: unknown, trust: Trust | undefined, getConnInfo: GetConnInfo | undefined) {
    this.#c = c;
    this.method = c.req.method;
    this.body = body;
    this.#trust = trust;
    this.#getConnInfo = getConnInfo;
  }

  /** Built on first read: Hono keeps the request's web `Headers`, not an object. */
  get headers(): RequestInfo['headers'] {
    this.#headers ??= this.#c.req.header();
    return this.#headers;
  }

  get path(): string {
    return this.#c.req.path;
  }

  /**
   * The peer, or the right-most `X-Forwarded-For` entry not appended by a trusted proxy; on a Node server's
   * Unix domain socket, whose peer has no address, the entry the proxy there appended (`unixSocketClient`).
   */
  get ip(): string | undefined {
    if (this.#ipRead) return this.#ip;
    this.#ipRead = true;
    const socket = nodeSocket(this.#c);
    // Without getConnInfo: the Node server's socket, else the runtime's own (Bun's server or Deno's info as
    // the app's env, CF-Connecting-IP in a Worker).
    const peer = this.#getConnInfo
      ? this.#getConnInfo(this.#c).remote.address
      : socket !== undefined
        ? socket.remoteAddress
        : runtimePeer(this.#c.req.raw, [this.#c.env], undefined);
    const trust = this.#trust;
    if (trust === undefined) this.#ip = peer;
    else if (peer !== undefined) this.#ip = clientAddress(peer, this.#c.req.header('x-forwarded-for'), trust);
    else if (onUnixSocket(socket)) this.#ip = unixSocketClient(this.#c.req.header('x-forwarded-for'), trust);
    return this.#ip;
  }

  get query(): Record<string, unknown> {
    return this.#c.req.query();
  }

  get params(): Record<string, unknown> {
    return this.#c.req.param();
  }

  get user(): unknown {
    return this.#c.get('user' as never);
  }
}

/** How the middleware reads a request, resolved once from its options. */
export interface HonoReading {
  trust: Trust | undefined;
  getConnInfo: GetConnInfo | undefined;
  /** Read a JSON or form body before the decision. */
  body: boolean;
  /** `trustProxy: true`: every `X-Forwarded-For` entry believed (spoofable). */
  trustsAll: boolean;
  /** `trustProxy` unset, false or 0: no `X-Forwarded-For` entry believed. */
  trustsNone: boolean;
}

/**
 * Hono's context as the request sequence needs it. A denial is the `Response` the middleware returns;
 * Hono judges after `await next()`, in `pass`.
 */
export class HonoExchange implements HttpExchange {
  readonly #c: Context;
  readonly #reading: HonoReading;
  readonly handle: ((decision: Decision) => Promise<void>) | undefined;
  #done: ((status: number) => void) | undefined;
  #handled: (() => void) | undefined;
  /** The denial, once the sequence answered. */
  response: Response | undefined;

  /** `handler`: the app's own denial, or undefined for the default body. */
  constructor(
    c: Context,
    reading: HonoReading,
    handler: ((c: Context, decision: Decision) => Response | Promise<Response>) | undefined,
  ) {
    this.#c = c;
    this.#reading = reading;
    this.handle =
      handler &&
      (async (decision) => {
        this.response = await handler(c, decision);
      });
  }

  /** Registered for one route (`app.post('/login', rateLimit(...), handler)`), not for a pattern such as `/*`. */
  get attached(): boolean {
    return !this.#c.req.routePath.endsWith('*');
  }

  socket() {
    return nodeSocket(this.#c);
  }

  spoofable(): string | undefined {
    return this.#reading.trustsAll ? `Hono trustProxy is true (${HONO_TRUST.spoofable})` : undefined;
  }

  untrusted(): TrustSetting | undefined {
    return this.#reading.trustsNone ? HONO_TRUST : undefined;
  }

  /** The request's signal aborts when the client goes (`@hono/node-server`, Bun, Deno). */
  whenGone(cancel: () => void): () => void {
    return signalAborted(this.#c.req.raw.signal, cancel);
  }

  info(): RequestInfo | Promise<RequestInfo> {
    const { trust, getConnInfo } = this.#reading;
    const c = this.#c;
    if (!this.#reading.body) return new HonoRequestInfo(c, undefined, trust, getConnInfo);
    return readBody(c).then((body) => new HonoRequestInfo(c, body, trust, getConnInfo));
  }

  keep(decision: Decision): void {
    this.#c.set('rateLimit', decision);
  }

  /**
   * Warns when, seen from inside the route prefix the middleware is mounted at (`app.route('/api', sub)`
   * with `sub.use(rateLimit(...))`), some rule would have matched the request. Hono routes before any
   * middleware runs, and its method override dispatches the request again (through this middleware too),
   * so nothing else can hide a request from the rules.
   */
  unmatched(info: RequestInfo, wiring: WiringCheck): void {
    const pattern = this.#c.req.routePath;
    if (!pattern.endsWith('/*') || /[:*]/.test(pattern.slice(0, -2))) return;
    const prefix = pattern.slice(0, -2);
    const path = info.path;
    if (prefix === '' || !path.startsWith(prefix)) return;
    const seen = { method: info.method, path };
    wiring.unmatched(seen, { method: info.method, path: path.slice(prefix.length) || '/' }, 'mounted');
  }

  /** The response is the middleware's to return: nothing is out before. */
  sent(): boolean {
    return false;
  }

  header(name: string, value: string, list: boolean): void {
    this.#c.header(name, value, list ? { append: true } : undefined);
  }

  send(status: number, body: unknown): void {
    const code = status as ContentfulStatusCode;
    this.response = typeof body === 'string' ? this.#c.text(body, code) : this.#c.json(body, code);
  }

  /** Never called: nothing is out before the middleware returns its response. */
  end(): void {}

  finished(done: (status: number) => unknown): void {
    this.#done = (status) => this.#keepAlive(done(status));
  }

  /** Runs the rest of the app, then judges the outcome by the response, an error `app.onError` made. */
  async pass(next: Next): Promise<void> {
    const handled = this.#handled;
    try {
      await next();
    } catch (error) {
      // Nothing will be written for a request whose middleware chain threw past Hono's error handling.
      handled?.();
      throw error;
    }
    if (handled !== undefined) this.#whenWritten(handled);
    this.#done?.(this.#c.res.status);
  }

  /**
   * The handler returned its response, whose body may still be streaming: `done` once it is all written or
   * can no longer be (its client went). On Node, told by the server's response; elsewhere by the body
   * stream read to its end or cancelled, or the request's signal aborting.
   */
  #whenWritten(done: () => void): void {
    const c = this.#c;
    const outgoing = nodeResponse(c);
    if (outgoing !== undefined) {
      responseWritten(outgoing, done);
      return;
    }
    const held = heldUntilWritten(c.res, c.req.raw.signal, done);
    // Hono's setter copies the response again: only when it changed.
    if (held !== c.res) c.res = held;
  }

  handled(done: () => unknown): void {
    this.#handled = () => this.#keepAlive(done());
  }

  /**
   * Work the limiter does after the response (a slot's release, an outcome's report), handed to the
   * runtime's `waitUntil` on Workers (`c.executionCtx`, whose getter throws on runtimes without one).
   */
  #keepAlive(work: unknown): void {
    if (!(work instanceof Promise)) return;
    let context: { waitUntil(work: Promise<unknown>): void } | undefined;
    try {
      context = this.#c.executionCtx;
    } catch {
      return;
    }
    context?.waitUntil(work.catch(() => {}));
  }
}
