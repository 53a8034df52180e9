// A window chosen per request (`window` as a function): read and checked for each request, as a limit
// function is (rules/rule-index.ts), into the store rule its ops carry (a calendar's: into the periods its
// ops carry). The stores and the algorithms read the size (the period's end) of each op, so the choice
// reaches the memory store, Lua and PL/pgSQL alike.
import { windowKind, windowTypeOf } from '../algorithms/index.js';
import { refusal } from '../config/refuse.js';
import { describe, RateLimitConfigError, RateLimitRequestError } from '../errors.js';
import type { StoreRule } from '../stores/store-ops.js';
import type { RequestInfo, WindowFunction } from '../types.js';
import type { PeriodFn } from './calendar.js';
import { parsePeriod } from './duration.js';
import { exceedsExactMath } from './rule-index.js';
import { calendarPeriods, calendarSeconds } from './window.js';

/**
 * The longest window a function may choose: ten years. Every stored time (a window's end,
 * a GCRA TAT in µs) then stays an exact integer for centuries; a longer window is a mistake (2^60 ms).
 */
export const MAX_CHOSEN_WINDOW_MS = 10 * 365 * 86_400_000;

/** Choices kept per rule: a few plans' sizes (or periods), so each op need not make its own. */
const MAX_CACHED_CHOICES = 32;

/** A rule whose window is chosen per request: its store rule (the window of direct calls) and the function. */
export interface ChosenWindow {
  readonly store: StoreRule;
  readonly choose: WindowFunction;
  /** By size (ms), or by a calendar's unit, cron and zone (see calendarChoice). */
  readonly choices: Map<number | string, WindowChoice>;
}

/** The window a request chose: what its op carries. */
export interface WindowChoice {
  /** The rule with the chosen size (its other fields are the rule's); a calendar's is the rule's own. */
  readonly store: StoreRule;
  /** A calendar's periods as chosen; undefined for other types. */
  readonly periods: PeriodFn | undefined;
  /** Whole seconds, for the client's `w` in `RateLimit-Policy` (0: a cron's periods have no one length). */
  readonly windowSeconds: number;
}

/**
 * The window of `req` for a rule whose window is chosen. Throws `ERR_WINDOW` naming the rule, before
 * anything is consumed.
 */
export function requestWindow(chosen: ChosenWindow, req: RequestInfo): WindowChoice {
  const { store } = chosen;
  try {
    const value = chosen.choose(req);
    return periodic(store) ? calendarChoice(chosen, value) : sizeChoice(chosen, value);
  } catch (error) {
    if (error instanceof RateLimitRequestError && error.code === 'ERR_WINDOW') throw error;
    // Thrown by the function, or by its answer as it was read (a getter, a proxy).
    throw refused(store, `window function threw: ${(error as Error)?.message ?? describe(error)}`, error);
  }
}

/** A window of wall-clock periods (calendar): chosen by its unit, cron and zone rather than a size. */
function periodic(rule: StoreRule): boolean {
  return windowKind(rule.type).fields.includes('unit');
}

function sizeChoice(chosen: ChosenWindow, value: unknown): WindowChoice {
  const { store } = chosen;
  const sizeMs = chosenSize(value, store);
  let choice = chosen.choices.get(sizeMs);
  if (choice === undefined) {
    choice = {
      store: sizeMs === store.sizeMs ? store : { ...store, sizeMs },
      periods: undefined,
      windowSeconds: Math.max(1, Math.ceil(sizeMs / 1000)),
    };
    if (chosen.choices.size < MAX_CACHED_CHOICES) chosen.choices.set(sizeMs, choice);
  }
  return choice;
}

/** A calendar window a function chose: another unit, cron or zone (the periods its ops carry), checked as a rule's. */
function calendarChoice(chosen: ChosenWindow, value: unknown): WindowChoice {
  const { store } = chosen;
  const w = windowOfType(value, store);
  assertOnly(w, ['unit', 'cron', 'timezone'], store, value);
  const { unit, cron, timezone } = w;
  const key = `${typeof unit}:${String(unit)}\n${typeof cron}:${String(cron)}\n${typeof timezone}:${String(timezone)}`;
  let choice = chosen.choices.get(key);
  if (choice !== undefined) return choice;
  let periods: PeriodFn;
  try {
    periods = calendarPeriods(w, 'a calendar window', (code, field, allowed, got) => {
      throw new RateLimitConfigError(code, `${field} must be ${allowed}, got ${describe(got)}`);
    });
  } catch (error) {
    if (!(error instanceof RateLimitConfigError)) throw error;
    throw refused(store, `window function gave a bad calendar window: ${error.message}`);
  }
  choice = { store, periods, windowSeconds: calendarSeconds(w) };
  if (chosen.choices.size < MAX_CACHED_CHOICES) chosen.choices.set(key, choice);
  return choice;
}

