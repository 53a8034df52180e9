// What the HTTP adapters share: options, the limiter they run, the denial body, outcome judging, and the
// protections every adapter applies (a client already gone, redirects as unknown outcomes, wiring warnings).
// The request sequence that uses them is adapters/exchange.ts.

import { notRulesHint } from '../src/config/hints.js';
import { assertKnownFields, fieldsOf } from '../src/config/known-fields.js';
import { mustBe, refuse } from '../src/config/refuse.js';
import { ADAPTER_DEFAULTS } from '../src/defaults.js';
import { describe as describeValue } from '../src/errors.js';
import { createHeaderFormatter, createRetryAfter, HEADERS_MODES, type QuotaUnit } from '../src/headers.js';
import {
  createLimiter,
  type Decision,
  type HeadersMode,
  type Limiter,
  type ResetFormat,
  type Rule,
} from '../src/index.js';
import { emitWarning, REDIRECT_OUTCOME_WARNING, SPOOFABLE_IP_WARNING, warnOnce } from '../src/warnings.js';
import { createForwardedCheck, type ForwardedCheck } from './exchange.js';
import { createWiringCheck, type WiringCheck } from './wiring.js';

export { SPOOFABLE_IP_WARNING } from '../src/warnings.js';

/**
 * Options every adapter takes; `Req` is what the framework hands its middleware: `req` for Express, `ctx`
 * for Koa, `c` for Hono, the `FastifyRequest`, Nest's `ExecutionContext`.
 */
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
   * to send is not charged to a `countOn: 'success'` rule. Without it a redirect (3xx) is neither: the
   * attempt stays counted, nothing resets, and a one-time warning `RATEKEEPER_REDIRECT_OUTCOME` says so
   * (a login answering with redirects reports its outcome with `limiter.report`, or judges them here).
   * @default (status) => status >= 400, and 3xx unknown
   */
  isFailure?: (status: number) => boolean;
  /** Requests for which this returns true bypass the limiter entirely (no headers, nothing counted). @default none */
  skip?: (req: Req) => boolean | Promise<boolean>;
  /** Epoch-ms clock for `X-RateLimit-Reset` in `'epoch-seconds'`; give tests the store's clock. @default Date.now */
  clock?: () => number;
}

/** The fields of `RateLimitOptions`; each adapter adds its own (`handler`) when it calls `createSetup`. */
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

/** Everything an adapter needs, resolved once when the middleware is built. */
export interface Setup<Req> {
  limiter: Limiter;
  /** True when the setup built the limiter from rules: the adapter closes it with the app where it can. */
  owned: boolean;
  statusCode: number;
  onLimited: ((decision: Decision, req: Req) => void) | undefined;
  skip: ((req: Req) => boolean | Promise<boolean>) | undefined;
  /** Header fields for a decision, in write order. */
  headerFields: (decision: Decision) => Array<[string, string]>;
  /** False when the limiter never needs `report` (no rule counts outcomes): no listener per response then. */
  reports: boolean;
  /** The `message` option for a denial: its value, or what its function gives; undefined when there is none. */
  message: (decision: Decision) => unknown;
  /** `Retry-After`'s seconds for a denial (a concurrency denial's too: not its lease). */
  retryAfter: (decision: Decision) => number;
  /** The body of a denial: `message`'s, else the default `{ error, retryAfter }`, `retryAfter` the `Retry-After` seconds. */
  body: (decision: Decision) => unknown;
  /**
   * Reports an admitted decision's outcome from the response's final status, after the response: by
   * `isFailure` when given, else failure from 400, success below 300, and a redirect reported as
   * nothing (the reservation stays, nothing resets; warned once unless the app reported it itself).
   */
  report: (decision: Decision, status: number) => void;
  /** Wiring warnings for requests no rule matched (see wiring.ts). */
  wiring: WiringCheck;
  /** The untrusted-forwarded warning (once per process) for this limiter's `'ip'` rules. */
  forwarded: ForwardedCheck;
  /** Emits the spoofable-IP warning once per middleware. */
  warnSpoofable: (detail: string) => void;
  /** The warning was emitted: adapters stop checking the proxy settings. */
  warned: boolean;
  /** Requests since the proxy settings were last read for the spoofable-IP warning, modulo SPOOF_CHECK_EVERY (0: read them now). */
  spoofChecks: number;
  /**
   * Some rule's `match` names a path, so a limiter attached to a route may need the route-relative path
   * (adapters/exchange.ts routeRelative); without one, whether it is attached is not asked.
   */
  pathRules: boolean;
  /**
   * slowDown's answer to a request over a limit, a wait instead of a denial (adapters/slow-down.ts): the
   * sequence then records every request (`recordRequest`) and paces it; undefined for rateLimit.
   */
  pacing: Pacing<Req> | undefined;
}

