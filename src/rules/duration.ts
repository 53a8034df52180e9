// Durations: milliseconds or strings such as '500ms', '1s', '5m', '1h', '1d' (parsed by the `ms` package).
import ms from 'ms';
import type { Duration } from '../types.js';

/**
 * Below this, a bare number given as a period (a window's size, a lockout, an override's life) is refused:
 * `size: 60` meant a minute far more often than 60 ms, as other limiters count durations in seconds.
 */
export const MIN_BARE_PERIOD_MS = 1000;

/** Parses a duration to whole milliseconds; undefined when it is not a positive finite duration. */
export function parseDuration(value: Duration | undefined): number | undefined {
  if (typeof value === 'number') {
    return Number.isFinite(value) && value > 0 ? Math.ceil(value) : undefined;
  }
  if (typeof value !== 'string' || value.trim() === '') return undefined;
  // `ms` reads a bare number string as milliseconds; anything it cannot read is undefined.
  const parsed = ms(value.trim() as ms.StringValue) as number | undefined;
  return typeof parsed === 'number' && Number.isFinite(parsed) && parsed > 0 ? Math.ceil(parsed) : undefined;
}

/** A number, or a string holding only a number ('60'): milliseconds with no unit written. */
function bareNumber(value: unknown): number | undefined {
  if (typeof value === 'number') return value;
  if (typeof value === 'string' && /^\s*\d+(\.\d+)?\s*$/.test(value)) return Number(value);
  return undefined;
}

/** As `parseDuration`, but a bare number below `MIN_BARE_PERIOD_MS` is refused (undefined). */
export function parsePeriod(value: unknown): number | undefined {
  const bare = bareNumber(value);
  if (bare !== undefined && bare < MIN_BARE_PERIOD_MS) return undefined;
  return parseDuration(value as Duration);
}

const MONTHS = /^\s*\d+(\.\d+)?\s*(mo|mos|mon|month|months)\s*$/i;

/**
 * What a period field must be, for its `RateLimitConfigError`, naming the fix for the value received:
 * a bare `60` gets `'60s' or '60ms'`, months (which vary in length) get the calendar window.
 * `example` is the field's usual sample ('1d'); `window`: the field is a window's size.
 */
export function periodAllowed(value: unknown, example: string, window = false): string {
  const bare = bareNumber(value);
  if (bare !== undefined && bare > 0 && bare < MIN_BARE_PERIOD_MS) {
    return (
      `a duration with its unit, such as '${bare}s' or '${bare}ms' ` +
      `(a bare number is milliseconds, and is refused below ${MIN_BARE_PERIOD_MS})`
    );
  }
  if (typeof value === 'string' && MONTHS.test(value)) {
    return window
      ? `a fixed length, and months differ in length: for a limit per calendar month, use window { type: 'calendar', unit: 'month' }`
      : `a fixed length, and months differ in length: give days, such as '30d'`;
  }
  return `a duration such as '${example}' or ${ms(example as ms.StringValue)}`;
}
