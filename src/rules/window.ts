// A rule's window, validated and normalized: its type, and each field its type takes (src/algorithms/<type>.ts
// lists them): its length in ms, buckets or burst, calendar periods.

import { algorithms, WINDOW_NAMES, windowKind, windowTypeOf } from '../algorithms/index.js';
import { CRON_FIELDS, cronFieldCount } from '../config/hints.js';
import { assertKnownFields } from '../config/known-fields.js';
import { type FieldRefusal, mustBe, refuse } from '../config/refuse.js';
import { RULE_DEFAULTS } from '../defaults.js';
import { describe } from '../errors.js';
import type { LimitFunction, WindowFunction, WindowType } from '../types.js';
import { assertCron, CALENDAR_UNITS, createPeriodFn, isValidTimeZone, type PeriodFn } from './calendar.js';
import { parsePeriod, periodAllowed } from './duration.js';
import { DIRECT_REQUEST, exceedsExactMath } from './rule-index.js';

/** The shortest lease a concurrency window takes. */
const MIN_LEASE_MS = 1000;

/** A window as the algorithms need it; fields a type does not use are 0. */
export interface CompiledWindow {
  readonly type: WindowType;
  readonly sizeMs: number;
  readonly buckets: number;
  readonly burst: number;
  /** Calendar windows only. */
  readonly periods: PeriodFn | undefined;
  /** Whole seconds of the window, for the `w` parameter of `RateLimit-Policy` (0 when not fixed-length). */
  readonly windowSeconds: number;
  /** A window chosen per request (rules/window-choice.ts); the fields above are its choice for a direct call. */
  readonly choose?: WindowFunction;
}

/** Every field some window type takes: with an unknown type, `typ` still finds `type`. */
const ANY_WINDOW_FIELD = ['type', ...new Set(Object.values(algorithms).flatMap((a) => a.kind.fields))];

/** Nominal length of calendar units, for the `w` of `RateLimit-Policy` (a month as 30 days). */
const UNIT_SECONDS: Record<string, number> = {
  minute: 60,
  hour: 3600,
  day: 86400,
  week: 604800,
  month: 2592000,
};

/** Validates a rule's `window`; `where` and `fail` name the rule in every message. */
export function compileWindow(
  window: unknown,
  limit: number | LimitFunction,
  where: string,
  fail: FieldRefusal,
): CompiledWindow {
  if (typeof window === 'function') return compileChosen(window as WindowFunction, limit, where, fail);
  if (window === null || typeof window !== 'object')
    fail(
      'ERR_WINDOW',
      'window',
      `an object with a type (one of ${WINDOW_NAMES.map((t) => `'${t}'`).join(', ')}), such as ${windowFor(window)}`,
      window,
    );
  const w = window as Record<string, unknown>;
  const type = windowTypeOf(w.type);
  const fields = type === undefined ? undefined : windowKind(type).fields;
  assertKnownFields(w, fields === undefined ? ANY_WINDOW_FIELD : ['type', ...fields], where, 'window');
  if (type === undefined || fields === undefined) {
    const problem = mustBe('window.type', `one of ${WINDOW_NAMES.map((t) => `'${t}'`).join(', ')}`, w.type);
    // `{ size: 60 }` has two slips: both are said at once, so that fixing the type does not meet the other.
    const size =
      w.size !== undefined && parsePeriod(w.size) === undefined
        ? `; and ${mustBe('window.size', periodAllowed(w.size, '1d', true), w.size)}`
        : '';
    return refuse('ERR_WINDOW', where, problem + size);
  }

  // Each field the type takes, validated; the others stay 0.
  let sizeMs = 0;
  let buckets = 0;
  let burst = 0;
  let periods: PeriodFn | undefined;
  if (fields.includes('unit')) periods = calendarPeriods(w, where, fail);
  if (fields.includes('lease')) sizeMs = leaseMs(w.lease, fail);
  if (fields.includes('size')) {
    sizeMs =
      parsePeriod(w.size) ?? fail('ERR_DURATION', 'window.size', periodAllowed(w.size, '1d', true), w.size);
  }
  if (fields.includes('buckets')) {
    buckets = (w.buckets as number | undefined) ?? RULE_DEFAULTS.slidingBuckets;
    if (!Number.isSafeInteger(buckets) || buckets < 1 || buckets > 1000) {
      fail('ERR_WINDOW', 'window.buckets', 'an integer from 1 to 1000', w.buckets);
    }
  }
  if (fields.includes('burst') && w.burst !== undefined) {
    // Else 0 in the store rule: the capacity is the limit of each request (see StoreRule.burst).
    burst = w.burst as number;
    if (!Number.isSafeInteger(burst) || burst < 1)
      fail('ERR_WINDOW', 'window.burst', 'a positive integer', w.burst);
  }
  // Bucket state is exact integer arithmetic on max(limit, burst) × size in µs; keep it below 2^53 (GCRA:
  // 2^52, its time adds the epoch) (a limit function's values are checked per request, in rules/limits.ts).
  if (exceedsExactMath(typeof limit === 'number' ? limit : 1, { type, sizeMs, burst })) {
    fail(
      'ERR_WINDOW',
      'window.size',
      `small enough that max(limit, burst) × size in µs stays below 2^53 (GCRA: at most 2^52)`,
      w.size,
    );
  }
  // A concurrency limit has no window: its policy has no `w`.
  const windowSeconds = fields.includes('lease')
    ? 0
    : sizeMs > 0
      ? Math.max(1, Math.ceil(sizeMs / 1000))
      : calendarSeconds(w);
  return { type, sizeMs, buckets, burst, periods, windowSeconds };
}

