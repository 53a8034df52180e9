// Express's request as the core sees it, and the views of it the wiring warnings compare.
import type { Request, Response } from 'express';
import type { RequestInfo } from '../src/index.js';
import { pathOf } from './common.js';
import type { WiringCheck } from './wiring.js';

/**
 * The request as the core sees it; `ip` is Express's own notion (after `trust proxy`). Everything but
 * the method and the headers is read lazily: Express computes `ip`, `query` and the path anew on each
 * read, and reading a property Express's request does not have (`user`, `body` without a body parser)
 * walks its whole prototype chain. Most rules read none of them.
 */
export class ExpressRequestInfo implements RequestInfo {
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

/**
 * For a request no rule matched: warns when the router sees it as a request some rule matches. Now: a
 * mount path stripped from `req.url` (or a rewrite before the limiter), a method override still to come;
 * once the response is sent: a URL or method rewritten after the limiter.
 */
export function checkUnmatched(
  config: { wiring: WiringCheck },
  req: Request,
  res: Response,
  info: RequestInfo,
): void {
  const seen = { method: info.method, path: info.path };
  const wiring = config.wiring;
  wiring.unmatched(seen, { method: req.method, path: pathOf(req.url) }, 'mounted');
  if (req.method === 'POST') {
    const override = wiring.overriddenMethod(req.method, req.headers, info.query, info.body);
    if (override !== undefined) wiring.unmatched(seen, { method: override, path: seen.path }, 'override');
  }
  res.once('finish', () => {
    wiring.unmatched(seen, { method: req.method, path: req.baseUrl + pathOf(req.url) }, 'rewritten');
  });
}
