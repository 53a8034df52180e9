// A window chosen per request (`window` as a function): read and checked for each request, as a limit
// function is (rules/rule-index.ts), into the store rule its ops carry. The stores and the algorithms read the
// size of each op's own rule, so the choice reaches the memory store, Lua and PL/pgSQL alike.
import { windowTypeOf } from '../algorithms/index.js';
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

/** The size of a window a function chose, checked against the rule's window. */
function chosenSize(value: unknown, rule: StoreRule): number {
  if (
    value === null ||
    typeof value !== 'object' ||
    typeof (value as PromiseLike<unknown>).then === 'function'
  )
    throw mustGive(rule, value);
  const w = value as Record<string, unknown>;
  if (windowTypeOf(w.type) !== rule.type) throw mustGive(rule, value);
  for (const name of Object.keys(w)) {
    if (name === 'type' || name === 'size') continue;
    // Only the size differs from request to request: the rest is the rule's (its burst, its buckets).
    if (name === 'burst' && w.burst === (rule.burst || undefined)) continue;
    throw refused(
      rule,
      `window function must give only type and size, got ${describe(name)} in ${describe(value)}`,
    );
  }
  const sizeMs = parsePeriod(w.size);
  if (sizeMs === undefined || sizeMs > MAX_CHOSEN_WINDOW_MS) {
    throw refused(
      rule,
      `window function must give a size from 1s to 10 years, such as '1h', got ${describe(w.size)}`,
    );
  }
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

function mustGive(rule: StoreRule, value: unknown): RateLimitRequestError {
  return refused(
    rule,
    `window function must give a window of the rule's type synchronously, such as { type: '${rule.type}', size: '1h' }, got ${describe(value)}`,
  );
}

function refused(rule: StoreRule, problem: string, cause?: unknown): RateLimitRequestError {
  return new RateLimitRequestError(
    'ERR_WINDOW',
    `rule "${rule.name}": ${problem}; nothing was consumed`,
    cause === undefined ? undefined : { cause },
  );
}
