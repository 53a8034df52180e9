// Options of the calls that decide outside HTTP (`override`, `acquire`, `wrap` and `@limited`), checked
// once per call (per wrap), defaults from defaults.ts.

import { assertKnownFields, fieldsOf } from '../config/known-fields.js';
import { ACQUIRE_DEFAULTS, OVERRIDE_DEFAULTS, WRAP_DEFAULTS } from '../defaults.js';
import { describe, RateLimitConfigError } from '../errors.js';
import { parseDuration, parsePeriod, periodAllowed } from '../rules/duration.js';
import type { Duration } from '../types.js';

export interface OverrideOptions {
  /**
   * The override expires this long after it is set (store clock), and the rule's own limit applies
   * again. Setting the key again starts over.
   * @default undefined: until cleared with `null`
   * @example { for: '1h' }
   */
  for?: Duration | undefined;
}

export interface AcquireOptions {
  /** Units this call takes. @default 1 */
  cost?: number | undefined;
  /**
   * Longest wait for a turn. When the earliest admission is later, `acquire` rejects at once with
   * `RateLimitExceededError`; 0 takes a turn only if one is free now.
   * @default Infinity
   */
  maxWait?: Duration | undefined;
  /** Ends the wait: `acquire` rejects with the signal's reason (an `AbortError` by default). */
  signal?: AbortSignal | undefined;
}

/** `(...args)` of the wrapped function. */
export interface WrapOptions<A extends unknown[]> {
  /** The rule, or rules decided together (all consume or none does), by name. */
  rules: string | readonly string[];
  /**
   * The key, from the arguments: a template such as `'{0.email}'`, `'{1}'` or `'user:{0.id}'` (argument
   * index, then own fields), or a function of the arguments. The string it gives is the key itself,
   * the one `status`, `reset` and `override` take.
   */
  key: string | ((...args: A) => string | number);
  /** Units a call takes: a non-negative integer or a function of the arguments. @default 1 */
  cost?: number | ((...args: A) => number) | undefined;
  /**
   * Wait up to this long for a turn instead of throwing at once (as `acquire` does).
   * @default 0: a denied call throws `RateLimitExceededError`
   */
  wait?: Duration | undefined;
}

const OVERRIDE_FIELDS = fieldsOf<OverrideOptions>({ for: true });
const ACQUIRE_FIELDS = fieldsOf<AcquireOptions>({ cost: true, maxWait: true, signal: true });
const WRAP_FIELDS = fieldsOf<WrapOptions<unknown[]>>({ rules: true, key: true, cost: true, wait: true });

export interface ResolvedAcquire {
  cost: number;
  maxWaitMs: number;
  signal: AbortSignal | undefined;
}

export function overrideForMs(options: OverrideOptions | undefined): number | undefined {
  const given = checkedFields(options, OVERRIDE_FIELDS, 'override');
  if (given.for === undefined) return OVERRIDE_DEFAULTS.forMs;
  return parsePeriod(given.for) ?? refuse('override', 'for', periodAllowed(given.for, '1h'), given.for);
}

export function resolveAcquire(options: AcquireOptions | undefined): ResolvedAcquire {
  const given = checkedFields(options, ACQUIRE_FIELDS, 'acquire');
  const signal = given.signal;
  if (signal !== undefined && !(signal instanceof AbortSignal))
    refuse('acquire', 'signal', 'an AbortSignal', signal);
  return {
    cost: given.cost ?? ACQUIRE_DEFAULTS.cost,
    maxWaitMs: waitMs(given.maxWait, 'acquire', 'maxWait') ?? ACQUIRE_DEFAULTS.maxWaitMs,
    signal,
  };
}

/** The wrap options with their defaults; `rules` as a list, `wait` in ms. */
export function resolveWrap<A extends unknown[]>(
  options: WrapOptions<A>,
): {
  rules: string[];
  key: WrapOptions<A>['key'];
  cost: NonNullable<WrapOptions<A>['cost']>;
  waitMs: number;
} {
  const given = checkedFields(options, WRAP_FIELDS, 'wrap');
  if (given === EMPTY) refuse('wrap', 'options', 'an object with rules and key', options);
  const rules = typeof given.rules === 'string' ? [given.rules] : given.rules;
  if (!Array.isArray(rules) || rules.length === 0 || rules.some((r) => typeof r !== 'string'))
    refuse('wrap', 'rules', 'a rule name or a non-empty array of rule names', given.rules);
  if (typeof given.key !== 'string' && typeof given.key !== 'function')
    refuse('wrap', 'key', `a template such as '{0.email}' or a function of the arguments`, given.key);
  const cost = given.cost ?? WRAP_DEFAULTS.cost;
  if (typeof cost !== 'function' && (!Number.isSafeInteger(cost) || cost < 0))
    refuse('wrap', 'cost', 'a non-negative integer or a function of the arguments', cost);
  return {
    rules: [...(rules as string[])],
    key: given.key,
    cost,
    waitMs: waitMs(given.wait, 'wrap', 'wait') ?? WRAP_DEFAULTS.waitMs,
  };
}

/** A wait bound: a duration, 0 (no waiting) or Infinity (no bound); undefined when not given. */
function waitMs(value: Duration | undefined, where: string, field: string): number | undefined {
  if (value === undefined) return undefined;
  if (value === 0 || value === Number.POSITIVE_INFINITY) return value;
  return (
    parseDuration(value) ?? refuse(where, field, `a duration such as '5s' or 5000, 0 or Infinity`, value)
  );
}

const EMPTY = Object.freeze({});

/** The options object, its fields checked against `allowed` (absent options read as empty). */
function checkedFields<T extends object>(
  options: T | undefined,
  allowed: readonly string[],
  where: string,
): Partial<T> {
  if (options === undefined) return EMPTY;
  if (options === null || typeof options !== 'object' || Array.isArray(options))
    refuse(where, 'options', 'an object', options);
  assertKnownFields(options, allowed, where);
  return options;
}

function refuse(where: string, field: string, allowed: string, value: unknown): never {
  throw new RateLimitConfigError(
    'ERR_OPTION',
    `${where}: ${field} must be ${allowed}, got ${describe(value)}`,
  );
}
