// Calendar windows: period boundaries at wall-clock units or cron ticks in an IANA time zone (luxon, cron-parser).
import { CronExpressionParser } from 'cron-parser';
import { DateTime, IANAZone } from 'luxon';
import type { CalendarUnit } from '../types.js';

export const CALENDAR_UNITS: readonly CalendarUnit[] = ['minute', 'hour', 'day', 'week', 'month'];

export interface CalendarPeriods {
  /** End of the period containing `now`, epoch ms. */
  endMs: number;
  /** End of the period after it. */
  nextEndMs: number;
}

export type PeriodFn = (nowMs: number) => CalendarPeriods;

export function isValidTimeZone(zone: string): boolean {
  return IANAZone.isValidZone(zone);
}

/** Throws the parser's message when the expression is not a valid cron expression. */
export function assertCron(expression: string, timezone: string): void {
  CronExpressionParser.parse(expression, { tz: timezone, currentDate: new Date(0) }).next();
}

function unitEnd(unit: CalendarUnit, zone: string, fromMs: number): number {
  // luxon's weeks start on Monday (ISO 8601), as docs/rules.md says calendar weeks do; DST days are 23 or 25 hours long.
  return DateTime.fromMillis(fromMs, { zone })
    .startOf(unit)
    .plus({ [unit]: 1 })
    .toMillis();
}

function cronEnd(expression: string, zone: string, fromMs: number): number {
  return CronExpressionParser.parse(expression, { tz: zone, currentDate: new Date(fromMs) })
    .next()
    .getTime();
}

/**
 * A period function for one calendar window. It caches the current boundaries and recomputes only when
 * time crosses one, so the hot path does no date arithmetic.
 */
export function createPeriodFn(spec: { unit?: CalendarUnit; cron?: string }, zone: string): PeriodFn {
  const end = spec.cron
    ? (fromMs: number) => cronEnd(spec.cron as string, zone, fromMs)
    : (fromMs: number) => unitEnd(spec.unit as CalendarUnit, zone, fromMs);
  let cached: CalendarPeriods | undefined;
  let cachedFrom = Number.NaN;
  return (nowMs) => {
    if (cached !== undefined && nowMs >= cachedFrom && nowMs < cached.endMs) return cached;
    const endMs = end(nowMs);
    cached = { endMs, nextEndMs: end(endMs) };
    cachedFrom = nowMs;
    return cached;
  };
}