/** How slowDown paces a request over a limit, in the request sequence (adapters/exchange.ts). */
export interface Pacing<Req> {
  /**
   * The wait a recorded decision earns, in ms (0: none); undefined when some key over its limit holds as many
   * waiting requests as it may: the request is refused then, as rateLimit refuses one.
   */
  plan(decision: Decision): number | undefined;
  /**
   * Holds the request `ms`, counted against the decision's keys over their limits, unless the client goes
   * first: `whenGone(cancel)` calls `cancel` when it goes and returns what undoes that. Resolves true when
   * it waited the whole time; the timer and the listener are gone either way.
   */
  wait(
    ms: number,
    decision: Decision,
    request: Req,
    whenGone: (cancel: () => void) => () => void,
  ): Promise<boolean>;
}

/** Whether a value is a limiter: duck-typed rather than `instanceof`, so one from the other module format (ESM/CJS) is one too. */
export function isLimiter(value: unknown): value is Limiter {
  return typeof (value as Partial<Limiter> | null)?.check === 'function';
}

/**
 * The limiter an adapter runs for `rulesOrLimiter`: a limiter as it is, or one on the memory store built for
 * an array of rules (`owned`: the adapter closes it); anything else is refused, naming `who` (`'rateLimit'`,
 * `'@RateLimit'`, `'slowDown'`). `accept` sees the rules' facts first: when it throws, a limiter built here
 * is closed and the error thrown, so a refused rule set leaves nothing behind.
 */
export function limiterOf(
  rulesOrLimiter: unknown,
  who: string,
  accept?: (facts: Limiter['ruleFacts']) => void,
): { limiter: Limiter; owned: boolean } {
  if (isLimiter(rulesOrLimiter)) {
    accept?.(rulesOrLimiter.ruleFacts);
    return { limiter: rulesOrLimiter, owned: false };
  }
  if (!Array.isArray(rulesOrLimiter))
    refuse(
      'ERR_OPTION',
      who,
      `expects an array of rules or a limiter from createLimiter, got ${describeValue(rulesOrLimiter)}${notRulesHint(rulesOrLimiter)}`,
    );
  const limiter = createLimiter({ rules: rulesOrLimiter });
  try {
    accept?.(limiter.ruleFacts);
  } catch (error) {
    void limiter.close();
    throw error;
  }
  return { limiter, owned: true };
}

/**
 * Resolves an adapter's arguments once. `adapterFields`: the options the adapter takes beyond
 * `RateLimitOptions` (`['handler']`); any other field is refused as a typo (ERR_UNKNOWN_FIELD).
 */
