// A fetch handler wrapped with the request sequence (adapters/exchange.ts): Bun.serve, Deno.serve, Cloudflare
// Workers' `fetch`, Next.js and Vercel Edge middleware, any `(request: Request, ...rest) => Response`.
import { fieldsOf } from '../src/config/known-fields.js';
import { mustBe, refuse } from '../src/config/refuse.js';
import type { Decision, Limiter, Rule } from '../src/index.js';
import { createSetup, type RateLimitOptions } from './common.js';
import { exchange } from './exchange.js';
import { FetchExchange, type FetchReading } from './fetch-exchange.js';
import { compileTrust, type TrustProxy } from './proxy-trust.js';

export type { RateLimitOptions } from './common.js';
export { SPOOFABLE_IP_WARNING } from './common.js';
export { rateLimitOf } from './fetch-exchange.js';
export type { TrustProxy } from './proxy-trust.js';

/** A fetch handler: the request, then whatever the runtime passes after it (Bun's server, Deno's info, a Worker's env and ctx). */
export type FetchHandler<Rest extends unknown[]> = (
  request: Request,
  ...rest: Rest
) => Response | Promise<Response>;

export interface FetchRateLimitOptions<Rest extends unknown[] = unknown[]> extends RateLimitOptions<Request> {
  /**
   * Which proxies' `X-Forwarded-For` entries are believed, as Express's `trust proxy`: `false`, a hop count,
   * addresses or subnets (`'loopback'`, `['10.0.0.0/8']`), a function `(address, hop)`, or `true` (every
   * entry, so any client picks its own address: a one-time warning). @default false
   */
  trustProxy?: TrustProxy;
  /**
   * The app runs behind Cloudflare (an origin only Cloudflare can reach): the client's address is
   * `CF-Connecting-IP`, which Cloudflare sets, replacing what a client sent. Anywhere else a client can send
   * that header itself. Left out, it is read only in a Cloudflare Worker (`navigator.userAgent` is
   * `'Cloudflare-Workers'`) on a request that came through Cloudflare's edge (it has `request.cf`); `false`
   * never reads it (workerd self-hosted behind another proxy). @default true in a Worker behind Cloudflare, else false
   */
  cloudflare?: boolean;
  /**
   * The peer's address, where the runtime's own is not found (Next.js or Vercel middleware: `request.ip` or
   * `ipAddress(request)`; a runtime unknown to ratekeeper). @default Bun's `server.requestIP(request)`, Deno's
   * `info.remoteAddr.hostname`, the socket's under `@hono/node-server` on Node, `CF-Connecting-IP` with
   * `cloudflare`, else none: `'ip'` rules then share one
   * bucket per rule and warn once
   */
  clientAddress?: (request: Request, ...rest: Rest) => string | undefined;
  /**
   * Who the request's user is, for `'user'` keys: a fetch handler has no `req.user`, so say where the app's
   * authentication put it. @default none: a `'user'` rule meets every request without a user
   */
  user?: (request: Request, ...rest: Rest) => unknown;
  /**
   * Answers the denial instead of the default body; the rate-limit fields and `Retry-After` are added to it.
   * @default a JSON (or text, for a string `message`) response with `statusCode`
   */
  handler?: (request: Request, decision: Decision) => Response | Promise<Response>;
  /**
   * Read the body (JSON, or a urlencoded form) from a clone of the request before the decision; the handler
   * still reads the request itself. @default true when a rule's key reads `body.*`
   */
  readBody?: boolean;
}

const FETCH_FIELDS = fieldsOf<Omit<FetchRateLimitOptions, keyof RateLimitOptions<unknown>>>({
  trustProxy: true,
  cloudflare: true,
  clientAddress: true,
  user: true,
  handler: true,
  readBody: true,
});

/** The status of the response to a client gone while the store decided: never sent (nginx's "client closed request"). */
const GONE = 499;

/**
 * `handler` behind the limiter's `rules` (a limiter on the memory store is built for them) or an existing
 * `limiter`: the same arguments in, a `Response` out, with the rate-limit fields on every response, a 429 (or
 * `statusCode`) for a denial, outcomes (`countOn`, `resetOnSuccess`) judged by the handler's status, and a
 * concurrency rule's slot held until the response's body is written (read to its end, or cancelled when
 * the client goes). The decision is `rateLimitOf(request)` inside the handler.
 *
 * @example
 * // Bun
 * Bun.serve({ fetch: withRateLimit((request) => new Response('ok'),
 *   [{ name: 'api', key: 'ip', limit: 100, window: { type: 'fixed', size: '1m' } }]) });
 * // Deno
 * Deno.serve(withRateLimit(handler, rules));
 * // Cloudflare Workers
 * export default { fetch: withRateLimit(handler, rules, { cloudflare: true }) };
 */
export function withRateLimit<Rest extends unknown[]>(
  handler: FetchHandler<Rest>,
  rulesOrLimiter: Rule[] | Limiter,
  options: FetchRateLimitOptions<Rest> = {},
): (request: Request, ...rest: Rest) => Promise<Response> {
  if (typeof handler !== 'function')
    refuse(
      'ERR_OPTION',
      'withRateLimit',
      mustBe('its first argument', 'the fetch handler, a function (request, ...rest) => Response', handler),
    );
  const setup = createSetup<Request>(rulesOrLimiter, options as RateLimitOptions<Request>, FETCH_FIELDS);
  const { trustProxy } = options;
  const reading: FetchReading = {
    trust: compileTrust(trustProxy),
    peer: options.clientAddress as FetchReading['peer'],
    cloudflare: options.cloudflare,
    user: options.user as FetchReading['user'],
    body: options.readBody ?? setup.limiter.ruleFacts.some((rule) => rule.readsBody),
    trustsAll: trustProxy === true,
    trustsNone: trustProxy === undefined || trustProxy === false || trustProxy === 0,
  };
  return async function rateLimited(request: Request, ...rest: Rest): Promise<Response> {
    const http = new FetchExchange(request, rest, reading, options.handler);
    const exchanged = await exchange(setup, http, request);
    if (exchanged === 'gone') return new Response(null, { status: GONE });
    if (exchanged === 'answered') return http.response as Response;
    return http.pass(() => handler(request, ...rest));
  };
}
