// Express middleware: request to RequestInfo, one limiter decision, headers or a 429, outcome reported after the response.
import type { NextFunction, Request, RequestHandler, Response } from 'express';
import { LIST_FIELDS } from '../src/headers.js';
import type { Decision, Limiter, Rule } from '../src/index.js';
import { clientGone, type RateLimitOptions, setup } from './common.js';
import { checkUnmatched, ExpressRequestInfo } from './express-request.js';

export type { RateLimitOptions } from './common.js';
export { SPOOFABLE_IP_WARNING } from './common.js';

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
  const config = setup(rulesOrLimiter, options, ['handler']);
  const handler = options.handler;

  return async function rateLimitMiddleware(req: Request, res: Response, next: NextFunction): Promise<void> {
    if (clientGone(req.socket)) return; // reset after writing the request: nothing to answer, nothing to run
    let decision: Decision;
    try {
      if (config.skip !== undefined && (await config.skip(req))) return next();
      if (!config.warned && req.app?.get('trust proxy') === true)
        config.warnSpoofable("Express 'trust proxy' is true");
      const info = new ExpressRequestInfo(req);
      decision = await config.limiter.check(info);
      // A limiter that matched no rule leaves the decision of an earlier one in place.
      if (decision.rules.length > 0) req.rateLimit = decision;
      else checkUnmatched(config, req, res, info);
      if (!res.headersSent) {
        for (const [name, value] of config.headerFields(decision)) {
          if (LIST_FIELDS.has(name)) res.append(name, value);
          else res.setHeader(name, value);
        }
      }
      if (!decision.allowed || decision.dryRun) config.onLimited?.(decision, req);
      if (!decision.allowed) {
        if (handler !== undefined) return await handler(req, res, next, decision);
        if (res.headersSent) return void res.end();
        const body = config.body(decision);
        res.status(config.statusCode);
        if (typeof body === 'string') res.type('text/plain').send(body);
        else res.json(body);
        return;
      }
    } catch (error) {
      return next(error);
    }
    // Gone while the store decided: the handler must not run; what was reserved stays counted.
    if (clientGone(req.socket)) return;
    if (config.reports && decision.rules.length > 0)
      res.once('finish', () => config.report(decision, res.statusCode));
    next();
  };
}
