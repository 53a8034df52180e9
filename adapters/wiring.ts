// Wiring warnings shared by the HTTP adapters: a request no rule matched, which the app routes to a method and
// path some rule does match (a mount prefix, a rewritten URL, a method override placed after the limiter);
// and each framework's proxy settings named for the proxy warnings (checked in exchange.ts).
import type { Limiter } from '../src/index.js';
import { UNMATCHED_ROUTE_WARNING, warnOnce } from '../src/warnings.js';

/** A request as one side sees it: the limiter (what it matched) or the app's router (what it routes). */
export interface RouteView {
  method: string;
  path: string;
}

/** Why the two views of a request differ, for the warning's advice. */
export type WiringCause = 'mounted' | 'override' | 'rewritten';

const ADVICE: Record<WiringCause, string> = {
  mounted:
    'the rate limiter is mounted at a path prefix (or the URL was rewritten before it), and rules match the full original URL: write rule paths as full URLs',
  override:
    'the request overrides its method (X-HTTP-Method-Override or _method) in a middleware after the rate limiter: put the method override before it',
  rewritten:
    'a middleware after the rate limiter rewrote the URL or the method (a rewrite, method-override): put it before the rate limiter',
};

/** The methods tried before saying that no rule of a route's own limiter can match its path. */
const ANY_METHOD = ['GET', 'POST', 'PUT', 'PATCH', 'DELETE'];

/** Headers that method-override and koa-methodoverride read by default or by common configuration. */
const OVERRIDE_HEADERS = ['x-http-method-override', 'x-http-method', 'x-method-override'];

export interface WiringCheck {
  /**
   * Warns (once per middleware) when rules match `routed` but none matched `seen`. Call it only for
   * requests the limiter matched no rule for; costs nothing when both views agree.
   */
  unmatched(seen: RouteView, routed: RouteView, cause: WiringCause): void;
  /**
   * Warns (once per middleware) when a limiter attached to one route has no rule whose `match` accepts
   * that route's path, with or without the prefix it is mounted under, for any common method.
   */
  unattached(seen: RouteView): void;
  /** The method a POST asks to be routed as (header or `_method`), or undefined. */
  overriddenMethod(
    method: string,
    headers: Record<string, unknown>,
    query: unknown,
    body: unknown,
  ): string | undefined;
}

export function createWiringCheck(limiter: Limiter): WiringCheck {
  const warn = warnOnce(UNMATCHED_ROUTE_WARNING);
  let warned = false;
  const matching = (view: RouteView) => limiter.matchingRules(view.method, view.path);
  return {
    unmatched(seen, routed, cause) {
      if (warned || (seen.method === routed.method && seen.path === routed.path)) return;
      const hidden = matching(routed);
      if (hidden.length === 0) return;
      const matched = new Set(matching(seen));
      const rule = hidden.find((name) => !matched.has(name));
      if (rule === undefined) return;
      warned = true;
      warn(
        `rule "${rule}" matches ${routed.method} ${routed.path}, which is how the app routes a request that reached the rate limiter as ${seen.method} ${seen.path}, so the rule did not apply to it: ${ADVICE[cause]}`,
      );
    },
    unattached(seen) {
      if (warned) return;
      const path = seen.path;
      for (let at = 0; at >= 0; at = path.indexOf('/', at + 1)) {
        const rest = at === 0 ? path : path.slice(at);
        if (ANY_METHOD.some((method) => matching({ method, path: rest }).length > 0)) return;
      }
      warned = true;
      warn(
        `the rate limiter attached to the route of ${seen.method} ${path} has no rule whose match accepts that path, so none of its rules applied: rules given to one route must match its path (or its path without the prefix it is mounted under), or leave match out`,
      );
    },
    overriddenMethod(method, headers, query, body) {
      if (method !== 'POST') return undefined;
      for (const name of OVERRIDE_HEADERS) {
        const value = headers[name];
        if (typeof value === 'string' && value !== '') return value.toUpperCase();
      }
      for (const source of [query, body]) {
        if (source === null || typeof source !== 'object' || !Object.hasOwn(source, '_method')) continue;
        const value = (source as Record<string, unknown>)._method;
        if (typeof value === 'string' && value !== '') return value.toUpperCase();
      }
      return undefined;
    },
  };
}

/**
 * A framework's proxy setting in its own terms: what to change so that the framework believes its proxy (the
 * advice of the untrusted-forwarded warning), and what to set instead of a setting that believes every
 * `X-Forwarded-For` entry (the advice of the spoofable-IP warning). One constant per framework, so that a
 * bundle carries only its own adapter's.
 */
export interface TrustSetting {
  readonly untrusted: string;
  readonly spoofable: string;
}

export const EXPRESS_TRUST: TrustSetting = {
  untrusted:
    "Express trusts no proxy: set app.set('trust proxy', n) to the number of proxies in front of the app (or to their addresses)",
  spoofable: "set app.set('trust proxy', n), n the number of proxies in front of the app, or their addresses",
};

export const KOA_TRUST: TrustSetting = {
  untrusted:
    'Koa trusts no proxy: set app.proxy = true and app.maxIpsCount to the number of proxies in front of the app',
  spoofable:
    'set app.maxIpsCount = n, n the number of proxies in front of the app (app.maxIpsCount = 1 behind one)',
};

export const FASTIFY_TRUST: TrustSetting = {
  untrusted:
    "Fastify trusts no proxy: create it with the trustProxy option set to the proxies' addresses or subnets, Fastify({ trustProxy: '10.0.0.0/8' }) (Fastify 5.12 and later ignore a number of hops)",
  spoofable:
    "create it with trustProxy set to the proxies' addresses or subnets, such as Fastify({ trustProxy: '10.0.0.0/8' })",
};

export const FETCH_TRUST: TrustSetting = {
  untrusted:
    "ratekeeper/fetch's withRateLimit trusts no proxy: give it the trustProxy option, the number of proxies in front of the app (or their addresses); the peer it starts from is the runtime's (Bun's requestIP, Deno's remoteAddr, CF-Connecting-IP in a Worker or with cloudflare: true) or clientAddress's",
  spoofable: 'give trustProxy the number of proxies in front of the app, or their addresses',
};

export const HONO_TRUST: TrustSetting = {
  untrusted:
    "ratekeeper/hono's rateLimit trusts no proxy: give it the trustProxy option, the number of proxies in front of the app (or their addresses); the peer it starts from is getConnInfo's remote address",
  spoofable: 'give trustProxy the number of proxies in front of the app, or their addresses',
};

export const NEST_EXPRESS_TRUST: TrustSetting = {
  untrusted:
    "Nest's Express platform trusts no proxy: call app.set('trust proxy', n) on the NestExpressApplication, n the number of proxies in front of the app (or their addresses)",
  spoofable:
    "call app.set('trust proxy', n) on the NestExpressApplication, n the number of proxies in front of the app, or their addresses",
};

export const NEST_FASTIFY_TRUST: TrustSetting = {
  untrusted:
    "Nest's Fastify platform trusts no proxy: create it with new FastifyAdapter({ trustProxy: addresses }), the proxies' addresses or subnets such as '10.0.0.0/8' (Fastify 5.12 and later ignore a number of hops)",
  spoofable:
    "create it with new FastifyAdapter({ trustProxy: addresses }), the proxies' addresses or subnets such as '10.0.0.0/8'",
};
