// Koa's context as the core sees it, and the views of it the wiring warnings compare.
import type { Context, Next } from 'koa';
import type { RequestInfo } from '../src/index.js';
import { pathOf, type Setup } from './common.js';

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
 * Runs the rest of the app for a request no rule matched, warning when the app routes it as a request
 * some rule matches: before, a mount (koa-mount strips `ctx.path`) or a method override still to come;
 * after, a URL or method rewritten downstream, or routes of an @koa/router prefix the rules omit.
 */
export async function nextUnmatched(config: Setup<Context>, ctx: Context, info: RequestInfo, next: Next) {
  const seen = { method: info.method, path: info.path };
  const wiring = config.wiring;
  wiring.unmatched(seen, { method: ctx.method, path: ctx.path }, 'mounted');
  if (ctx.method === 'POST') {
    const override = wiring.overriddenMethod(ctx.method, ctx.headers, info.query, info.body);
    if (override !== undefined) wiring.unmatched(seen, { method: override, path: seen.path }, 'override');
  }
  await next();
  wiring.unmatched(seen, { method: ctx.method, path: ctx.path }, 'rewritten');
  const prefix = (ctx as { router?: { opts?: { prefix?: unknown } } }).router?.opts?.prefix;
  if (typeof prefix === 'string' && prefix.length > 1 && ctx.path.startsWith(prefix))
    wiring.unmatched(seen, { method: ctx.method, path: ctx.path.slice(prefix.length) || '/' }, 'mounted');
}
