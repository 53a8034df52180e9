// Calendar windows: period boundaries at wall-clock units (Intl's time zone data) or cron ticks (croner) in an IANA zone.
import { Cron } from 'croner';
import type { CalendarUnit } from '../types.js';

export const CALENDAR_UNITS: readonly CalendarUnit[] = ['minute', 'hour', 'day', 'week', 'month'];

export interface CalendarPeriods {
  /** End of the period containing `now`, epoch ms. */
  endMs: number;
  /** End of the period after it. */
  nextEndMs: number;
}

export type PeriodFn = (nowMs: number) => CalendarPeriods;

const MINUTE_MS = 60_000;
const HOUR_MS = 3_600_000;
const DAY_MS = 86_400_000;

/** One formatter per zone: building one is costly, reading parts with it is not. */
const formatters = new Map<string, Intl.DateTimeFormat>();

function formatterFor(zone: string): Intl.DateTimeFormat {
  let formatter = formatters.get(zone);
  if (formatter === undefined) {
    formatter = new Intl.DateTimeFormat('en-US', {
      timeZone: zone,
      hourCycle: 'h23',
      year: 'numeric',
      month: 'numeric',
      day: 'numeric',
      hour: 'numeric',
      minute: 'numeric',
      second: 'numeric',
      weekday: 'short',
    });
    formatters.set(zone, formatter);
  }
  return formatter;
}

export function isValidTimeZone(zone: string): boolean {
  try {
    formatterFor(zone);
    return true;
  } catch {
    return false;
  }
}

/** Throws the parser's message when the expression is not a valid cron expression. */
export function assertCron(expression: string, timezone: string): void {
  cronOf(expression, timezone).nextRun(new Date(0));
}

function cronOf(expression: string, zone: string): Cron {
  // Day of month and day of week combine with OR, as in Vixie cron (croner's default).
  return new Cron(expression, { timezone: zone, mode: '5-or-6-parts' });
}

interface WallTime {
  year: number;
  month: number;
  day: number;
  hour: number;
  minute: number;
  /** Monday 0 ... Sunday 6. */
  weekday: number;
  /** The wall time written as if it were UTC, ms. */
  wallMs: number;
}

const WEEKDAYS: Record<string, number> = { Mon: 0, Tue: 1, Wed: 2, Thu: 3, Fri: 4, Sat: 5, Sun: 6 };

function wallTime(zone: string, atMs: number): WallTime {
  const parts: Record<string, string> = {};
  for (const part of formatterFor(zone).formatToParts(atMs)) parts[part.type] = part.value;
  const year = Number(parts.year);
  const month = Number(parts.month);
  const day = Number(parts.day);
  const hour = Number(parts.hour);
  const minute = Number(parts.minute);
  const second = Number(parts.second);
  const wallMs = Date.UTC(year, month - 1, day, hour, minute, second) + (((atMs % 1000) + 1000) % 1000);
  return { year, month, day, hour, minute, weekday: WEEKDAYS[parts.weekday as string] ?? 0, wallMs };
}

/** The zone's offset from UTC at an instant, ms (wall time minus UTC). */
function offsetAt(zone: string, atMs: number): number {
  return wallTime(zone, atMs).wallMs - atMs;
}

/**
 * The first instant whose wall time in the zone is `wallMs` or later: the instant of that wall time, the
 * earlier one when a clock set back makes it occur twice, and the end of the gap when a clock set forward
 * skips it (midnight does not exist on such a day in some zones: the day starts at 01:00).
 */
function instantOf(zone: string, wallMs: number): number {
  // Offsets are within ±14 h: one day either side brackets any transition near the target.
  const before = wallMs - offsetAt(zone, wallMs - DAY_MS);
  const after = wallMs - offsetAt(zone, wallMs + DAY_MS);
  const valid = [before, after].filter((t) => t + offsetAt(zone, t) === wallMs);
  if (valid.length > 0) return Math.min(...valid);
  // In a gap: the transition lies between the two candidates; find its first instant.
  let low = Math.min(before, after);
  let high = Math.max(before, after);
  while (high - low > 1) {
    const middle = Math.floor((low + high) / 2);
    if (middle + offsetAt(zone, middle) >= wallMs) high = middle;
    else low = middle;
  }
  return high;
}

function unitEnd(unit: CalendarUnit, zone: string, fromMs: number): number {
  // Minutes and hours are lengths of time: a clock set back repeats an hour, and each is a period of its own.
  if (unit === 'minute') return Math.floor(fromMs / MINUTE_MS) * MINUTE_MS + MINUTE_MS;
  const wall = wallTime(zone, fromMs);
  if (unit === 'hour') {
    const intoHourMs = wall.wallMs - Date.UTC(wall.year, wall.month - 1, wall.day, wall.hour);
    return fromMs - intoHourMs + HOUR_MS;
  }
  // Days, weeks and months are calendar dates: a day on which DST starts or ends lasts 23 or 25 hours.
  const { year, month, day } = wall;
  if (unit === 'day') return instantOf(zone, Date.UTC(year, month - 1, day + 1));
  if (unit === 'week') return instantOf(zone, Date.UTC(year, month - 1, day + 7 - wall.weekday));
  return instantOf(zone, Date.UTC(year, month, 1));
}

function cronEnd(cron: Cron, fromMs: number): number {
  const next = cron.nextRun(new Date(fromMs));
  // A valid 5- or 6-field expression always runs again; a date that never comes ends nothing.
  return next === null ? Number.POSITIVE_INFINITY : next.getTime();
}

/**
 * A period function for one calendar window. It caches the current boundaries and recomputes only when
 * time crosses one, so the hot path does no date arithmetic.
 */
export function createPeriodFn(spec: { unit?: CalendarUnit; cron?: string }, zone: string): PeriodFn {
  let end: (fromMs: number) => number;
  if (spec.cron !== undefined) {
    const cron = cronOf(spec.cron, zone);
    end = (fromMs) => cronEnd(cron, fromMs);
  } else {
    const unit = spec.unit as CalendarUnit;
    end = (fromMs) => unitEnd(unit, zone, fromMs);
  }
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
