// What the Express and Koa adapters share: options, the limiter they run, the denial body, outcome judging.

import { ADAPTER_DEFAULTS } from '../src/defaults.js';
import { describe as describeValue } from '../src/errors.js';
import { createHeaderFormatter } from '../src/headers.js';
import {
  createLimiter,
  type Decision,
  type HeadersMode,
  type Limiter,
  RateLimitConfigError,
  type ResetFormat,
  type Rule,
} from '../src/index.js';
import { assertKnownFields, fieldsOf } from '../src/known-fields.js';

/** Options both adapters take; `Req` is the framework's request (`req` for Express, `ctx` for Koa). */
export interface RateLimitOptions<Req> {
  /** Which rate-limit fields to send (see `formatHeaders`); a 429 always carries `Retry-After`. @default 'legacy' */
  headers?: HeadersMode;
  /** Unit of `X-RateLimit-Reset`. @default 'epoch-seconds' */
  reset?: ResetFormat;
  /** Status of a denial. @default 429 */
  statusCode?: number;
  /**
   * Body of a denial: an object (sent as JSON), a string (sent as text), or a function of the decision.
   * @default (decision) => ({ error: 'Too Many Requests', retryAfter: <Retry-After seconds> })
   */
  message?: unknown;
  /**
   * Called for every denial and for every request a dry-run rule would have denied (`decision.dryRun`),
   * before the response. For logging and metrics; a throw reaches the framework's error handling.
   */
  onLimited?: (decision: Decision, req: Req) => void;
  /**
   * Judges an admitted request's final status, for rules with `countOn` or `resetOnSuccess`.
   * Server errors count as failures too: a 5xx never resets a lockout count, and a code that failed
   * to send is not charged to a `countOn: 'success'` rule.
   * @default (status) => status >= 400
   */
  isFailure?: (status: number) => boolean;
  /** Requests for which this returns true bypass the limiter entirely (no headers, nothing counted). @default none */
  skip?: (req: Req) => boolean | Promise<boolean>;
  /** Epoch-ms clock for `X-RateLimit-Reset` in `'epoch-seconds'`; give tests the store's clock. @default Date.now */
  clock?: () => number;
}

/** The fields of `RateLimitOptions`; each adapter adds its own (`handler`) when it calls `setup`. */
export const RATE_LIMIT_OPTION_FIELDS = fieldsOf<RateLimitOptions<unknown>>({
  headers: true,
  reset: true,
  statusCode: true,
  message: true,
  onLimited: true,
  isFailure: true,
  skip: true,
  clock: true,
});

/** The code of the one-time warning about a client IP the client itself can choose. */
export const SPOOFABLE_IP_WARNING = 'RATEKEEPER_SPOOFABLE_IP';

/** Everything an adapter needs, resolved once when the middleware is built. */
export interface Setup<Req> {
  limiter: Limiter;
  statusCode: number;
  onLimited: ((decision: Decision, req: Req) => void) | undefined;
  skip: ((req: Req) => boolean | Promise<boolean>) | undefined;
  /** Header fields for a decision, in write order. */
  headerFields: (decision: Decision) => Array<[string, string]>;
  /** False when the limiter never needs `report` (no rule counts outcomes): no listener per response then. */
  reports: boolean;
  body: (decision: Decision) => unknown;
  outcome: (status: number) => 'success' | 'failure';
  /** Emits the spoofable-IP warning once per middleware. */
  warnSpoofable: (detail: string) => void;
  /** The warning was emitted: adapters stop checking the proxy settings. */
  warned: boolean;
}

/**
 * Resolves an adapter's arguments once. `adapterFields`: the options the adapter takes beyond
 * `RateLimitOptions` (`['handler']`); any other field is refused as a typo (ERR_UNKNOWN_FIELD).
 */