/** The error of a refused window: the rule and the problem go into its message. */
type WindowRefusal = (problem: string) => Error;

/** The window a function gave (or an override set), as an object of the rule's type. */
function windowOfType(
  value: unknown,
  rule: StoreRule,
  fail: WindowRefusal = (problem) => refused(rule, problem),
  who = 'window function',
): Record<string, unknown> {
  if (
    value === null ||
    typeof value !== 'object' ||
    typeof (value as PromiseLike<unknown>).then === 'function'
  )
    throw fail(mustGive(rule, value, who));
  const w = value as Record<string, unknown>;
  if (windowTypeOf(w.type) !== rule.type) throw fail(mustGive(rule, value, who));
  return w;
}

/** Only `type` and the fields that may differ between requests. */
function assertOnly(
  w: Record<string, unknown>,
  fields: readonly string[],
  rule: StoreRule,
  value: unknown,
): void {
  for (const name of Object.keys(w)) {
    if (name === 'type' || fields.includes(name)) continue;
    throw refused(
      rule,
      `window function must give only type and ${fields.join(', ')}, got ${describe(name)} in ${describe(value)}`,
    );
  }
}

/** The size of a window a function chose (or an override set), checked against the rule's window. */
function chosenSize(
  value: unknown,
  rule: StoreRule,
  fail: WindowRefusal = (problem) => refused(rule, problem),
  who = 'window function',
): number {
  const w = windowOfType(value, rule, fail, who);
  for (const name of Object.keys(w)) {
    if (name === 'type' || name === 'size') continue;
    // Only the size differs from request to request: the rest is the rule's (its burst, its buckets).
    if (name === 'burst' && w.burst === (rule.burst || undefined)) continue;
    throw fail(`${who} ${mustHave(who)} only type and size, got ${describe(name)} in ${describe(value)}`);
  }
  const sizeMs = parsePeriod(w.size);
  if (sizeMs === undefined || sizeMs > MAX_CHOSEN_WINDOW_MS) {
    throw fail(`${who} ${mustHave(who)} a size from 1s to 10 years, such as '1h', got ${describe(w.size)}`);
  }
  return sizeMs;
}

/**
 * The window size of a key's override (`limiter.override(rule, key, { window })`), checked as a window
 * function's answer is, for the rule's window kind: a kind whose size cannot be chosen (`WindowKind.unchosen`),
 * or whose periods are chosen by unit, cron and zone rather than a size (calendar), is refused with its reason.
 * `limit`: the override's, else the rule's number (undefined: a function), which a GCRA window must hold
 * exactly. A bad one is a `RateLimitConfigError` (`ERR_WINDOW`) naming the rule.
 */
export function overrideWindowMs(value: unknown, rule: StoreRule, limit: number | undefined): number {
  const where = `override: rule "${rule.name}"`;
  const fail: WindowRefusal = (problem) => refusal('ERR_WINDOW', where, `${problem}; nothing was stored`);
  const reason = periodic(rule)
    ? 'its periods are set by unit, cron and timezone, not a size (a window function may choose them per client)'
    : windowKind(rule.type).unchosen;
  if (reason !== undefined) throw fail(`an override cannot carry a window of this rule's type: ${reason}`);
  const sizeMs = chosenSize(value, rule, fail, 'window');
  if (limit !== undefined && exceedsExactMath(limit, { ...rule, sizeMs }))
    throw fail(
      `window of ${sizeMs} ms is too long for a limit of ${limit}: max(limit, burst) × size in µs must stay at most 2^52 for GCRA`,
    );
  return sizeMs;
}

/**
 * A limit that this op's window cannot hold exactly (GCRA: max(limit, burst) × size in µs at most 2^52), for
 * the limit read for the request: `ERR_WINDOW`, nothing consumed.
 */
export function assertChosenHolds(rule: StoreRule, limit: number): void {
  if (exceedsExactMath(limit, rule))
    throw refused(
      rule,
      `window function chose ${rule.sizeMs} ms, too long for a limit of ${limit}: max(limit, burst) × size in µs must stay at most 2^52 for GCRA`,
    );
}

function mustGive(rule: StoreRule, value: unknown, who = 'window function'): string {
  const example = periodic(rule) ? "unit: 'hour'" : "size: '1h'";
  const what =
    who === 'window function'
      ? "must give a window of the rule's type synchronously"
      : "must be a window of the rule's type";
  return `${who} ${what}, such as { type: '${rule.type}', ${example} }, got ${describe(value)}`;
}

/** A function gives a window; an override's window has its fields. */
function mustHave(who: string): string {
  return who === 'window function' ? 'must give' : 'must have';
}

function refused(rule: StoreRule, problem: string, cause?: unknown): RateLimitRequestError {
  return new RateLimitRequestError(
    'ERR_WINDOW',
    `rule "${rule.name}": ${problem}; nothing was consumed`,
    cause === undefined ? undefined : { cause },
  );
}