export function createSetup<Req>(
  rulesOrLimiter: Rule[] | Limiter,
  options: RateLimitOptions<Req> = {},
  adapterFields: readonly string[] = [],
  pacing?: Pacing<Req>,
): Setup<Req> {
  assertKnownFields(options, [...RATE_LIMIT_OPTION_FIELDS, ...adapterFields], 'rateLimit');
  const { limiter, owned } = limiterOf(rulesOrLimiter, 'rateLimit');
  // Rules without a fixed-length window (a cron calendar) have no `w` in RateLimit-Policy.
  const windows: Record<string, number> = {};
  for (const [name, seconds] of Object.entries(limiter.ruleWindows)) if (seconds > 0) windows[name] = seconds;
  const statusCode = options.statusCode ?? ADAPTER_DEFAULTS.statusCode;
  if (!Number.isInteger(statusCode) || statusCode < 400 || statusCode > 599)
    refuse('ERR_OPTION', 'rateLimit', mustBe('statusCode', 'an integer from 400 to 599', statusCode));
  const mode = options.headers ?? ADAPTER_DEFAULTS.headers;
  if (!HEADERS_MODES.includes(mode)) {
    const allowed = "'legacy', 'draft-6', 'draft-7', 'standard', 'both' or false";
    refuse('ERR_OPTION', 'rateLimit', mustBe('headers', allowed, mode));
  }
  const reset = options.reset ?? ADAPTER_DEFAULTS.reset;
  if (reset !== 'epoch-seconds' && reset !== 'delta-seconds')
    refuse('ERR_OPTION', 'rateLimit', mustBe('reset', "'epoch-seconds' or 'delta-seconds'", reset));
  const clock = options.clock ?? Date.now;
  const judge = options.isFailure;
  const warnRedirect = warnOnce(REDIRECT_OUTCOME_WARNING);
  const given = options.message;
  const message = (decision: Decision): unknown => (typeof given === 'function' ? given(decision) : given);
  const units = quotaUnits(limiter);
  // The default body's retryAfter is Retry-After's own figure (a concurrency denial's too, not its lease).
  const retryAfter = createRetryAfter(units);
  const result: Setup<Req> = {
    limiter,
    owned,
    statusCode,
    onLimited: options.onLimited,
    skip: options.skip,
    headerFields: createHeaderFormatter({ headers: mode, reset, clock, windows, units }),
    reports: limiter.needsOutcomes,
    message,
    retryAfter,
    body: (decision) =>
      given === undefined ? ADAPTER_DEFAULTS.message(retryAfter(decision)) : message(decision),
    report: (decision, status) => {
      let failed: boolean;
      if (judge !== undefined) {
        // Called after the response, outside any handler: a throw must not become an uncaught exception.
        // Judged unknown then, as a redirect is: the reservation stays, nothing resets.
        try {
          failed = judge(status);
        } catch {
          return;
        }
      } else if (status >= 300 && status < 400) {
        if (limiter.awaitsReport(decision)) {
          const rules = decision.rules.map((r) => r.rule).join('", "');
          warnRedirect(
            `a request admitted by rules "${rules}" (some count outcomes: countOn or resetOnSuccess) was answered with a redirect (${status}), which is neither a success nor a failure: the attempt stays counted and nothing is reset. Report the outcome with limiter.report(decision, outcome) before redirecting (Passport: a custom callback instead of failureRedirect), or judge redirects with the isFailure option`,
          );
        }
        return;
      } else failed = ADAPTER_DEFAULTS.isFailure(status);
      limiter.report(decision, failed ? 'failure' : 'success').catch(() => {
        // The limiter reports store faults through its 'storeError' event; the response is gone.
      });
    },
    wiring: createWiringCheck(limiter),
    forwarded: createForwardedCheck(limiter),
    warnSpoofable: (detail) => {
      if (result.warned) return;
      result.warned = true;
      emitWarning(
        `ratekeeper: ${detail}; any client can choose its rate-limit key by sending X-Forwarded-For`,
        SPOOFABLE_IP_WARNING,
      );
    },
    warned: false,
    spoofChecks: 0,
    // A limiter-like object without facts (or without this one) is asked as before.
    pathRules:
      limiter.ruleFacts === undefined || limiter.ruleFacts.some((facts) => facts.matchesPath !== false),
    pacing,
  };
  return result;
}

/** Set on a request once a route's own limiter has decided it, so that no other registration or guard counts it again. */
export const ROUTE_DECIDED = Symbol('ratekeeper route decided');

