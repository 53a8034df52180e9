// Koa middleware: context to RequestInfo, one limiter decision, headers or a 429, outcome judged after `next`.
import type { Context, Middleware, Next } from 'koa';
import { LIST_FIELDS } from '../src/headers.js';
import type { Decision, Limiter, RequestInfo, Rule } from '../src/index.js';
import { errorStatus, pathOf, type RateLimitOptions, setup } from './common.js';

export type { RateLimitOptions } from './common.js';
export { SPOOFABLE_IP_WARNING } from './common.js';

export interface KoaRateLimitOptions extends RateLimitOptions<Context> {
  /**
   * Answers the denial instead of the default JSON body; the rate-limit headers and `Retry-After` are
   * already set, the status is not. @default ctx.status = statusCode; ctx.body = message
   */
  handler?: (ctx: Context, decision: Decision) => void | Promise<void>;
}

/**
 * Koa middleware limiting requests by `rules` (a limiter on the memory store is built for them) or by
 * an existing `limiter`. Works app-wide (`app.use`) or on one route (`router.post(path, mw, handler)`).
 *
 * - Client address: `ctx.ip`, so `app.proxy` and `app.maxIpsCount` decide whether `X-Forwarded-For`
 *   is believed; `proxy` with `maxIpsCount` 0 (the left-most, spoofable entry) draws a one-time warning.
 * - Admitted requests are judged after `await next()` by `isFailure(ctx.status)`; when a later
 *   middleware throws, by the status the error ends in (`err.status`, else 500), and the error is rethrown.
 * - Limiter errors (a key function that threw, a bad cost) are thrown; nothing is consumed.
 * - The decision is `ctx.state.rateLimit`.
 *
 * @example
 * router.post('/sms/code', rateLimit([{ name: 'sms-minute', key: 'body.phone', limit: 1,
 *   window: { type: 'fixed', size: '1m' } }]), sendCode);
 */
export function rateLimit(rulesOrLimiter: Rule[] | Limiter, options: KoaRateLimitOptions = {}): Middleware {
  const config = setup(rulesOrLimiter, options, ['handler']);
  const handler = options.handler;

  return async function rateLimitMiddleware(ctx: Context, next: Next): Promise<void> {
    if (config.skip !== undefined && (await config.skip(ctx))) return next();
    if (!config.warned && ctx.app.proxy && !(ctx.app.maxIpsCount > 0))
      config.warnSpoofable('Koa app.proxy is on with maxIpsCount 0');
    const decision = await config.limiter.check(new KoaRequestInfo(ctx));
    // A limiter that matched no rule leaves the decision of an earlier one in place.
    if (decision.rules.length > 0) ctx.state.rateLimit = decision;
    if (!ctx.headerSent) {
      for (const [name, value] of config.headerFields(decision)) {
        if (LIST_FIELDS.has(name)) ctx.append(name, value);
        else ctx.set(name, value);
      }
    }
    if (!decision.allowed || decision.dryRun) config.onLimited?.(decision, ctx);
    if (!decision.allowed) {
      if (handler !== undefined) return handler(ctx, decision);
      if (ctx.headerSent) return;
      ctx.status = config.statusCode;
      ctx.body = config.body(decision); // an object is sent as JSON, a string as text
      return;
    }
    // Nothing to report (no rule counts outcomes): no need to wait for the response here.
    if (!config.reports || decision.rules.length === 0) return next();
    let status = 500;
    try {
      await next();
      status = ctx.status;
    } catch (error) {
      status = errorStatus(error);
      throw error;
    } finally {
      config.limiter.report(decision, config.outcome(status)).catch(() => {
        // The limiter reports store faults through its 'storeError' event; the response is not held up.
      });
    }
  };
}

/**
 * The request as the core sees it; `ip` is Koa's own notion (after `app.proxy`, `maxIpsCount`). Everything
 * but the method and the headers is read lazily: the path, `ip` and `query` are parsed, and `params`,
 * `body` and `user` looked up, only for the rules that read them (see ExpressRequestInfo).
 */
class KoaRequestInfo implements RequestInfo {
  readonly method: string;
  readonly headers: RequestInfo['headers'];
  readonly #ctx: Context;
  #path: string | undefined;

  constructor(ctx: Context) {
    this.#ctx = ctx;
    this.method = ctx.method;
    this.headers = ctx.headers;
  }

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
