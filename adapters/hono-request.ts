// Hono's context as the core sees it: the client address (connection info, then trusted proxies), the body.
import proxyAddr from '@fastify/proxy-addr';
import type { Context } from 'hono';
import type { GetConnInfo } from 'hono/conninfo';
import type { Limiter, RequestInfo } from '../src/index.js';
import type { Setup } from './common.js';

/** Which proxies' `X-Forwarded-For` entries are believed (Express's `trust proxy` forms). */
export type TrustProxy = boolean | number | string | string[] | ((address: string, hop: number) => boolean);

type Trust = (address: string, hop: number) => boolean;

/** The trust function of a `trustProxy` setting, as Express and Fastify compile theirs; none for false. */
export function compileTrust(trust: TrustProxy | undefined): Trust | undefined {
  if (trust === undefined || trust === false) return undefined;
  if (trust === true) return () => true;
  if (typeof trust === 'number') return (_address, hop) => hop < trust;
  if (typeof trust === 'function') return trust;
  return proxyAddr.compile(typeof trust === 'string' ? trust.split(',').map((s) => s.trim()) : trust);
}

/**
 * The parsed body when it is JSON or a form, read through Hono's own cached readers: JSON as text (so the
 * handler's `c.req.text()` gets the exact bytes, and `c.req.json()` parses that), a form by `parseBody()`.
 * Anything else (no body, another type, a body that does not parse) is undefined.
 */
export async function readBody(c: Context): Promise<unknown> {
  const type = c.req.header('content-type');
  if (type === undefined) return undefined;
  try {
    if (/^application\/(.+\+)?json\b/i.test(type)) {
      const text = await c.req.text();
      return text === '' ? undefined : JSON.parse(text);
    }
    if (/^(application\/x-www-form-urlencoded|multipart\/form-data)\b/i.test(type))
      return await c.req.parseBody();
  } catch {
    // A malformed body is the handler's to refuse; no rule finds a key in it.
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
  destroyed?: boolean;
}
interface NodeRequest {
  socket?: NodeSocket;
}

/** Whether some rule keys on the body (`'body.x'`, a template with `{body.x}`, in an array too). */
export function readsBody(limiter: Limiter): boolean {
  const rules = (limiter as Partial<Limiter>).rules;
  if (rules === undefined) return true; // a limiter of another version: read, as before
  const reads = (key: unknown): boolean =>
    typeof key === 'string' ? /(^|\{)body\./.test(key) : Array.isArray(key) && key.some(reads);
  return rules.some((rule) => reads(rule.key));
}

/**
 * For a request no rule matched: warns when, seen from inside the route prefix the middleware is mounted
 * at (`app.route('/api', sub)` with `sub.use(rateLimit(...))`), some rule would have matched it. Hono
 * routes before any middleware runs, and its method override dispatches the request again (through this
 * middleware too), so nothing else can hide a request from the rules.
 */
export function warnUnmatched(config: Setup<Context>, c: Context, info: RequestInfo): void {
  const pattern = c.req.routePath;
  if (!pattern.endsWith('/*') || /[:*]/.test(pattern.slice(0, -2))) return;
  const prefix = pattern.slice(0, -2);
  const path = info.path;
  if (prefix === '' || !path.startsWith(prefix)) return;
  const seen = { method: info.method, path };
  config.wiring.unmatched(seen, { method: info.method, path: path.slice(prefix.length) || '/' }, 'mounted');
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

  /** The peer, or the right-most `X-Forwarded-For` entry not appended by a trusted proxy. */
  get ip(): string | undefined {
    if (this.#ipRead) return this.#ip;
    this.#ipRead = true;
    const peer = this.#getConnInfo
      ? this.#getConnInfo(this.#c).remote.address
      : nodeSocket(this.#c)?.remoteAddress;
    if (peer === undefined || this.#trust === undefined) this.#ip = peer;
    else {
      const forwarded = this.#c.req.header('x-forwarded-for');
      const req = { headers: { 'x-forwarded-for': forwarded }, socket: { remoteAddress: peer } };
      this.#ip = proxyAddr(req as unknown as Parameters<typeof proxyAddr>[0], this.#trust);
    }
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
