// Koa middleware: the request sequence (adapters/exchange.ts) on Koa, the outcome judged after `await next()`.
import type { Context, Middleware, Next } from 'koa';
import type { Decision, Limiter, Rule } from '../src/index.js';
import { createSetup, type RateLimitOptions, type Setup } from './common.js';
import { exchange } from './exchange.js';
import { KoaExchange } from './koa-exchange.js';
import { type SlowDownOptions, slowDownSetup } from './slow-down.js';

export type { RateLimitOptions } from './common.js';
export { SPOOFABLE_IP_WARNING } from './common.js';
export type { SlowDownDelay, SlowDownOptions } from './slow-down.js';

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
 * - An object or array where a rule reads a key (`{"username": ["alice"]}`, `?user=a&user=b`) is answered
 *   400 `{ statusCode, error, message, field }` naming the field, before any handler; nothing is consumed.
 * - The decision is `ctx.state.rateLimit`.
 *
 * @example
 * router.post('/sms/code', rateLimit([{ name: 'sms-minute', key: 'body.phone', limit: 1,
 *   window: { type: 'fixed', size: '1m' } }]), sendCode);
 */
export function rateLimit(rulesOrLimiter: Rule[] | Limiter, options: KoaRateLimitOptions = {}): Middleware {
  return middleware(createSetup(rulesOrLimiter, options, ['handler']), options.handler);
}

/** Options of Koa's `slowDown`. */
export type KoaSlowDownOptions = SlowDownOptions<Context>;

/**
 * Koa middleware that delays requests over a rule's limit instead of refusing them: every matching rule
 * counts every request (past its limit too), and a request over a limit waits `delay` per request over it,
 * at most `maxDelay`, before `next`. Same rules and stores as `rateLimit` (rules with a lockout or counting
 * outcomes are refused), the same headers without `Retry-After`. A client that goes while it waits ends
 * the wait: `next` is never called. Limiter errors are thrown.
 *
 * @example
 * app.use(slowDown([{ name: 'api-slow', key: 'ip', limit: 50, window: { type: 'fixed', size: '15m' } }],
 *   { delay: '500ms', maxDelay: '20s' }));
 */
export function slowDown(rulesOrLimiter: Rule[] | Limiter, options: KoaSlowDownOptions): Middleware {
  return middleware(slowDownSetup(rulesOrLimiter, options), undefined);
}

/** The request sequence on Koa, for `rateLimit`'s setup or `slowDown`'s; limiter errors are thrown. */
function middleware(setup: Setup<Context>, handler: KoaRateLimitOptions['handler']): Middleware {
  return async function rateLimitMiddleware(ctx: Context, next: Next): Promise<void> {
    const http = new KoaExchange(ctx, handler && ((decision: Decision) => handler(ctx, decision)));
    if ((await exchange(setup, http, ctx)) === 'next') return http.pass(next);
  };
}
