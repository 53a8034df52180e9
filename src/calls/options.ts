// Options of the calls that decide outside HTTP (`override`, `acquire`, `wrap` and `@limited`), checked
// once per call (per wrap), defaults from defaults.ts.

import { assertKnownFields, fieldsOf } from '../config/known-fields.js';
import { mustBe, refuse } from '../config/refuse.js';
import { ACQUIRE_DEFAULTS, OVERRIDE_DEFAULTS, WRAP_DEFAULTS } from '../defaults.js';
import { parseDuration, parsePeriod, periodAllowed } from '../rules/duration.js';
import type { Duration, WindowSpec } from '../types.js';

export interface OverrideOptions {
  /**
   * The override expires this long after it is set (store clock), and the rule's own limit applies
   * again. Setting the key again starts over.
   * @default undefined: until cleared with `null`
   * @example { for: '1h' }
   */
  for?: Duration | undefined;
}

/**
 * What `limiter.override` sets for one key of one rule, in place of a bare limit: its limit, its window, or
 * both. A window-only override leaves the limit to the rule-wide limit, else the rule's.
 * @example { limit: 5000, window: { type: 'fixed', size: '10s' } }
 */
export interface KeyOverride {
  /** The key's limit (a positive integer). @default undefined: the rule-wide limit, else the rule's */
  limit?: number | undefined;
  /**
   * The key's window: of the rule's type, only `size` differing (the types whose size a `window` function
   * may choose: fixed and GCRA). It wins over the rule's window and its `window` function, from the key's
   * next window on: the window in progress keeps its size.
   * @default undefined: the rule's window
   * @example { type: 'fixed', size: '10s' }
   */
  window?: WindowSpec | undefined;
}

/** How long a call waits for its turn, and what ends the wait: the options `acquire` and `wrap` share. */
export interface WaitOptions {
  /**
   * Longest wait for a turn. When the earliest admission is later, the call is refused at once with
   * `RateLimitExceededError`, without waiting; 0 takes a turn only if one is free now.
   * @default Infinity for `acquire`; 0 for `wrap` (a denied call throws at once)
   * @example { maxWait: '30s' }
   */
  maxWait?: Duration | undefined;
  /**
   * Ends the wait: the call rejects with the signal's reason (an `AbortError` by default) and leaves
   * the queue at once. A call made after the signal aborted rejects without deciding.
   * @default undefined: only `maxWait` and `limiter.close()` end a wait
   */
  signal?: AbortSignal | undefined;
  /**
   * Most calls waiting for a turn on the same rules and key in this process; one more is refused at
   * once with `RateLimitRequestError` (code `ERR_QUEUE_FULL`), consuming nothing.
   * @default 10000
   */
  maxQueue?: number | undefined;
}

export interface AcquireOptions extends WaitOptions {
  /** Units this call takes. @default 1 */
  cost?: number | undefined;
}

/** `(...args)` of the wrapped function. */
export interface WrapOptions<A extends unknown[]> extends WaitOptions {
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
   * The same as `maxWait` (its name before `acquire` and `wrap` shared one vocabulary); give one of
   * the two.
   * @deprecated use `maxWait`
   * @default 0
   */
  wait?: Duration | undefined;
}

const OVERRIDE_FIELDS = fieldsOf<OverrideOptions>({ for: true });
/** The fields of a `KeyOverride`, for its check (rules/rule-index.ts keyOverride). */
export const KEY_OVERRIDE_FIELDS = fieldsOf<KeyOverride>({ limit: true, window: true });
const ACQUIRE_FIELDS = fieldsOf<AcquireOptions>({ cost: true, maxWait: true, signal: true, maxQueue: true });
const WRAP_FIELDS = fieldsOf<WrapOptions<unknown[]>>({
  rules: true,
  key: true,
  cost: true,
  maxWait: true,
  wait: true,
  signal: true,
  maxQueue: true,
});

/** A wait, resolved: how long at most, what ends it, how many may wait. */
export interface ResolvedWait {
  maxWaitMs: number;
  signal: AbortSignal | undefined;
  maxQueue: number;
}

export interface ResolvedAcquire extends ResolvedWait {
  rules: string[];
  cost: number;
}

export interface ResolvedWrap<A extends unknown[]> extends ResolvedWait {
  rules: string[];
  key: WrapOptions<A>['key'];
  cost: NonNullable<WrapOptions<A>['cost']>;
}

