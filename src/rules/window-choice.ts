// A window chosen per request (`window` as a function): read and checked for each request, as a limit
// function is (rules/rule-index.ts), into the store rule its ops carry. The stores and the algorithms read the
// size of each op's own rule, so the choice reaches the memory store, Lua and PL/pgSQL alike.
import { windowKind, windowTypeOf } from '../algorithms/index.js';
import { refusal } from '../config/refuse.js';
import { describe, RateLimitRequestError } from '../errors.js';
import type { StoreRule } from '../stores/store-ops.js';
import type { RequestInfo, WindowFunction } from '../types.js';
import { parsePeriod } from './duration.js';
import { exceedsExactMath } from './rule-index.js';

/**
 * The longest window a function may choose: ten years. Every stored time (a window's end,
 * a GCRA TAT in µs) then stays an exact integer for centuries; a longer window is a mistake (2^60 ms).
 */
export const MAX_CHOSEN_WINDOW_MS = 10 * 365 * 86_400_000;

/** Store rules of each size chosen, per rule: a few plans' sizes, so each op need not make its own. */
const MAX_CACHED_SIZES = 32;

/** A rule whose window is chosen per request: its store rule (the window of direct calls) and the function. */
export interface ChosenWindow {
  readonly store: StoreRule;
  readonly choose: WindowFunction;
  readonly sizes: Map<number, StoreRule>;
}

/**
 * The store rule of `req` for a rule whose window is chosen: the rule with the chosen size (its other fields
 * are the rule's). Throws `ERR_WINDOW` naming the rule, before anything is consumed.
 */
export function requestWindow(chosen: ChosenWindow, req: RequestInfo): StoreRule {
  const { store } = chosen;
  let sizeMs: number;
  try {
    sizeMs = chosenSize(chosen.choose(req), store);
  } catch (error) {
    if (error instanceof RateLimitRequestError && error.code === 'ERR_WINDOW') throw error;
    // Thrown by the function, or by its answer as it was read (a getter, a proxy).
    throw refused(store, `window function threw: ${(error as Error)?.message ?? describe(error)}`, error);
  }
  if (sizeMs === store.sizeMs) return store;
  let rule = chosen.sizes.get(sizeMs);
  if (rule === undefined) {
    rule = { ...store, sizeMs };
    if (chosen.sizes.size < MAX_CACHED_SIZES) chosen.sizes.set(sizeMs, rule);
  }
  return rule;
}

/** The error of a refused window: the rule and the problem go into its message. */
type WindowRefusal = (problem: string) => Error;

/** The size of a window a function chose (or an override set), checked against the rule's window. */
function chosenSize(
  value: unknown,
  rule: StoreRule,
  fail: WindowRefusal = (problem) => refused(rule, problem),
  who = 'window function',
): number {
  if (
    value === null ||
    typeof value !== 'object' ||
    typeof (value as PromiseLike<unknown>).then === 'function'
  )
    throw fail(mustGive(rule, value, who));
  const w = value as Record<string, unknown>;
  if (windowTypeOf(w.type) !== rule.type) throw fail(mustGive(rule, value, who));
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
 * function's answer is, for the rule's window kind: a kind whose size cannot be chosen (`WindowKind.unchosen`)
 * is refused with its reason. `limit`: the override's, else the rule's number (undefined: a function),
 * which a GCRA window must hold exactly. A bad one is a `RateLimitConfigError` (`ERR_WINDOW`) naming the rule.
 */
export function overrideWindowMs(value: unknown, rule: StoreRule, limit: number | undefined): number {
  const where = `override: rule "${rule.name}"`;
  const fail: WindowRefusal = (problem) => refusal('ERR_WINDOW', where, `${problem}; nothing was stored`);
  const reason = windowKind(rule.type).unchosen;
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

function mustGive(rule: StoreRule, value: unknown, who: string): string {
  const what =
    who === 'window function'
      ? "must give a window of the rule's type synchronously"
      : "must be a window of the rule's type";
  return `${who} ${what}, such as { type: '${rule.type}', size: '1h' }, got ${describe(value)}`;
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
