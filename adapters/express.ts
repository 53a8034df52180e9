// Express middleware: the request sequence (adapters/exchange.ts) on Express, the outcome judged on `finish`.
import type { NextFunction, Request, RequestHandler, Response } from 'express';
import type { Decision, Limiter, Rule } from '../src/index.js';
import { createSetup, type RateLimitOptions, type Setup } from './common.js';
import { type Exchanged, exchange } from './exchange.js';
import { ExpressExchange } from './express-exchange.js';
import { type SlowDownOptions, slowDownSetup } from './slow-down.js';

export type { RateLimitOptions } from './common.js';
export { SPOOFABLE_IP_WARNING } from './common.js';
export type { SlowDownDelay, SlowDownOptions } from './slow-down.js';

declare global {
  namespace Express {
    interface Request {
      /** The rate-limit decision for this request, set by `rateLimit` before the next handler runs. */
      rateLimit?: Decision;
    }
  }
}

export interface ExpressRateLimitOptions extends RateLimitOptions<Request> {
  /**
   * Sends the denial instead of the default JSON body; the rate-limit headers and `Retry-After` are
   * already set, the status is not. @default res.status(statusCode).json(message)
   */
  handler?: (req: Request, res: Response, next: NextFunction, decision: Decision) => void | Promise<void>;
}

/**
 * Express middleware limiting requests by `rules` (a limiter on the memory store is built for them)
 * or by an existing `limiter`. Works app-wide (`app.use`) or on one route.
 *
 * - Client address: `req.ip`, so Express's `trust proxy` setting decides whether `X-Forwarded-For`
 *   is believed; `trust proxy = true` (spoofable) draws a one-time warning.
 * - Admitted requests are judged when the response finishes (`finish`), by `isFailure(res.statusCode)`,
 *   including error responses from `next(err)`; a redirect is neither outcome (see `isFailure`). A
 *   connection closed before the response finished is not reported: its reservation stays counted on
 *   every rule and nothing is reset. A client gone before or during the decision never reaches the
 *   next handler.
 * - Limiter errors (a key function that threw, a bad cost) go to `next(err)`; nothing is consumed.
 * - An object or array where a rule reads a key (`{"username": ["alice"]}`, `?user=a&user=b`) is answered
 *   400 `{ statusCode, error, message, field }` naming the field, before any handler; nothing is consumed.
 *
 * @example
 * app.post('/login', express.json(), rateLimit([{ name: 'login', match: 'POST /login',
 *   key: ['body.username', 'ip'], limit: 5, window: { type: 'fixed', size: '15m' },
 *   countOn: 'failure', resetOnSuccess: true, lockout: { duration: '15m', escalate: 2 } }]), login);
 */
export function rateLimit(
  rulesOrLimiter: Rule[] | Limiter,
  options: ExpressRateLimitOptions = {},
): RequestHandler {
  return middleware(createSetup(rulesOrLimiter, options, ['handler']), options.handler);
}

/** Options of Express's `slowDown`. */
export type ExpressSlowDownOptions = SlowDownOptions<Request>;

/**
 * Express middleware that delays requests over a rule's limit instead of refusing them: every matching rule
 * counts every request (past its limit too), and a request over a limit waits `delay` per request over it,
 * at most `maxDelay`, before the next handler runs. Same rules and stores as `rateLimit` (rules with a
 * lockout or counting outcomes are refused), the same headers without `Retry-After`. A client that goes
 * while it waits ends the wait: the handler never runs. Limiter errors go to `next(err)`.
 *
 * @example
 * app.use(slowDown([{ name: 'api-slow', key: 'ip', limit: 50, window: { type: 'fixed', size: '15m' } }],
 *   { delay: '500ms', maxDelay: '20s' }));
 */
export function slowDown(rulesOrLimiter: Rule[] | Limiter, options: ExpressSlowDownOptions): RequestHandler {
  return middleware(slowDownSetup(rulesOrLimiter, options), undefined);
}

/** The request sequence on Express, for `rateLimit`'s setup or `slowDown`'s; limiter errors go to `next(err)`. */
function middleware(setup: Setup<Request>, handler: ExpressRateLimitOptions['handler']): RequestHandler {
  // Not an async function: the exchange's promise is the only one, and the router is handed none to watch.
  return function rateLimitMiddleware(req: Request, res: Response, next: NextFunction): void {
    const handle = handler && ((decision: Decision) => handler(req, res, next, decision));
    exchange(setup, new ExpressExchange(req, res, handle), req).then(
      (exchanged: Exchanged) => {
        if (exchanged !== 'next') return;
        try {
          next();
        } catch (error) {
          // Express catches what a later handler throws; anything else still reaches the error handlers.
          next(error);
        }
      },
      (error: unknown) => next(error),
    );
  };
}