/**
 * The setups of routes' own limiters (Fastify's `config.rateLimit`, Nest's `@RateLimit`), one per limiter,
 * with one adapter's options. A route's own limiter decides a request once, for the first registration or
 * guard that meets it: the others are given undefined.
 */
export function routeSetups<Req>(
  options: RateLimitOptions<Req>,
): (request: object, limiter: Limiter) => Setup<Req> | undefined {
  const setups = new WeakMap<Limiter, Setup<Req>>();
  return (request, limiter) => {
    const flags = request as Record<symbol, boolean>;
    if (flags[ROUTE_DECIDED]) return undefined;
    flags[ROUTE_DECIDED] = true;
    let found = setups.get(limiter);
    if (found === undefined) {
      found = createSetup(limiter, options);
      setups.set(limiter, found);
    }
    return found;
  };
}

/**
 * Calls `cancel` when a Node response closes before it finished (the client went), at once if it is closed
 * already; returns what stops listening.
 */
export function responseClosed(
  res: {
    readonly destroyed?: boolean;
    once(event: 'close', listener: () => void): unknown;
    off(event: 'close', listener: () => void): unknown;
  },
  cancel: () => void,
): () => void {
  if (res.destroyed === true) {
    cancel();
    return () => {};
  }
  res.once('close', cancel);
  return () => res.off('close', cancel);
}

/** The quota unit of each rule counting something else than requests: concurrency rules count requests in flight. */
function quotaUnits(limiter: Limiter): Record<string, QuotaUnit> {
  const units: Record<string, QuotaUnit> = {};
  // Duck-typed limiters from the other module format have them too; an older one has none.
  for (const facts of limiter.ruleFacts ?? [])
    if (facts.holdsSlots) units[facts.name] = 'concurrent-requests';
  return units;
}

/** Calls `cancel` when a web request's signal aborts (its client went), at once if it has; returns what stops listening. */
export function signalAborted(signal: AbortSignal, cancel: () => void): () => void {
  if (signal.aborted) {
    cancel();
    return () => {};
  }
  signal.addEventListener('abort', cancel, { once: true });
  return () => signal.removeEventListener('abort', cancel);
}

/**
 * `response` with a body that calls `done` once it is all read, failed or cancelled, or when `signal` (the
 * request's) aborts; `done` at once for a response without a body, or a protocol switch (101).
 */
export function heldUntilWritten(response: Response, signal: AbortSignal, done: () => void): Response {
  const body = response.body;
  if (body === null || response.status === 101) {
    done();
    return response;
  }
  let called = false;
  let unlisten = () => {};
  const once = () => {
    if (called) return;
    called = true;
    unlisten();
    done();
  };
  unlisten = signalAborted(signal, once);
  if (called) return response;
  return new Response(watchedBody(body, once), response);
}

/**
 * `body` as a stream that calls `done` once it was read to its end, failed, or was cancelled (the runtime
 * gave up writing it: its client went).
 */
function watchedBody(body: ReadableStream<Uint8Array>, done: () => void): ReadableStream<Uint8Array> {
  const reader = body.getReader();
  return new ReadableStream<Uint8Array>({
    async pull(controller) {
      let chunk: Awaited<ReturnType<typeof reader.read>>;
      try {
        chunk = await reader.read();
      } catch (error) {
        done();
        controller.error(error);
        return;
      }
      if (chunk.done) {
        done();
        controller.close();
      } else controller.enqueue(chunk.value);
    },
    cancel(reason) {
      done();
      return reader.cancel(reason);
    },
  });
}

/** The status an error thrown through Koa ends in: its `status` or `statusCode` when it is 4xx/5xx, else 500. */
export function errorStatus(error: unknown): number {
  const e = error as { status?: unknown; statusCode?: unknown } | null;
  const status = e?.status ?? e?.statusCode;
  return typeof status === 'number' && Number.isInteger(status) && status >= 400 && status < 600
    ? status
    : 500;
}
