// Hono middleware: the request sequence (adapters/exchange.ts) on Hono, the outcome judged after `await next()`.
import type { Context, MiddlewareHandler } from 'hono';
import type { GetConnInfo } from 'hono/conninfo';
import type { StatusCode } from 'hono/utils/http-status';
import { fieldsOf } from '../src/config/known-fields.js';
import type { Decision, Limiter, Rule } from '../src/index.js';
import { createSetup, type RateLimitOptions, type Setup } from './common.js';
import { exchange } from './exchange.js';
import { HonoExchange, type HonoReading } from './hono-exchange.js';
import { compileTrust, type TrustProxy } from './proxy-trust.js';
import { type SlowDownOptions, slowDownSetup } from './slow-down.js';

export type { RateLimitOptions } from './common.js';
export { SPOOFABLE_IP_WARNING } from './common.js';
export type { TrustProxy } from './proxy-trust.js';
export type { SlowDownDelay, SlowDownOptions } from './slow-down.js';

declare module 'hono' {
  interface ContextVariableMap {
    /** The rate-limit decision for this request, set by `rateLimit` before the next handler runs. */
    rateLimit?: Decision;
  }
}

export interface HonoRateLimitOptions extends RateLimitOptions<Context> {
  /**
   * Which proxies' `X-Forwarded-For` entries are believed, as Express's `trust proxy`: `false`, a hop
   * count, addresses or subnets (`'loopback'`, `['10.0.0.0/8']`), a function `(address, hop)`, or `true`
   * (every entry, so any client picks its own address: a one-time warning). @default false
   */
  trustProxy?: TrustProxy;
  /**
   * The runtime's connection info (`getConnInfo` of `hono/bun`, `hono/deno`, `hono/cloudflare-workers`,
   * `@hono/node-server/conninfo` ...), whose `remote.address` is the peer. @default the runtime's own: the
   * Node server's socket (`@hono/node-server`), Bun's `server.requestIP` and Deno's `info.remoteAddr` (the
   * app's env when served as `export default app` or `Deno.serve(app.fetch)`), `CF-Connecting-IP` in a
   * Cloudflare Worker; else none: `'ip'` rules then share one bucket per rule and warn once
   */
  getConnInfo?: GetConnInfo;
  /**
   * Answers the denial instead of the default body; the rate-limit headers and `Retry-After` are already
   * set, the status is not. @default c.json(message, statusCode), or c.text for a string
   */
  handler?: (c: Context, decision: Decision) => Response | Promise<Response>;
  /**
   * Read the body before the decision, as the handler will (through Hono's parsers, which cache it for the
   * handler): a form by `parseBody()`, anything else as `c.req.json()` parses it, whatever its content type.
   * Only when needed by default: a handler that reads the raw stream, or verifies a signature over the raw
   * text, keeps it untouched unless a rule keys on it. @default true when a rule's key reads `body.*`
   */
  readBody?: boolean;
}

/** The status of the response to a client gone (reset after writing the request, or while the store decided): never sent (nginx's "client closed request"). */
const GONE = 499 as StatusCode;

const HONO_FIELDS = fieldsOf<Omit<HonoRateLimitOptions, keyof RateLimitOptions<unknown>>>({
  trustProxy: true,
  getConnInfo: true,
  handler: true,
  readBody: true,
});

