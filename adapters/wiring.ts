// Wiring warnings shared by the HTTP adapters: a request no rule matched, which the app routes to a method and
// path some rule does match (a mount prefix, a rewritten URL, a method override placed after the limiter).
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

/** Headers that method-override and koa-methodoverride read by default or by common configuration. */
const OVERRIDE_HEADERS = ['x-http-method-override', 'x-http-method', 'x-method-override'];

export interface WiringCheck {
  /**
   * Warns (once per middleware) when rules match `routed` but none matched `seen`. Call it only for
   * requests the limiter matched no rule for; costs nothing when both views agree.
   */
  unmatched(seen: RouteView, routed: RouteView, cause: WiringCause): void;
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
