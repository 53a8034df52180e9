// Wiring warnings shared by the HTTP adapters: a request no rule matched, which the app routes to a method and
// path some rule does match (a mount prefix, a rewritten URL, a method override placed after the limiter);
// a proxy's forwarding header reaching an 'ip' rule of an app that trusts no proxy.
import type { Decision, Limiter, RequestInfo } from '../src/index.js';
import {
  UNMATCHED_ROUTE_WARNING,
  UNTRUSTED_FORWARDED_WARNING,
  warnOnce,
  warnOncePerProcess,
} from '../src/warnings.js';

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
 * What to change so that a framework believes its proxy, named in the framework's own terms (the advice of
 * the untrusted-forwarded warning).
 */
export const TRUST_SETTINGS = {
  express:
    "Express trusts no proxy: set app.set('trust proxy', n) to the number of proxies in front of the app (or to their addresses)",
  koa: 'Koa trusts no proxy: set app.proxy = true and app.maxIpsCount to the number of proxies in front of the app',
  fastify:
    "Fastify trusts no proxy: create it with the trustProxy option set to the proxies' addresses or subnets, Fastify({ trustProxy: '10.0.0.0/8' }) (Fastify 5.12 and later ignore a number of hops)",
  fetch:
    "ratekeeper/fetch's withRateLimit trusts no proxy: give it the trustProxy option, the number of proxies in front of the app (or their addresses); the peer it starts from is the runtime's (Bun's requestIP, Deno's remoteAddr, CF-Connecting-IP in a Worker or with cloudflare: true) or clientAddress's",
  hono: "ratekeeper/hono's rateLimit trusts no proxy: give it the trustProxy option, the number of proxies in front of the app (or their addresses); the peer it starts from is getConnInfo's remote address",
  'nest-express':
    "Nest's Express platform trusts no proxy: call app.set('trust proxy', n) on the NestExpressApplication, n the number of proxies in front of the app (or their addresses)",
  'nest-fastify':
    "Nest's Fastify platform trusts no proxy: create it with new FastifyAdapter({ trustProxy: addresses }), the proxies' addresses or subnets such as '10.0.0.0/8' (Fastify 5.12 and later ignore a number of hops)",
} as const;

/**
 * What to set instead of a proxy setting that believes every `X-Forwarded-For` entry, in the framework's own
 * terms (the advice of the spoofable-IP warning).
 */
export const SPOOFABLE_FIXES: Record<TrustSetting, string> = {
  express: "set app.set('trust proxy', n), n the number of proxies in front of the app, or their addresses",
  koa: 'set app.maxIpsCount = n, n the number of proxies in front of the app (app.maxIpsCount = 1 behind one)',
  fastify:
    "create it with trustProxy set to the proxies' addresses or subnets, such as Fastify({ trustProxy: '10.0.0.0/8' })",
  hono: 'give trustProxy the number of proxies in front of the app, or their addresses',
  fetch: 'give trustProxy the number of proxies in front of the app, or their addresses',
  'nest-express':
    "call app.set('trust proxy', n) on the NestExpressApplication, n the number of proxies in front of the app, or their addresses",
  'nest-fastify':
    "create it with new FastifyAdapter({ trustProxy: addresses }), the proxies' addresses or subnets such as '10.0.0.0/8'",
};

export type TrustSetting = keyof typeof TRUST_SETTINGS;

// Module-level: Node's warnings are process-wide, and this one is given once per process, whichever limiter meets it.
const warnUntrusted = warnOncePerProcess(UNTRUSTED_FORWARDED_WARNING);

/** The header a proxy forwards the client's address in, when the request carries one. */
export function forwardedHeader(headers: RequestInfo['headers']): string | undefined {
  if (headers['x-forwarded-for'] !== undefined) return 'X-Forwarded-For';
  if (headers.forwarded !== undefined) return 'Forwarded';
  return undefined;
}

export interface ForwardedCheck {
  /** True once the process has warned: adapters stop looking at headers and settings. */
  readonly done: boolean;
  /**
   * After a decision: warns (once per process) when the request carries `X-Forwarded-For` or
   * `Forwarded`, one of the rules that decided it keys on `'ip'`, and `framework.untrusted()` (asked
   * only then) names the setting of a framework that trusts no proxy (undefined when it trusts one).
   */
  check(info: RequestInfo, decision: Decision, framework: { untrusted(): TrustSetting | undefined }): void;
}

/**
 * The untrusted-forwarded check of one limiter. An app behind a proxy that it does not trust sees the
 * proxy's address on every request, so an `'ip'` rule puts all its clients in one bucket; a request that
 * reached the app directly carrying the header is a client's own claim, rightly ignored: the warning says both.
 */
export function createForwardedCheck(limiter: Limiter): ForwardedCheck {
  const ipRules = new Set(limiter.ruleFacts.filter((rule) => rule.keysOnIp).map((rule) => rule.name));
  return {
    get done() {
      return ipRules.size === 0 || warnUntrusted.done;
    },
    check(info, decision, framework) {
      if (ipRules.size === 0 || warnUntrusted.done) return;
      // The header first: most requests carry none, and reading it is all they cost.
      const header = forwardedHeader(info.headers);
      if (header === undefined) return;
      const rule = decision.rules.find((r) => ipRules.has(r.rule));
      if (rule === undefined) return;
      const setting = framework.untrusted();
      if (setting === undefined) return;
      warnUntrusted(
        `a request carrying ${header} reached rule "${rule.rule}", keyed on the client address, while ${TRUST_SETTINGS[setting]}. Behind a proxy every client then has the proxy's address and all share one bucket; a request that reached the app directly with the header is the client's own claim, rightly ignored`,
      );
    },
  };
}