/**
 * A window function: its type, and its fields for direct calls, are what it returns for DIRECT_REQUEST; asked
 * once here, so that a function which cannot answer a direct call is refused before any request.
 */
function compileChosen(
  choose: WindowFunction,
  limit: number | LimitFunction,
  where: string,
  fail: FieldRefusal,
): CompiledWindow {
  let base: unknown;
  try {
    base = choose(DIRECT_REQUEST);
  } catch (error) {
    refuse(
      'ERR_WINDOW',
      where,
      `window function threw for a direct call (no request: no user, no headers), which gives the rule its type and the window of direct calls: ${(error as Error)?.message ?? describe(error)}`,
    );
  }
  if (typeof base === 'function' || typeof (base as PromiseLike<unknown>)?.then === 'function')
    fail('ERR_WINDOW', 'window', 'a function returning a window at once (not a promise or a function)', base);
  const compiled = compileWindow(base, limit, where, fail);
  const refusal = windowKind(compiled.type).unchosen;
  if (refusal !== undefined) refuse('ERR_WINDOW', where, `window cannot be a function here: ${refusal}`);
  return { ...compiled, choose };
}

/**
 * The window a rule probably meant by a value that is not one: a length (`'1m'`, `60000`) as a fixed window of
 * it, a type's name (`'gcra'`) as a window of that type with the fields it needs, else a fixed minute.
 */
function windowFor(value: unknown): string {
  const type = windowTypeOf(value);
  if (type !== undefined) {
    const fields = windowKind(type).fields;
    if (fields.includes('size')) return `{ type: '${value as string}', size: '1m' }`;
    if (fields.includes('unit')) return `{ type: '${value as string}', unit: 'day' }`;
    return `{ type: '${value as string}' }`;
  }
  const size =
    parsePeriod(value) === undefined ? "'1m'" : typeof value === 'string' ? `'${value}'` : String(value);
  return `{ type: 'fixed', size: ${size} }`;
}

/** A concurrency window's lease in ms: at least 1 s, so that its renewals (every third of it) keep up on a busy process. */
function leaseMs(lease: unknown, fail: FieldRefusal): number {
  if (lease === undefined) return RULE_DEFAULTS.concurrencyLeaseMs;
  const parsed = parsePeriod(lease);
  if (parsed === undefined || parsed < MIN_LEASE_MS)
    fail('ERR_DURATION', 'window.lease', `${periodAllowed(lease, '60s')}, at least 1s`, lease);
  return parsed;
}

/** A calendar window's nominal seconds, for `w`: its unit's (a month as 30 days); 0 for a cron's. */
export function calendarSeconds(w: Record<string, unknown>): number {
  return UNIT_SECONDS[w.unit as string] ?? 0;
}

/** A calendar window's periods, its unit or cron and zone checked (a rule's, or one a window function chose). */
export function calendarPeriods(w: Record<string, unknown>, where: string, fail: FieldRefusal): PeriodFn {
  const zone = w.timezone ?? RULE_DEFAULTS.timezone;
  if (typeof zone !== 'string' || !isValidTimeZone(zone)) {
    fail('ERR_TIMEZONE', 'window.timezone', `an IANA time zone such as 'Asia/Shanghai'`, zone);
  }
  if (w.cron !== undefined) {
    if (typeof w.cron !== 'string')
      fail('ERR_CRON', 'window.cron', 'a cron expression such as "0 0 * * *"', w.cron);
    const fieldCount = cronFieldCount(w.cron as string);
    if (fieldCount !== undefined)
      refuse('ERR_CRON', where, `${mustBe('window.cron', CRON_FIELDS, w.cron)} (${fieldCount})`);
    try {
      assertCron(w.cron as string);
    } catch (error) {
      fail(
        'ERR_CRON',
        'window.cron',
        `a cron expression such as "0 0 * * *" (${(error as Error).message})`,
        w.cron,
      );
    }
    return createPeriodFn({ cron: w.cron as string }, zone as string);
  }
  if (!CALENDAR_UNITS.includes(w.unit as never)) {
    fail(
      'ERR_WINDOW',
      'window.unit',
      `one of ${CALENDAR_UNITS.map((u) => `'${u}'`).join(', ')} (or give window.cron)`,
      w.unit,
    );
  }
  return createPeriodFn({ unit: w.unit as never }, zone as string);
}