export function setup<Req>(
  rulesOrLimiter: Rule[] | Limiter,
  options: RateLimitOptions<Req> = {},
  adapterFields: readonly string[] = [],
): Setup<Req> {
  assertKnownFields(options, [...RATE_LIMIT_OPTION_FIELDS, ...adapterFields], 'rateLimit');
  let limiter: Limiter;
  if (!Array.isArray(rulesOrLimiter)) {
    // Duck-typed rather than `instanceof`, so a limiter from the other module format (ESM/CJS) works too.
    if (typeof (rulesOrLimiter as Partial<Limiter> | null)?.check !== 'function') {
      throw new RateLimitConfigError(
        'ERR_OPTION',
        `rateLimit: expects an array of rules or a limiter from createLimiter, got ${describeValue(rulesOrLimiter)}`,
      );
    }
    limiter = rulesOrLimiter;
  } else {
    limiter = createLimiter({ rules: rulesOrLimiter });
  }
  // Rules without a fixed-length window (a cron calendar) have no `w` in RateLimit-Policy.
  const windows: Record<string, number> = {};
  for (const [name, seconds] of Object.entries(limiter.ruleWindows ?? {}))
    if (seconds > 0) windows[name] = seconds;
  const statusCode = options.statusCode ?? ADAPTER_DEFAULTS.statusCode;
  if (!Number.isInteger(statusCode) || statusCode < 400 || statusCode > 599) {
    throw new RateLimitConfigError(
      'ERR_OPTION',
      `rateLimit: statusCode must be an integer from 400 to 599, got ${describeValue(statusCode)}`,
    );
  }
  const mode = options.headers ?? ADAPTER_DEFAULTS.headers;
  if (!['legacy', 'standard', 'both', false].includes(mode)) {
    throw new RateLimitConfigError(
      'ERR_OPTION',
      `rateLimit: headers must be 'legacy', 'standard', 'both' or false, got ${describeValue(mode)}`,
    );
  }
  const reset = options.reset ?? ADAPTER_DEFAULTS.reset;
  if (reset !== 'epoch-seconds' && reset !== 'delta-seconds') {
    throw new RateLimitConfigError(
      'ERR_OPTION',
      `rateLimit: reset must be 'epoch-seconds' or 'delta-seconds', got ${describeValue(reset)}`,
    );
  }
  const clock = options.clock ?? Date.now;
  const isFailure = options.isFailure ?? ADAPTER_DEFAULTS.isFailure;
  const message = options.message;
  const result: Setup<Req> = {
    limiter,
    statusCode,
    onLimited: options.onLimited,
    skip: options.skip,
    headerFields: createHeaderFormatter({ headers: mode, reset, clock, windows }),
    // Duck-typed like the limiter itself: one without the getter is asked for reports.
    reports: (limiter as Partial<Limiter>).needsOutcomes !== false,
    body: (decision) => {
      if (typeof message === 'function') return message(decision);
      return message ?? ADAPTER_DEFAULTS.message(decision);
    },
    outcome: (status) => (isFailure(status) ? 'failure' : 'success'),
    warnSpoofable: (detail) => {
      if (result.warned) return;
      result.warned = true;
      process.emitWarning(
        `ratekeeper: ${detail}; any client can choose its rate-limit key by sending X-Forwarded-For`,
        {
          code: SPOOFABLE_IP_WARNING,
        },
      );
    },
    warned: false,
  };
  return result;
}

/**
 * The path of a request URL without query string or fragment. An absolute-form target
 * (`POST http://host/login`, which the frameworks route by its path) yields its path, so it cannot
 * slip past a rule's `match`.
 */
export function pathOf(url: string): string {
  const query = url.indexOf('?');
  const fragment = url.indexOf('#');
  const end = query < 0 ? fragment : fragment < 0 ? query : Math.min(query, fragment);
  const path = end < 0 ? url : url.slice(0, end);
  if (path.startsWith('/')) return path;
  try {
    return new URL(path).pathname;
  } catch {
    return path;
  }
}

/** The status an error thrown through Koa ends in: its `status` or `statusCode` when it is 4xx/5xx, else 500. */
export function errorStatus(error: unknown): number {
  const e = error as { status?: unknown; statusCode?: unknown } | null;
  const status = e?.status ?? e?.statusCode;
  return typeof status === 'number' && Number.isInteger(status) && status >= 400 && status < 600
    ? status
    : 500;
}
