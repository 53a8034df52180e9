// Fastify route configs checked at registration: `config.rateLimit` must be rules, a limiter or false, and a
// key that is `rateLimit` in another case is refused, so no route goes unlimited or fails on its first request.
import { mustBe, refusal, refuse } from '../src/config/refuse.js';
import { type Limiter, RateLimitConfigError, type Rule } from '../src/index.js';
import { isLimiter } from './common.js';

/** A route as Fastify's `onRoute` hook shows it. */
export interface DeclaredRoute {
  method: string | string[];
  url: string;
  config?: unknown;
}

/** How a route is named in errors: `route GET /login`. */
function routeName(route: DeclaredRoute): string {
  const method = Array.isArray(route.method) ? route.method.join(',') : route.method;
  return `ratekeeper/fastify: route ${method} ${route.url}`;
}

/** @fastify/rate-limit's route options (`{ max, timeWindow }`), written as the ratekeeper rules that mean the same. */
function rulesFromPeerShape(route: DeclaredRoute, value: Record<string, unknown>): string | undefined {
  if (!('max' in value) && !('timeWindow' in value)) return undefined;
  // Its defaults: 1000 requests per minute.
  const max = typeof value.max === 'number' ? value.max : 1000;
  const window = value.timeWindow ?? '1m';
  const size = typeof window === 'number' ? String(window) : `'${String(window).replace(/'/g, '')}'`;
  const name =
    route.url
      .replace(/[^A-Za-z0-9_.~-]+/g, '-')
      .replace(/^-+|-+$/g, '')
      .slice(0, 64) || 'root';
  return `[{ name: '${name}', key: 'ip', limit: ${max}, window: { type: 'fixed', size: ${size} } }]`;
}

/**
 * The route's own limiter setting, checked: its rule array, its limiter, `false`, or undefined when the route
 * has none. Throws `RateLimitConfigError` (`ERR_OPTION`) naming the route for a key that differs from
 * `rateLimit` only by case (`ratelimit`, read by nobody: the route would go unlimited) and for any other value
 * (an object in @fastify/rate-limit's shape gets the ratekeeper rule that means the same).
 */
export function routeRateLimit(route: DeclaredRoute): Rule[] | Limiter | false | undefined {
  const config = route.config;
  if (config === null || typeof config !== 'object') return undefined;
  for (const field of Object.keys(config)) {
    if (field !== 'rateLimit' && field.toLowerCase() === 'ratelimit')
      refuse(
        'ERR_OPTION',
        routeName(route),
        `config.${field} is not read by ratekeeper (the route would be unlimited), did you mean 'rateLimit'?`,
      );
  }
  const value = (config as { rateLimit?: unknown }).rateLimit;
  if (value === undefined || value === false || Array.isArray(value)) return value;
  if (isLimiter(value)) return value;
  const peer =
    value !== null && typeof value === 'object'
      ? rulesFromPeerShape(route, value as Record<string, unknown>)
      : undefined;
  if (peer !== undefined)
    refuse(
      'ERR_OPTION',
      routeName(route),
      `config.rateLimit is in @fastify/rate-limit's shape (max, timeWindow); ratekeeper takes rules, a limiter or false. The same limit as rules: rateLimit: ${peer}`,
    );
  const allowed = 'an array of rules, a limiter from createLimiter or false';
  return refuse('ERR_OPTION', routeName(route), mustBe('config.rateLimit', allowed, value));
}

/** A configuration error of a route's rules (from `createLimiter`), with the route it belongs to named first. */
export function routeRulesError(route: DeclaredRoute, error: unknown): unknown {
  if (!(error instanceof RateLimitConfigError)) return error;
  return refusal(error.code, `${routeName(route)}: config.rateLimit`, error.message);
}