/**
 * Hono middleware limiting requests by `rules` (a limiter on the memory store is built for them) or by an
 * existing `limiter`. Works app-wide (`app.use`) or on one route (`app.post(path, rateLimit(...), handler)`).
 *
 * - Client address: the peer of `getConnInfo` (or of the Node server's socket), then `X-Forwarded-For` as far
 *   as `trustProxy` allows. Without either (an edge runtime given no `getConnInfo`) `'ip'` rules cannot tell
 *   clients apart: they share the `'#unresolved-ip'` bucket of each rule, with a one-time warning.
 * - When a rule keys on `body.*`, the body is read before the decision as the handler will read it: a form
 *   by `parseBody()`, anything else as `c.req.json()` parses it (Hono's `json()` ignores the content type,
 *   so `text/plain` or no type is still JSON to the handler). Hono caches it for `c.req.json()`, `text()`,
 *   `arrayBuffer()` and `parseBody()` in the handler: put `bodyLimit` in front for large bodies.
 * - Admitted requests are judged after `await next()` by `isFailure(c.res.status)`; an error the handler
 *   threw is judged by the response `app.onError` made of it; a redirect is neither outcome (see
 *   `isFailure`). A client gone (on Node) before or during the decision never reaches the handler.
 * - Limiter errors (a key function that threw, a bad cost) are thrown to `app.onError`; nothing is consumed.
 * - An object or array where a rule reads a key (`{"username": ["alice"]}`, `?user=a&user=b`) is answered
 *   400 `{ statusCode, error, message, field }` naming the field, before any handler; nothing is consumed.
 * - The decision is `c.get('rateLimit')`.
 *
 * @example
 * app.use('/api/*', rateLimit([{ name: 'api', key: 'ip', limit: 100, window: { type: 'gcra', size: '1m' } }], {
 *   getConnInfo, trustProxy: 1 }));
 */
export function rateLimit(
  rulesOrLimiter: Rule[] | Limiter,
  options: HonoRateLimitOptions = {},
): MiddlewareHandler {
  return middleware(createSetup(rulesOrLimiter, options, HONO_FIELDS), options, options.handler);
}

/** Options of Hono's `slowDown`: those of every framework plus Hono's client-address and body options. */
export interface HonoSlowDownOptions
  extends SlowDownOptions<Context>,
    Pick<HonoRateLimitOptions, 'trustProxy' | 'getConnInfo' | 'readBody'> {}

/**
 * Hono middleware that delays requests over a rule's limit instead of refusing them: every matching rule
 * counts every request (past its limit too), and a request over a limit waits `delay` per request over it,
 * at most `maxDelay`, before `next`. Same rules and stores as `rateLimit` (rules with a lockout or counting
 * outcomes are refused), the same headers without `Retry-After`, the same client address (`trustProxy`,
 * `getConnInfo`). A client that goes while it waits (the request's signal aborts) ends the wait: the
 * handler never runs. Limiter errors are thrown to `app.onError`.
 *
 * @example
 * app.use(slowDown([{ name: 'api-slow', key: 'ip', limit: 50, window: { type: 'fixed', size: '15m' } }],
 *   { delay: '500ms', maxDelay: '20s', getConnInfo }));
 */
export function slowDown(rulesOrLimiter: Rule[] | Limiter, options: HonoSlowDownOptions): MiddlewareHandler {
  // Hono's own three taken out first: slowDownSetup refuses any other field it does not know.
  const given = options ?? {};
  const { trustProxy, getConnInfo, readBody, ...common } = given;
  return middleware(slowDownSetup(rulesOrLimiter, common as SlowDownOptions<Context>), given, undefined);
}

/**
 * The request sequence on Hono, for `rateLimit`'s setup or `slowDown`'s: the client address and the body
 * read as `options` say (the body by default only when a rule's key reads it).
 */
function middleware(
  setup: Setup<Context>,
  options: Pick<HonoRateLimitOptions, 'trustProxy' | 'getConnInfo' | 'readBody'>,
  handler: HonoRateLimitOptions['handler'],
): MiddlewareHandler {
  const { trustProxy, getConnInfo } = options;
  const reading: HonoReading = {
    trust: compileTrust(trustProxy),
    getConnInfo,
    body: options.readBody ?? setup.limiter.ruleFacts.some((rule) => rule.readsBody),
    trustsAll: trustProxy === true,
    trustsNone: trustProxy === undefined || trustProxy === false || trustProxy === 0,
  };
  return async function rateLimitMiddleware(c, next) {
    const http = new HonoExchange(c, reading, handler);
    const exchanged = await exchange(setup, http, c);
    if (exchanged === 'gone') return c.body(null, GONE);
    if (exchanged === 'answered') return http.response;
    return http.pass(next);
  };
}
