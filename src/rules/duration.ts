// Durations: milliseconds or strings such as '500ms', '1s', '5m', '1h', '1d' (parsed by the `ms` package).
import ms from 'ms';
import type { Duration } from '../types.js';

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
