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
  const s = setup(rulesOrLimiter, options);
  const handler = options.handler;

  return async function rateLimitMiddleware(ctx: Context, next: Next): Promise<void> {
    if (s.skip !== undefined && (await s.skip(ctx))) return next();
    if (ctx.app.proxy && !(ctx.app.maxIpsCount > 0))
      s.warnSpoofable('Koa app.proxy is on with maxIpsCount 0');
    const decision = await s.limiter.check(toRequestInfo(ctx));
    // A limiter that matched no rule leaves the decision of an earlier one in place.
    if (decision.rules.length > 0) ctx.state.rateLimit = decision;
    if (!ctx.headerSent) {
      for (const [name, value] of s.headerFields(decision)) {
        if (LIST_FIELDS.has(name)) ctx.append(name, value);
        else ctx.set(name, value);
      }
    }
    if (!decision.allowed || decision.dryRun) s.onLimited?.(decision, ctx);
    if (!decision.allowed) {
      if (handler !== undefined) return handler(ctx, decision);
      if (ctx.headerSent) return;
      ctx.status = s.statusCode;
      ctx.body = s.body(decision); // an object is sent as JSON, a string as text
      return;
    }
    if (decision.rules.length === 0) return next();
    let status = 500;
    try {
      await next();
      status = ctx.status;
    } catch (error) {
      status = errorStatus(error);
      throw error;
    } finally {
      s.limiter.report(decision, s.outcome(status)).catch(() => {
        // The limiter reports store faults through its 'storeError' event; the response is not held up.
      });
    }
  };
}

/** The request as the core sees it; `ip` is Koa's own notion (after `app.proxy`, `maxIpsCount`). */
function toRequestInfo(ctx: Context): RequestInfo {
  const request = ctx.request as { body?: unknown };
  return {
    method: ctx.method,
    path: pathOf(ctx.originalUrl ?? ctx.url),
    ip: ctx.ip,
    headers: ctx.headers,
    query: ctx.query as Record<string, unknown>,
    params: (ctx as { params?: Record<string, unknown> }).params,
    body: request.body,
    user: (ctx.state as { user?: unknown }).user,
  };
}
