// Express middleware: request to RequestInfo, one limiter decision, headers or a 429, outcome reported after the response.
import type { NextFunction, Request, RequestHandler, Response } from 'express';
import { LIST_FIELDS } from '../src/headers.js';
import type { Decision, Limiter, RequestInfo, Rule } from '../src/index.js';
import { pathOf, type RateLimitOptions, setup } from './common.js';

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
 *   including error responses from `next(err)`. A connection closed before the response finished is
 *   not reported: its reservation stays counted on every rule and nothing is reset.
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
    let decision: Decision;
    try {
      if (config.skip !== undefined && (await config.skip(req))) return next();
      if (!config.warned && req.app?.get('trust proxy') === true)
        config.warnSpoofable("Express 'trust proxy' is true");
      decision = await config.limiter.check(new ExpressRequestInfo(req));
      // A limiter that matched no rule leaves the decision of an earlier one in place.
      if (decision.rules.length > 0) req.rateLimit = decision;
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
    if (config.reports && decision.rules.length > 0) {
      res.once('finish', () => {
        config.limiter.report(decision, config.outcome(res.statusCode)).catch(() => {
          // The limiter reports store faults through its 'storeError' event; the response is gone.
        });
      });
    }
    next();
  };
}

/**
 * The request as the core sees it; `ip` is Express's own notion (after `trust proxy`). Everything but
 * the method and the headers is read lazily: Express computes `ip`, `query` and the path anew on each
 * read, and reading a property Express's request does not have (`user`, `body` without a body parser)
 * walks its whole prototype chain, which costs more than the rest of the decision (2 µs per request,
 * measured). Most rules read none of them.
 */
class ExpressRequestInfo implements RequestInfo {
  readonly method: string;
  readonly headers: RequestInfo['headers'];
  readonly #req: Request;
  #path: string | undefined;
  #ip: string | undefined;
  #ipRead = false;
  #query: Record<string, unknown> | undefined;

  constructor(req: Request) {
    this.#req = req;
    this.method = req.method;
    this.headers = req.headers;
  }

  get path(): string {
    this.#path ??= pathOf(this.#req.originalUrl ?? this.#req.url);
    return this.#path;
  }

  get ip(): string | undefined {
    if (!this.#ipRead) {
      this.#ip = this.#req.ip;
      this.#ipRead = true;
    }
    return this.#ip;
  }

  get query(): Record<string, unknown> {
    this.#query ??= this.#req.query as Record<string, unknown>;
    return this.#query;
  }

  get params(): Record<string, unknown> {
    return this.#req.params;
  }

  get body(): unknown {
    return this.#req.body;
  }

  get user(): unknown {
    return (this.#req as { user?: unknown }).user;
  }
}
