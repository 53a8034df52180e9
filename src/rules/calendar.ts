// Calendar windows: period boundaries at wall-clock units or cron ticks (cron.ts) in an IANA zone (Intl's time zone data).
import type { CalendarUnit } from '../types.js';
import { type CronSchedule, nextWallMatch, parseCron } from './cron.js';

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

/** Throws a TypeError naming the fault when the expression is not a cron expression calendar windows take. */
export function assertCron(expression: string): void {
  parseCron(expression);
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
 * The instants whose wall time in the zone is `wallMs`, earliest first: one, two where a clock set back
 * makes it occur twice, none where a clock set forward skips it.
 */
function instantsOf(zone: string, wallMs: number): number[] {
  // Offsets are within ±14 h: one day either side brackets any transition near the target.
  const before = wallMs - offsetAt(zone, wallMs - DAY_MS);
  const after = wallMs - offsetAt(zone, wallMs + DAY_MS);
  const valid = [before, after].filter((t) => t + offsetAt(zone, t) === wallMs).sort((a, b) => a - b);
  return valid[0] === valid[1] ? valid.slice(0, 1) : valid;
}

/** The first instant after `lowMs`, up to `highMs`, at which the zone's offset differs from its offset at `lowMs`. */
function transitionAfter(zone: string, lowMs: number, highMs: number): number {
  const offset = offsetAt(zone, lowMs);
  let low = lowMs;
  let high = highMs;
  while (high - low > 1) {
    const middle = Math.floor((low + high) / 2);
    if (offsetAt(zone, middle) === offset) low = middle;
    else high = middle;
  }
  return high;
}

/** The end of the gap that skips the wall time `wallMs` (in a gap: it has no instant): the first instant after it. */
function gapEnd(zone: string, wallMs: number): number {
  const before = wallMs - offsetAt(zone, wallMs - DAY_MS);
  const after = wallMs - offsetAt(zone, wallMs + DAY_MS);
  return transitionAfter(zone, Math.min(before, after), Math.max(before, after));
}

/**
 * The first instant whose wall time in the zone is `wallMs` or later: the instant of that wall time, the
 * earlier one when a clock set back makes it occur twice, and the end of the gap when a clock set forward
 * skips it (midnight does not exist on such a day in some zones: the day starts at 01:00).
 */
function instantOf(zone: string, wallMs: number): number {
  return instantsOf(zone, wallMs)[0] ?? gapEnd(zone, wallMs);
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

/**
 * The first instant after `afterMs` of a wall time the schedule matches, from `fromWallMs` on. A wall time
 * that occurs twice runs at both instants, or at the first alone for a fixed-time schedule; one in a gap is
 * skipped, or for a fixed-time schedule runs at the gap's end if that is still the same date.
 */
function cronRun(s: CronSchedule, zone: string, fromWallMs: number, afterMs: number): number {
  let wallMs = fromWallMs;
  for (;;) {
    wallMs = nextWallMatch(s, wallMs);
    if (wallMs === Number.POSITIVE_INFINITY) return wallMs;
    const instants = instantsOf(zone, wallMs);
    if (instants.length > 0) {
      const run = (s.fixedTime ? instants.slice(0, 1) : instants).find((t) => t > afterMs);
      if (run !== undefined) return run;
      wallMs += 1000;
      continue;
    }
    const endMs = gapEnd(zone, wallMs);
    const end = wallTime(zone, endMs);
    if (!s.fixedTime) {
      // Every wall time up to the gap's end is in the gap.
      wallMs = Math.max(wallMs + 1000, end.wallMs);
      continue;
    }
    const date = new Date(wallMs);
    const sameDate =
      end.year === date.getUTCFullYear() &&
      end.month === date.getUTCMonth() + 1 &&
      end.day === date.getUTCDate();
    if (sameDate && endMs > afterMs) return endMs;
    wallMs += 1000;
  }
}

/** The first tick after `fromMs` (whole seconds); Infinity for a schedule that never runs (the 30th of February). */
function cronEnd(s: CronSchedule, zone: string, fromMs: number): number {
  if (!Number.isFinite(fromMs)) return Number.POSITIVE_INFINITY;
  const fromWallMs = Math.floor(wallTime(zone, fromMs).wallMs / 1000) * 1000;
  const next = cronRun(s, zone, fromWallMs + 1000, fromMs);
  if (s.fixedTime) return next;
  // Before a clock set back, the wall times it repeats come again after it, with ticks of their own.
  const later = instantsOf(zone, fromWallMs)[1];
  if (later === undefined || fromMs >= later) return next;
  const backMs = transitionAfter(zone, Math.floor(fromMs / 1000) * 1000, later);
  if (next < backMs) return next;
  return Math.min(next, cronRun(s, zone, wallTime(zone, backMs).wallMs, backMs - 1));
}

/**
 * A period function for one calendar window. It caches the current boundaries and recomputes only when
 * time crosses one, so the hot path does no date arithmetic.
 */
export function createPeriodFn(spec: { unit?: CalendarUnit; cron?: string }, zone: string): PeriodFn {
  let end: (fromMs: number) => number;
  if (spec.cron !== undefined) {
    const schedule = parseCron(spec.cron);
    end = (fromMs) => cronEnd(schedule, zone, fromMs);
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
