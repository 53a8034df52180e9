// Express middleware: the request sequence (adapters/exchange.ts) on Express, the outcome judged on `finish`;
// below it, Express's request as the core sees it, and its request and response as the sequence maps them.
import type { NextFunction, Request, RequestHandler, Response } from 'express';
import { appendsField, type HeaderField } from '../src/headers.js';
import type { Decision, Limiter, RequestInfo, Rule } from '../src/index.js';
import { createSetup, type RateLimitOptions, responseClosed, type Setup } from './common.js';
import {
  type BadRequestBody,
  type Exchanged,
  type ExchangeSettings,
  exchange,
  type HttpExchange,
  pathOf,
} from './exchange.js';
import { onUnixSocket, type Trust, unixSocketClient } from './proxy-trust.js';
import { responseEnded } from './response-ends.js';
import { type SlowDownOptions, slowDownSetup } from './slow-down.js';
import { EXPRESS_TRUST, type TrustSetting, type WiringCheck } from './wiring.js';

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

/**
 * The request as the core sees it; `ip` is Express's own notion (after `trust proxy`). Everything but
 * the method and the headers is read lazily: Express computes `ip`, `query` and the path anew on each
 * read, and reading a property Express's request does not have (`user`, `body` without a body parser)
 * walks its whole prototype chain. Most rules read none of them.
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

  /** The full original URL's path: rules match it whatever is mounted or rewritten. */
  get path(): string {
    this.#path ??= pathOf(this.#req.originalUrl ?? this.#req.url);
    return this.#path;
  }

  /**
   * Express's `req.ip`; on a Unix domain socket, where it is undefined unless `trust proxy` counts hops
   * (the peer has no address for `'loopback'` or a list to match), the entry the proxy there appended,
   * read through Express's own compiled `trust proxy` (`unixSocketClient`).
   */
  get ip(): string | undefined {
    if (!this.#ipRead) {
      const req = this.#req;
      this.#ip = req.ip;
      this.#ipRead = true;
      if (this.#ip === undefined) {
        const trust = req.app?.get('trust proxy fn') as Trust | undefined;
        if (typeof trust === 'function' && onUnixSocket(req.socket)) {
          const forwarded = req.headers['x-forwarded-for'];
          this.#ip = unixSocketClient(Array.isArray(forwarded) ? forwarded.join(', ') : forwarded, trust);
        }
      }
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

/** Express's own answers to every setting (one object for every request, not one per request). */
const NO_SETTINGS: ExchangeSettings = Object.freeze({});

/**
 * Express's request and response as the request sequence needs them; Nest on Express uses it too.
 * @internal exported for adapters/nest-exchange.ts only: left out of the published types.
 */
export class ExpressExchange implements HttpExchange {
  readonly #req: Request;
  readonly #res: Response;
  readonly handle: ((decision: Decision) => unknown) | undefined;
  /** Given by Nest's guard: the 400 for a refused key goes through the app's exception filters. */
  refuse?: (body: BadRequestBody) => void;
  /** How the untrusted-forwarded warning names the proxy setting (Nest on Express names its own). */
  readonly #trustSetting: TrustSetting;
  /** Given by Nest's guard for a route's own `@RateLimit`; else whether Express is running a route's handlers. */
  readonly #attached: boolean | undefined;
  #socket: Request['socket'] | undefined;

  /** `handle`: the app's own denial, or undefined for the default JSON or text body. */
  constructor(
    req: Request,
    res: Response,
    handle: ((decision: Decision) => unknown) | undefined,
    settings: ExchangeSettings = NO_SETTINGS,
  ) {
    this.#req = req;
    this.#res = res;
    this.handle = handle;
    this.#trustSetting = settings.trustSetting ?? EXPRESS_TRUST;
    this.#attached = settings.attached;
    if (settings.refuse !== undefined) this.refuse = settings.refuse;
  }

  /** Express sets `req.route` while a route's own handlers run, never for `app.use` or `router.use`. */
  get attached(): boolean {
    return this.#attached ?? this.#req.route !== undefined;
  }

  /** Read once: a property read on Express 5's request is slow (bench/RESULTS.md). */
  socket() {
    this.#socket ??= this.#req.socket;
    return this.#socket;
  }

  spoofable(): string | undefined {
    if (this.#req.app?.get('trust proxy') !== true) return undefined;
    return `Express 'trust proxy' is true (${this.#trustSetting.spoofable})`;
  }

  /** Express's default, `trust proxy` false (or 0 hops), believes no `X-Forwarded-For` entry. */
  untrusted(): TrustSetting | undefined {
    const trust: unknown = this.#req.app?.get('trust proxy');
    return trust === undefined || trust === false || trust === 0 ? this.#trustSetting : undefined;
  }

  whenGone(cancel: () => void): () => void {
    return responseClosed(this.#res, cancel);
  }

  info(): RequestInfo {
    return new ExpressRequestInfo(this.#req);
  }

  keep(decision: Decision): void {
    this.#req.rateLimit = decision;
  }

  /**
   * Warns when the router sees the request as one some rule matches. Now: a mount path stripped from
   * `req.url` (or a rewrite before the limiter), a method override still to come; once the response is
   * sent: a URL or method rewritten after the limiter.
   */
  unmatched(info: RequestInfo, wiring: WiringCheck): void {
    const req = this.#req;
    const seen = { method: info.method, path: info.path };
    wiring.unmatched(seen, { method: req.method, path: pathOf(req.url) }, 'mounted');
    if (req.method === 'POST') {
      const override = wiring.overriddenMethod(req.method, req.headers, info.query, info.body);
      if (override !== undefined) wiring.unmatched(seen, { method: override, path: seen.path }, 'override');
    }
    this.#res.once('finish', () => {
      wiring.unmatched(seen, { method: req.method, path: req.baseUrl + pathOf(req.url) }, 'rewritten');
    });
  }

  sent(): boolean {
    return this.#res.headersSent;
  }

  headers(fields: readonly HeaderField[], withoutRetryAfter: boolean): void {
    const res = this.#res;
    try {
      for (let i = 0; i < fields.length; i++) {
        const [name, value] = fields[i] as HeaderField;
        if (!withoutRetryAfter || name !== 'Retry-After') {
          this.header(name, value, appendsField(name, value));
        }
      }
    } catch (error) {
      // Out already (an earlier middleware began the response): the first field threw, none was set.
      if (!res.headersSent) throw error;
    }
  }

  header(name: string, value: string, list: boolean): void {
    if (list) this.#res.append(name, value);
    else this.#res.setHeader(name, value);
  }

  send(status: number, body: unknown): void {
    this.#res.status(status);
    if (typeof body === 'string') this.#res.type('text/plain').send(body);
    else this.#res.json(body);
  }

  end(): void {
    this.#res.end();
  }

  finished(done: (status: number) => void): void {
    const res = this.#res;
    res.once('finish', () => done(res.statusCode));
  }

  handled(done: () => void, lapse: () => void): void {
    responseEnded(this.#res, done, lapse);
  }
}