/** The `for` of `override` (or `setLimit`, named by `where`) in ms; undefined: until cleared. */
export function overrideForMs(options: OverrideOptions | undefined, where = 'override'): number | undefined {
  const given = checkedFields(options, OVERRIDE_FIELDS, where);
  if (given.for === undefined) return OVERRIDE_DEFAULTS.forMs;
  return parsePeriod(given.for) ?? badOption(where, 'for', periodAllowed(given.for, '1h'), given.for);
}

/** `acquire`'s rule or rules and options with their defaults. */
export function resolveAcquire(
  ruleOrRules: string | readonly string[],
  options: AcquireOptions | undefined,
): ResolvedAcquire {
  const given = checkedFields(options, ACQUIRE_FIELDS, 'acquire');
  return {
    rules: ruleNames(ruleOrRules, 'acquire', 'rules'),
    cost: given.cost ?? ACQUIRE_DEFAULTS.cost,
    ...resolveWait(given, given.maxWait, 'maxWait', ACQUIRE_DEFAULTS, 'acquire'),
  };
}

/** The wrap options with their defaults; `rules` as a list, `maxWait` (or `wait`) in ms. */
export function resolveWrap<A extends unknown[]>(options: WrapOptions<A>): ResolvedWrap<A> {
  const given = checkedFields(options, WRAP_FIELDS, 'wrap');
  if (given === EMPTY) badOption('wrap', 'options', 'an object with rules and key', options);
  const rules = ruleNames(given.rules as WrapOptions<A>['rules'], 'wrap', 'rules');
  if (typeof given.key !== 'string' && typeof given.key !== 'function')
    badOption('wrap', 'key', `a template such as '{0.email}' or a function of the arguments`, given.key);
  const cost = given.cost ?? WRAP_DEFAULTS.cost;
  if (typeof cost !== 'function' && (!Number.isSafeInteger(cost) || cost < 0))
    badOption('wrap', 'cost', 'a non-negative integer or a function of the arguments', cost);
  if (given.maxWait !== undefined && given.wait !== undefined)
    badOption('wrap', 'wait', 'left out when maxWait is given (it is the same option)', given.wait);
  const [bound, field] = given.wait === undefined ? [given.maxWait, 'maxWait'] : [given.wait, 'wait'];
  return { rules, key: given.key, cost, ...resolveWait(given, bound, field, WRAP_DEFAULTS, 'wrap') };
}

/** One rule name or a non-empty list of them, as a list. */
function ruleNames(value: string | readonly string[], where: string, field: string): string[] {
  const rules = typeof value === 'string' ? [value] : value;
  if (!Array.isArray(rules) || rules.length === 0 || rules.some((r) => typeof r !== 'string'))
    badOption(where, field, 'a rule name or a non-empty array of rule names', value);
  return [...(rules as string[])];
}

function resolveWait(
  given: WaitOptions,
  bound: Duration | undefined,
  field: string,
  defaults: { maxWaitMs: number; maxQueue: number },
  where: string,
): ResolvedWait {
  const signal = given.signal;
  if (signal !== undefined && !(signal instanceof AbortSignal))
    badOption(where, 'signal', 'an AbortSignal', signal);
  const maxQueue = given.maxQueue ?? defaults.maxQueue;
  if (!Number.isSafeInteger(maxQueue) || maxQueue < 1)
    badOption(where, 'maxQueue', 'a positive integer', maxQueue);
  return { maxWaitMs: waitMs(bound, where, field) ?? defaults.maxWaitMs, signal, maxQueue };
}

/** A wait bound: a duration, 0 (no waiting) or Infinity (no bound); undefined when not given. */
function waitMs(value: Duration | undefined, where: string, field: string): number | undefined {
  if (value === undefined) return undefined;
  if (value === 0 || value === Number.POSITIVE_INFINITY) return value;
  return (
    parseDuration(value) ?? badOption(where, field, `a duration such as '5s' or 5000, 0 or Infinity`, value)
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
    badOption(where, 'options', 'an object', options);
  assertKnownFields(options, allowed, where);
  return options;
}

function badOption(where: string, field: string, allowed: string, value: unknown): never {
  return refuse('ERR_OPTION', where, mustBe(field, allowed, value));
}
