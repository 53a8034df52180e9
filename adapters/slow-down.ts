// Slowing down instead of refusing: slowDown's options, the delay a decision earns, the wait the client's
// leaving cancels, and slowDown's request sequence over the frameworks' exchanges (adapters/exchange.ts).
import { assertKnownFields, fieldsOf } from '../src/config/known-fields.js';
import { describe, RateLimitRequestError } from '../src/errors.js';
import { appendsField, type HeaderField } from '../src/headers.js';
import {
  type Decision,
  type Duration,
  type HeadersMode,
  type Limiter,
  RateLimitConfigError,
  type ResetFormat,
  type Rule,
} from '../src/index.js';
import { parseDuration } from '../src/rules/duration.js';
import { clientGone, createSetup, type Setup } from './common.js';
import type { HttpExchange } from './exchange.js';
import type { ForwardedCheck } from './wiring.js';

/** The longest wait a Node timer takes (about 24.8 days); a longer delay waits this long. */
export const MAX_DELAY_MS = 2 ** 31 - 1;

/**
 * How long a request over a rule's limit waits: ms per request over the limit (a number, or a `Duration`
 * such as `'500ms'`), so the first request over waits it once and the fifth five times; or a function of
 * how many requests over the limit this one is (`over`, 1 for the first) and the decision, returning ms.
 */
export type SlowDownDelay = Duration | ((over: number, decision: Decision) => number);

/** Options of `slowDown` in every framework; `Req` is the framework's request. */
export interface SlowDownOptions<Req> {
  /** The delay of a request over a rule's limit (see `SlowDownDelay`). Required. */
  delay: SlowDownDelay;
  /** The longest delay, in ms or a `Duration`. @default none (a delay past about 24.8 days waits that long) */
  maxDelay?: Duration;
  /** Which rate-limit fields to send, as `rateLimit`'s option; never `Retry-After` (nothing is refused). @default 'legacy' */
  headers?: HeadersMode;
  /** Unit of `X-RateLimit-Reset`. @default 'epoch-seconds' */
  reset?: ResetFormat;
  /** Requests for which this returns true pass at once (no headers, nothing counted). @default none */
  skip?: (req: Req) => boolean | Promise<boolean>;
  /** Epoch-ms clock for `X-RateLimit-Reset` in `'epoch-seconds'`. @default Date.now */
  clock?: () => number;
  /** Called before a request waits, with the delay in ms and the decision. For logging and metrics. @default none */
  onDelayed?: (delayMs: number, decision: Decision, req: Req) => void;
}

const SLOW_DOWN_FIELDS = fieldsOf<SlowDownOptions<unknown>>({
  delay: true,
  maxDelay: true,
  headers: true,
  reset: true,
  skip: true,
  clock: true,
  onDelayed: true,
});

/** Everything a framework's slowDown needs, resolved once when it is built. */
export interface SlowDownSetup<Req> {
  limiter: Limiter;
  skip: ((req: Req) => boolean | Promise<boolean>) | undefined;
  onDelayed: ((delayMs: number, decision: Decision, req: Req) => void) | undefined;
  /** Header fields for a decision, in write order, without `Retry-After`. */
  headerFields: (decision: Decision) => HeaderField[];
  /** The delay a recorded decision earns, in ms (0 when no enforced rule is over its limit). */
  delayMs: (decision: Decision) => number;
  /** True when slowDown built the limiter from rules: the framework closes it with the app where it can. */
  owned: boolean;
  /** The untrusted-forwarded warning for the limiter's `'ip'` rules, as `rateLimit` gives it. */
  forwarded: ForwardedCheck;
}

/** Window types whose capacity is their `burst` (default: the limit), not their limit. */
const BUCKETS = new Set(['token-bucket', 'gcra', 'leaky-bucket']);

/**
 * Resolves slowDown's arguments once; a framework takes its own options out first, so any field
 * `SlowDownOptions` does not have is refused as a typo (ERR_UNKNOWN_FIELD). Rules with a lockout or
 * counting outcomes are refused: slowDown counts every request and never refuses one.
 */
