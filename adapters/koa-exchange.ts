// Koa's context as the core sees it, and as the request sequence maps it.
import type { Context, Next } from 'koa';
import type { Decision, RequestInfo } from '../src/index.js';
import { errorStatus, responseClosed } from './common.js';
import { type HttpExchange, pathOf } from './exchange.js';
import { responseWritten } from './response-ends.js';
import { KOA_TRUST, type TrustSetting, type WiringCheck } from './wiring.js';

/**
 * The request as the core sees it; `ip` is Koa's own notion (after `app.proxy`, `maxIpsCount`). Everything
 * but the method and the headers is read lazily: the path, `ip` and `query` are parsed, and `params`,
 * `body` and `user` looked up, only for the rules that read them.
 */
export class KoaRequestInfo implements RequestInfo {
  readonly method: string;
  readonly headers: RequestInfo['headers'];
  readonly #ctx: Context;
  #path: string | undefined;

  constructor(ctx: Context) {
    this.#ctx = ctx;
    this.method = ctx.method;
    this.headers = ctx.headers;
  }

  /** The full original URL's path: rules match it whatever is mounted or rewritten. */
  get path(): string {
    this.#path ??= pathOf(this.#ctx.originalUrl ?? this.#ctx.url);
    return this.#path;
  }

  /** Koa caches both. */
  get ip(): string {
    return this.#ctx.ip;
  }

  get query(): Record<string, unknown> {
    return this.#ctx.query as Record<string, unknown>;
  }

  get params(): Record<string, unknown> | undefined {
    return (this.#ctx as { params?: Record<string, unknown> }).params;
  }

  get body(): unknown {
    return (this.#ctx.request as { body?: unknown }).body;
  }

  get user(): unknown {
    return (this.#ctx.state as { user?: unknown }).user;
  }
}

/**
 * Koa's context as the request sequence needs it. Koa judges after `await next()`, so what waits for the
 * response (the outcome, the wiring checks of an unmatched request) runs in `pass`.
 */
export class KoaExchange implements HttpExchange {
  readonly #ctx: Context;
  readonly handle: ((decision: Decision) => unknown) | undefined;
  #done: ((status: number) => void) | undefined;
  #after: (() => void) | undefined;
  #handled: (() => void) | undefined;

  /** `handle`: the app's own denial, or undefined for the default body. */
  constructor(ctx: Context, handle: ((decision: Decision) => unknown) | undefined) {
    this.#ctx = ctx;
    this.handle = handle;
  }

  socket() {
    return this.#ctx.req.socket;
  }

  spoofable(): string | undefined {
    const app = this.#ctx.app;
    if (!app.proxy || app.maxIpsCount > 0) return undefined;
    return `Koa app.proxy is on with app.maxIpsCount 0 (${KOA_TRUST.spoofable})`;
  }

  /** Koa's default, `app.proxy` false, believes no `X-Forwarded-For` entry. */
  untrusted(): TrustSetting | undefined {
    return this.#ctx.app.proxy ? undefined : KOA_TRUST;
  }

  whenGone(cancel: () => void): () => void {
    return responseClosed(this.#ctx.res, cancel);
  }

  info(): RequestInfo {
    return new KoaRequestInfo(this.#ctx);
  }

  keep(decision: Decision): void {
    this.#ctx.state.rateLimit = decision;
  }

  /**
   * Warns when the app routes the request as one some rule matches: before the rest of the app, a mount
   * (koa-mount strips `ctx.path`) or a method override still to come; after it, a URL or method rewritten
   * downstream, or routes of an @koa/router prefix the rules omit.
   */
  unmatched(info: RequestInfo, wiring: WiringCheck): void {
    const ctx = this.#ctx;
    const seen = { method: info.method, path: info.path };
    wiring.unmatched(seen, { method: ctx.method, path: ctx.path }, 'mounted');
    if (ctx.method === 'POST') {
      const override = wiring.overriddenMethod(ctx.method, ctx.headers, info.query, info.body);
      if (override !== undefined) wiring.unmatched(seen, { method: override, path: seen.path }, 'override');
    }
    this.#after = () => {
      wiring.unmatched(seen, { method: ctx.method, path: ctx.path }, 'rewritten');
      const prefix = (ctx as { router?: { opts?: { prefix?: unknown } } }).router?.opts?.prefix;
      if (typeof prefix === 'string' && prefix.length > 1 && ctx.path.startsWith(prefix))
        wiring.unmatched(seen, { method: ctx.method, path: ctx.path.slice(prefix.length) || '/' }, 'mounted');
    };
  }

  sent(): boolean {
    return this.#ctx.headerSent;
  }

  header(name: string, value: string, list: boolean): void {
    if (list) this.#ctx.append(name, value);
    else this.#ctx.set(name, value);
  }

  send(status: number, body: unknown): void {
    this.#ctx.status = status;
    this.#ctx.body = body; // an object is sent as JSON, a string as text
  }

  /** Koa ends the response itself when the middleware returns. */
  end(): void {}

  finished(done: (status: number) => void): void {
    this.#done = done;
  }

  /**
   * Runs the rest of the app, then what waits for it: the outcome, by the final status or, when a later
   * middleware throws, by the status the error ends in (`err.status`, else 500), the error rethrown.
   */
  async pass(next: Next): Promise<void> {
    const after = this.#after;
    if (after !== undefined) {
      await next();
      return after();
    }
    const done = this.#done;
    const handled = this.#handled;
    if (done === undefined && handled === undefined) return next();
    let status = 500;
    try {
      await next();
      status = this.#ctx.status;
    } catch (error) {
      status = errorStatus(error);
      throw error;
    } finally {
      done?.(status);
      if (handled !== undefined) responseWritten(this.#ctx.res, handled);
    }
  }

  handled(done: () => void): void {
    this.#handled = done;
  }
}
