// Limits: a rule's number or limit function, checked at construction, read and checked per request.

import { type StoreRule, windowKind } from '../algorithms/index.js';
import { mustBe, refuse } from '../config/refuse.js';
import { describe, RateLimitRequestError } from '../errors.js';
import type { LimitFunction, RequestInfo } from '../types.js';

/**
 * What a limit function sees on direct calls (`consume`, `record`, `status`, `acquire`, `wrap`), which
 * have no request: no user, no headers. A limit function answers it with the limit of an unknown
 * caller (a free plan), or throws, which refuses the call.
 */
export const DIRECT_REQUEST: Readonly<RequestInfo> = Object.freeze({
  method: '',
  path: '',
  headers: Object.freeze({}),
});

const POSITIVE = 'a positive integer';

/**
 * Why `limit` cannot be a limit of `rule`, or undefined when it can: a positive safe integer, and within
 * the bound of its window's exact arithmetic where it has one (max(limit, burst) × size in µs: token
 * bucket below 2^53, GCRA at most 2^52).
 */
export function limitProblem(limit: unknown, rule: StoreRule): string | undefined {
  if (typeof limit !== 'number' || !Number.isSafeInteger(limit) || limit < 1) return POSITIVE;
  if (!exceedsExactMath(limit, rule)) return undefined;
  const most = windowKind(rule.type).maxLimit?.(rule.sizeMs);
  return `at most ${most} for a ${rule.type} window of ${rule.sizeMs} ms (max(limit, burst) × size in µs must stay below 2^53 for a token bucket, at most 2^52 for GCRA)`;
}

/** Whether this limit (with the rule's explicit burst) is past what the window's exact arithmetic holds. */
export function exceedsExactMath(limit: number, rule: Pick<StoreRule, 'type' | 'burst' | 'sizeMs'>): boolean {
  const most = windowKind(rule.type).maxLimit?.(rule.sizeMs);
  return most !== undefined && Math.max(limit, rule.burst) > most;
}

/** The limit of one request (or direct call) for a rule, checked: a number, or a promise of one. */
export function requestLimit(
  limit: number | LimitFunction,
  rule: StoreRule,
  req: RequestInfo,
): number | Promise<number> {
  if (typeof limit === 'number') return limit;
  let value: unknown;
  try {
    value = limit(req);
  } catch (error) {
    throw failed(rule, 'threw', error);
  }
  if (
    value !== null &&
    typeof value === 'object' &&
    typeof (value as PromiseLike<unknown>).then === 'function'
  ) {
    return Promise.resolve(value as PromiseLike<unknown>).then(
      (settled) => checked(settled, rule),
      (error: unknown) => {
        throw failed(rule, 'rejected', error);
      },
    );
  }
  return checked(value, rule);
}

function checked(value: unknown, rule: StoreRule): number {
  const problem = limitProblem(value, rule);
  if (problem === undefined) return value as number;
  throw new RateLimitRequestError(
    'ERR_LIMIT',
    `rule "${rule.name}": limit function must give ${problem}, got ${describe(value)}; nothing was consumed`,
  );
}

function failed(rule: StoreRule, how: 'threw' | 'rejected', error: unknown): RateLimitRequestError {
  return new RateLimitRequestError(
    'ERR_LIMIT',
    `rule "${rule.name}": limit function ${how}: ${(error as Error)?.message ?? describe(error)}; nothing was consumed`,
    { cause: error },
  );
}

/** The limit an operator sets with `limiter.override`: null clears; a bad one is a `RateLimitConfigError`. */
export function overrideLimit(limit: unknown, rule: StoreRule): number | null {
  if (limit === null) return null;
  const problem = limitProblem(limit, rule);
  if (problem === undefined) return limit as number;
  const allowed = problem === POSITIVE ? `${POSITIVE} or null` : problem;
  return refuse('ERR_LIMIT', `override: rule "${rule.name}"`, mustBe('limit', allowed, limit));
}

/**
 * The rule-wide limit an operator sets with `limiter.setLimit`: null returns to the configured limit; a
 * bad one is a `RateLimitConfigError`. 0 is refused rather than read as "refuse all": a token bucket or
 * GCRA window has no rate at 0 (its retry-after would be infinite), and the headers would promise
 * nothing; a limit of 1 is the smallest that every window type answers exactly.
 */
export function ruleWideLimit(limit: unknown, rule: StoreRule): number | null {
  if (limit === null) return null;
  const problem = limitProblem(limit, rule);
  if (problem === undefined) return limit as number;
  const allowed =
    problem === POSITIVE
      ? `${POSITIVE} or null (0 is refused: 1 is the smallest limit every window type answers)`
      : problem;
  return refuse('ERR_LIMIT', `setLimit: rule "${rule.name}"`, mustBe('limit', allowed, limit));
}