export function slowDownSetup<Req>(
  rulesOrLimiter: Rule[] | Limiter,
  options: SlowDownOptions<Req>,
): SlowDownSetup<Req> {
  if (options === null || typeof options !== 'object')
    throw new RateLimitConfigError(
      'ERR_OPTION',
      `slowDown: expects options with a delay, such as { delay: '500ms' }, got ${describe(options)}`,
    );
  assertKnownFields(options, SLOW_DOWN_FIELDS, 'slowDown');
  const { delay, maxDelay, onDelayed, headers, reset, skip, clock } = options;
  const perRequestMs = typeof delay === 'function' ? undefined : delayOf(delay);
  const capMs =
    maxDelay === undefined
      ? MAX_DELAY_MS
      : Math.min(
          MAX_DELAY_MS,
          parseDuration(maxDelay) ??
            refuse(`maxDelay must be a duration such as '10s' or 10000, got ${describe(maxDelay)}`),
        );
  if (
    !Array.isArray(rulesOrLimiter) &&
    typeof (rulesOrLimiter as Partial<Limiter> | null)?.check !== 'function'
  )
    refuse(`expects an array of rules or a limiter from createLimiter, got ${describe(rulesOrLimiter)}`);
  // Checked before a limiter is built for them: a refused rule set leaves nothing behind.
  const rules = Array.isArray(rulesOrLimiter) ? rulesOrLimiter : rulesOrLimiter.rules;
  const capacities = new Map<string, number>();
  for (const rule of rules) {
    if (rule === null || typeof rule !== 'object') continue; // createLimiter names what is wrong with it
    if (rule.lockout !== undefined)
      refuse(`rule "${rule.name}" has a lockout, which refuses requests; slowDown only delays them`);
    if ((rule.countOn ?? 'all') !== 'all' || rule.resetOnSuccess === true)
      refuse(`rule "${rule.name}" counts outcomes (countOn, resetOnSuccess); slowDown counts every request`);
    if (rule.window?.type === 'concurrency' || rule.settle === true)
      refuse(`rule "${rule.name}" holds slots or settles its cost; slowDown counts requests as they arrive`);
    const burst = (rule.window as { burst?: unknown } | undefined)?.burst;
    if (BUCKETS.has(rule.window?.type) && typeof burst === 'number') capacities.set(rule.name, burst);
  }
  const base: Setup<Req> = createSetup(rulesOrLimiter, dropUndefined({ headers, reset, skip, clock }));
  const limiter = base.limiter;
  return {
    limiter,
    skip,
    onDelayed,
    headerFields: (decision) => base.headerFields(decision).filter(([name]) => name !== 'Retry-After'),
    delayMs(decision) {
      const over = overLimit(decision, capacities);
      if (over === 0) return 0;
      const ms =
        perRequestMs === undefined
          ? (delay as (o: number, d: Decision) => number)(over, decision)
          : perRequestMs * over;
      if (typeof ms !== 'number' || !(ms >= 0))
        throw new RateLimitRequestError(
          'ERR_DELAY',
          `slowDown: the delay function must return a number of ms, 0 or more, got ${describe(ms)}`,
        );
      return Math.min(Math.ceil(ms), capMs);
    },
    owned: Array.isArray(rulesOrLimiter),
    forwarded: base.forwarded,
  };
}

function refuse(detail: string): never {
  throw new RateLimitConfigError('ERR_OPTION', `slowDown: ${detail}`);
}

/** `delay` as ms per request over the limit: a number of ms (0 or more) or a duration string. */
function delayOf(delay: unknown): number {
  if (typeof delay === 'number' && Number.isFinite(delay) && delay >= 0) return delay;
  if (typeof delay === 'string') {
    const ms = parseDuration(delay);
    if (ms !== undefined) return ms;
  }
  if (delay === undefined)
    refuse("delay is required: ms per request over the limit (500, '500ms') or (over, decision) => ms");
  return refuse(
    `delay must be ms per request over the limit (500, '500ms') or (over, decision) => ms, got ${describe(delay)}`,
  );
}

/** The fields that are set: options of `exactOptionalPropertyTypes` types take no explicit undefined. */
function dropUndefined<T extends object>(value: T): { [K in keyof T]?: Exclude<T[K], undefined> } {
  return Object.fromEntries(Object.entries(value).filter(([, v]) => v !== undefined)) as {
    [K in keyof T]?: Exclude<T[K], undefined>;
  };
}

/**
 * How many units over its capacity the most exceeded enforced rule is after this request (a recorded
 * decision counts past the limit): 0 when none is over. A rule over its limit whose count is unknown (the
 * failure policy answered `'deny'`) counts as 1 over.
 */
export function overLimit(decision: Decision, capacities: ReadonlyMap<string, number>): number {
  let over = 0;
  for (const r of decision.rules) {
    if (r.allowed || r.dryRun) continue;
    over = Math.max(over, 1, r.count - (capacities.get(r.rule) ?? r.limit));
  }
  return over;
}

/**
 * Resolves true after `ms`, or false as soon as the client goes. `whenGone(cancel)` arranges for `cancel` to
 * be called when the client goes (at once if it has) and returns what undoes that arrangement; either way
 * the timer and the listener are gone when the promise settles.
 */
export function pause(ms: number, whenGone: (cancel: () => void) => () => void): Promise<boolean> {
  return new Promise((resolve) => {
    let settled = false;
    let timer: ReturnType<typeof setTimeout> | undefined;
    let undo: (() => void) | undefined;
    const finish = (waited: boolean) => {
      if (settled) return;
      settled = true;
      if (timer !== undefined) clearTimeout(timer);
      undo?.();
      resolve(waited);
    };
    undo = whenGone(() => finish(false));
    if (settled) undo();
    else timer = setTimeout(() => finish(true), ms);
  });
}

/**
 * One request through slowDown, on the framework's `HttpExchange`: a client gone is not counted; a skipped
 * one passes; otherwise every matching rule counts it (past its limit too), the headers are set, and a
 * request over a limit waits its delay. `'next'`: run the rest of the app; `'gone'`: the client left
 * (before the decision, during it, or during the wait), so the handler must not run and nothing is sent.
 */
export async function slowDownRequest<Req>(
  setup: SlowDownSetup<Req>,
  http: HttpExchange,
  request: Req,
): Promise<'next' | 'gone'> {
  if (clientGone(http.socket())) return 'gone';
  if (setup.skip !== undefined && (await setup.skip(request))) return 'next';
  const info = await http.info();
  const decision = await setup.limiter.recordRequest(info);
  if (clientGone(http.socket())) return 'gone';
  if (decision.rules.length === 0) return 'next';
  if (!setup.forwarded.done) setup.forwarded.check(info, decision, () => http.untrusted());
  if (!http.sent()) {
    for (const [name, value] of setup.headerFields(decision))
      http.header(name, value, appendsField(name, value));
  }
  const ms = setup.delayMs(decision);
  if (ms === 0) return 'next';
  setup.onDelayed?.(ms, decision, request);
  return (await pause(ms, (cancel) => http.whenGone(cancel))) ? 'next' : 'gone';
}
