// Koa middleware: context to RequestInfo, one limiter decision, headers or a 429, outcome judged after `next`.
import type { Context, Middleware, Next } from 'koa';
import { LIST_FIELDS } from '../src/headers.js';
import type { Decision, Limiter, Rule } from '../src/index.js';
import { clientGone, errorStatus, type RateLimitOptions, setup } from './common.js';
import { KoaRequestInfo, nextUnmatched } from './koa-request.js';

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
 *   A redirect is neither outcome (see `isFailure`). A client gone before or during the decision never
 *   reaches `next`.
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
    if (clientGone(ctx.req.socket)) return; // reset after writing the request: nothing to answer, nothing to run
    if (config.skip !== undefined && (await config.skip(ctx))) return next();
    if (!config.warned && ctx.app.proxy && !(ctx.app.maxIpsCount > 0))
      config.warnSpoofable('Koa app.proxy is on with maxIpsCount 0');
    const info = new KoaRequestInfo(ctx);
    const decision = await config.limiter.check(info);
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
    // Gone while the store decided: the handler must not run; what was reserved stays counted.
    if (clientGone(ctx.req.socket)) return;
    if (decision.rules.length === 0) return nextUnmatched(config, ctx, info, next);
    // Nothing to report (no rule counts outcomes): no need to wait for the response here.
    if (!config.reports) return next();
    let status = 500;
    try {
      await next();
      status = ctx.status;
    } catch (error) {
      status = errorStatus(error);
      throw error;
    } finally {
      config.report(decision, status);
    }
  };
}
