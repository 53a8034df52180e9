// Cron expressions of calendar windows: parsed into the wall times they match, and the next match after a wall time.
// The syntax is croner's in its 5-or-6-field mode (names, steps, ?, L, W, #, a leading + for day AND weekday,
// @daily and the other nicknames), accepted and refused as croner does (test/unit/rules/cron.test.ts compares
// the two), so that an edge bundle carries this file instead of croner (README, dependencies). The zone is
// calendar.ts's: this file knows only wall times, written as if they were UTC (ms).

/** What a cron expression matches. Arrays are indexed by value: seconds 0-59, days 0-30 (day 1-31), months 0-11. */
export interface CronSchedule {
  readonly second: number[];
  readonly minute: number[];
  readonly hour: number[];
  readonly day: number[];
  /** Days given with W: the weekday nearest to each (within its month) matches. */
  readonly nearestWeekday: number[];
  readonly month: number[];
  /** Sunday 0 ... Saturday 6: a mask of the occurrences in the month that match (1st 1 ... 5th 16, last 32). */
  readonly weekday: number[];
  readonly lastDay: boolean;
  readonly lastWeekday: boolean;
  /** Day of month given as '*' (then the weekday alone decides). */
  readonly anyDay: boolean;
  /** Day of week given as '*' (then the day of month alone decides). */
  readonly anyWeekday: boolean;
  /** A leading '+' on the day of week: a day must match both fields (otherwise either does). */
  readonly bothDays: boolean;
  /**
   * One second, one minute and one hour, with no '*' or step: in a DST gap it runs when the gap ends, and
   * a wall time that occurs twice runs once. Other schedules skip a gap and run at both occurrences.
   */
  readonly fixedTime: boolean;
}

type Field = 'second' | 'minute' | 'hour' | 'day' | 'nearestWeekday' | 'month' | 'weekday';

/** Every occurrence of a weekday in its month; the mask of the last occurrence. */
const ANY_OCCURRENCE = 63;
const LAST_OCCURRENCE = 32;

const NICKNAMES: Record<string, string> = {
  '@yearly': '0 0 1 1 *',
  '@annually': '0 0 1 1 *',
  '@monthly': '0 0 1 * *',
  '@weekly': '0 0 * * SUN',
  '@daily': '0 0 * * *',
  '@midnight': '0 0 * * *',
  '@hourly': '0 * * * *',
};

const MONTH_NAMES = ['jan', 'feb', 'mar', 'apr', 'may', 'jun', 'jul', 'aug', 'sep', 'oct', 'nov', 'dec'];
/** 'sun' closing a range is 7, so that 'mon-sun' is a range upwards. */
const DAY_NAMES = ['-sun', 'sun', 'mon', 'tue', 'wed', 'thu', 'fri', 'sat'];
const DAY_VALUES = ['-7', '0', '1', '2', '3', '4', '5', '6'];

/** Characters each field may hold once names are numbers: seconds, minutes, hours, days, months, weekdays. */
const FIELD_CHARACTERS = [
  /^[/*0-9,-]*$/,
  /^[/*0-9,-]*$/,
  /^[/*0-9,-]*$/,
  /^[/*0-9,WwLl-]*$/,
  /^[/*0-9,-]*$/,
  /^[/*0-9,#Ll-]*$/,
];
const FIELD_NAMES = ['second', 'minute', 'hour', 'day of month', 'month', 'day of week'];

function wrong(message: string): never {
  throw new TypeError(message);
}

function toNumber(text: string): number {
  return /^\d+$/.test(text) ? Number.parseInt(text, 10) : Number.NaN;
}

/** Month or day names as numbers; a name must stand alone ('monday' and '1mon' are refused; 'friL' is Friday L). */
function namesToNumbers(text: string, names: readonly string[], values: readonly string[]): string {
  let result = text;
  names.forEach((name, i) => {
    result = result.replace(new RegExp(name, 'gi'), (found: string, at: number, whole: string) => {
      const start = at + found.length - 3;
      if (/[a-z\d/#]/i.test(whole.charAt(start - 1)) || /[a-km-z\d]/i.test(whole.charAt(start + 3)))
        wrong(`a month or day name must stand alone ('${text}')`);
      return values[i] as string;
    });
  });
  return result;
}

class Parsed {
  second: number[] = new Array(60).fill(0);
  minute: number[] = new Array(60).fill(0);
  hour: number[] = new Array(24).fill(0);
  day: number[] = new Array(31).fill(0);
  nearestWeekday: number[] = new Array(31).fill(0);
  month: number[] = new Array(12).fill(0);
  weekday: number[] = new Array(7).fill(0);
  lastDay = false;
  lastWeekday = false;

  /** Sets one value: `mark` is 1, or for a weekday every occurrence (a number) or its nth ('1'-'5', 'L'). */
  set(field: Field, value: number, mark: number | string): void {
    if (field === 'weekday') {
      const weekday = value === 7 ? 0 : value;
      if (weekday < 0 || weekday > 6) wrong(`day of week ${value} is out of range (0-7)`);
      const was = this.weekday[weekday] as number;
      const nth = typeof mark === 'string' ? toNumber(mark) : 0;
      if (typeof mark === 'number') this.weekday[weekday] = mark;
      else if (mark.toUpperCase() === 'L') this.weekday[weekday] = was | LAST_OCCURRENCE;
      else if (nth >= 1 && nth <= 5) this.weekday[weekday] = was | (1 << (nth - 1));
      else wrong(`the nth weekday must be 1-5 or L, got '${mark}'`);
      return;
    }
    const values = this[field];
    if (value < 0 || value >= values.length) wrong(`${field} ${value} is out of range`);
    values[value] = 1;
  }

  /** One field (or one item of a list): `offset` turns values into indexes (-1 for days and months). */
  part(field: Field, text: string, offset: number, mark: number): void {
    if (text === '' && !(field === 'day' && (this.lastDay || this.lastWeekday)))
      wrong(`the ${field} field has an empty value`);
    if (text === '*') {
      this[field].fill(mark);
      return;
    }
    const items = text.split(',');
    if (items.length > 1) {
      for (const item of items) this.part(field, item, offset, mark);
    } else if (text.includes('-') || text.includes('/')) {
      this.span(field, text, offset, mark);
    } else if (text !== '') {
      this.single(field, text, offset, mark);
    }
  }

  /** 'a-b', 'a-b/step' or '*\/step', with an nth (#n, L) on weekdays. */
  span(field: Field, text: string, offset: number, mark: number): void {
    if (/w/i.test(text)) wrong(`W is not allowed in a range or step ('${text}')`);
    const [body, nth] = nthOf(text, field);
    const length = this[field].length;
    let from: number;
    let to: number;
    let step = 1;
    if (text.includes('-') && text.includes('/')) {
      const match = /^(\d+)-(\d+)\/(\d+)$/.exec(body);
      if (match === null) wrong(`illegal range with step '${text}'`);
      from = Number(match[1]) + offset;
      to = Number(match[2]) + offset;
      step = Number(match[3]);
    } else if (text.includes('-')) {
      const bounds = body.split('-');
      if (bounds.length !== 2) wrong(`illegal range '${text}'`);
      from = toNumber(bounds[0] as string) + offset;
      to = toNumber(bounds[1] as string) + offset;
      if (Number.isNaN(from) || Number.isNaN(to)) wrong(`illegal range '${text}'`);
    } else {
      const halves = body.split('/');
      if (halves.length !== 2) wrong(`illegal step '${text}'`);
      if (halves[0] !== '*') wrong(`a step must follow '*' or a range, as in '*/5' or '0-30/5' ('${text}')`);
      step = toNumber(halves[1] as string);
      if (Number.isNaN(step)) wrong(`illegal step '${text}'`);
      from = 0;
      to = length - 1;
    }
    if (from > to) wrong(`a range must go upwards ('${text}')`);
    if (step === 0 || step > length) wrong(`a step must be 1-${length} ('${text}')`);
    for (let value = from; value <= to; value += step) this.set(field, value, nth ?? mark);
  }

  /** A number, with W on days of month and an nth (#n, L) on weekdays. */
  single(field: Field, text: string, offset: number, mark: number): void {
    const [body, nth] = nthOf(text, field);
    const nearest = /w/i.test(text);
    if (nearest && field !== 'day') wrong(`W is allowed in the day of month only ('${text}')`);
    const value = toNumber(nearest ? body.replace(/W$/i, '') : body) + offset;
    if (Number.isNaN(value)) wrong(`'${text}' is not a number`);
    this.set(nearest ? 'nearestWeekday' : field, value, nth ?? mark);
  }
}

/** Splits '5#2' and '5L' (weekdays only) into the value and its nth. */
function nthOf(text: string, field: Field): [string, string | undefined] {
  if (text.includes('#')) {
    if (field !== 'weekday') wrong(`# is allowed in the day of week only ('${text}')`);
    const parts = text.split('#');
    if (parts.length !== 2 || parts[1] === '') wrong(`illegal nth weekday '${text}'`);
    return [parts[0] as string, parts[1]];
  }
  if (/l$/i.test(text)) {
    if (field !== 'weekday') wrong(`L is allowed alone in the day of month, or after a weekday ('${text}')`);
    return [text.slice(0, -1), 'L'];
  }
  return [text, undefined];
}

/** Parses a cron expression of 5 fields, or 6 with seconds first, or a nickname; throws a TypeError naming the fault. */
export function parseCron(expression: string): CronSchedule {
  let text = expression;
  if (text.includes('@')) {
    const nickname = text.trim().toLowerCase();
    if (nickname === '@reboot') wrong('@reboot is not a schedule');
    text = NICKNAMES[nickname] ?? text;
  }
  const fields = text.match(/\S+/g) ?? [''];
  if (fields.length !== 5 && fields.length !== 6) wrong(`5 or 6 fields are needed, got ${fields.length}`);
  if (fields.length === 5) fields.unshift('0');
  for (let i = 0; i < fields.length; i++) fields[i] = (fields[i] as string).replace(/\?/g, '*');
  let [second, minute, hour, day, month, weekday] = fields as [
    string,
    string,
    string,
    string,
    string,
    string,
  ];
  const parsed = new Parsed();
  if (day.toUpperCase() === 'LW') {
    parsed.lastWeekday = true;
    day = '';
  } else if (/l/i.test(day)) {
    const items = day.split(',');
    if (items.length > 1 && items.some((item) => item.toUpperCase() === 'LW'))
      wrong(`LW cannot be in a list ('${day}')`);
    if (items.some((item) => item === '' || (item.toUpperCase() !== 'L' && /l/i.test(item))))
      wrong(`L must stand alone in the day of month ('${day}')`);
    day = items.filter((item) => item.toUpperCase() !== 'L').join(',');
    parsed.lastDay = true;
  }
  const anyDay = day === '*';
  if (month.length >= 3)
    month = namesToNumbers(
      month,
      MONTH_NAMES,
      MONTH_NAMES.map((_, i) => `${i + 1}`),
    );
  if (weekday.length >= 3) weekday = namesToNumbers(weekday, DAY_NAMES, DAY_VALUES);
  const bothDays = weekday.startsWith('+');
  if (bothDays) {
    weekday = weekday.slice(1);
    if (weekday === '') wrong(`the day of week is empty after '+'`);
  }
  const anyWeekday = weekday === '*';
  const texts = [second, minute, hour, day, month, weekday];
  texts.forEach((field, i) => {
    if (!(FIELD_CHARACTERS[i] as RegExp).test(field))
      wrong(`the ${FIELD_NAMES[i]} field '${field}' has illegal characters`);
  });
  parsed.part('second', second, 0, 1);
  parsed.part('minute', minute, 0, 1);
  parsed.part('hour', hour, 0, 1);
  parsed.part('day', day, -1, 1);
  parsed.part('month', month, -1, 1);
  parsed.part('weekday', weekday, 0, ANY_OCCURRENCE);
  const one = (field: string, values: number[]) =>
    !field.includes('*') && !field.includes('/') && values.filter((v) => v !== 0).length === 1;
  const fixedTime = one(second, parsed.second) && one(minute, parsed.minute) && one(hour, parsed.hour);
  return { ...parsed, anyDay, anyWeekday, bothDays, fixedTime };
}

const DAY_MS = 86_400_000;
/** How far ahead a match is looked for: the Gregorian calendar repeats every 400 years. */
const SEARCH_YEARS = 400;

function daysInMonth(year: number, month: number): number {
  return new Date(Date.UTC(year, month + 1, 0)).getUTCDate();
}

function weekdayOf(year: number, month: number, day: number): number {
  return new Date(Date.UTC(year, month, day)).getUTCDay();
}

/** The weekday nearest to `day` within its month (a Saturday the 1st moves to Monday the 3rd), or -1 past its end. */
function nearestWeekdayTo(year: number, month: number, day: number): number {
  const last = daysInMonth(year, month);
  if (day > last) return -1;
  const weekday = weekdayOf(year, month, day);
  if (weekday === 0) return day === last ? day - 2 : day + 1;
  if (weekday === 6) return day === 1 ? day + 2 : day - 1;
  return day;
}

function dayMatches(s: CronSchedule, year: number, month: number, day: number): boolean {
  const last = daysInMonth(year, month);
  let byDate = s.day[day - 1] === 1 || (s.lastDay && day === last);
  if (!byDate && s.lastWeekday) {
    const weekday = weekdayOf(year, month, last);
    byDate = day === (weekday === 0 ? last - 2 : weekday === 6 ? last - 1 : last);
  }
  for (let i = 0; !byDate && i < 31; i++)
    byDate = s.nearestWeekday[i] === 1 && nearestWeekdayTo(year, month, i + 1) === day;
  if (s.anyWeekday) return byDate;
  const occurrences = s.weekday[weekdayOf(year, month, day)] as number;
  const nth = 1 << Math.floor((day - 1) / 7);
  const byWeekday = (occurrences & nth) !== 0 || ((occurrences & LAST_OCCURRENCE) !== 0 && day + 7 > last);
  return s.bothDays || s.anyDay ? byDate && byWeekday : byDate || byWeekday;
}

/** The first second of the day at or after `fromSecond` that the schedule matches, or -1. */
function timeOfDay(s: CronSchedule, fromSecond: number): number {
  const fromHour = Math.floor(fromSecond / 3600);
  const fromMinute = Math.floor((fromSecond % 3600) / 60);
  for (let h = fromHour; h < 24; h++) {
    if (s.hour[h] !== 1) continue;
    for (let m = h === fromHour ? fromMinute : 0; m < 60; m++) {
      if (s.minute[m] !== 1) continue;
      for (let sec = h === fromHour && m === fromMinute ? fromSecond % 60 : 0; sec < 60; sec++) {
        if (s.second[sec] === 1) return h * 3600 + m * 60 + sec;
      }
    }
  }
  return -1;
}

/** The first wall time at or after `fromWallMs` (whole seconds, written as UTC) that the schedule matches; Infinity if none. */
export function nextWallMatch(s: CronSchedule, fromWallMs: number): number {
  const start = new Date(fromWallMs);
  const lastYear = start.getUTCFullYear() + SEARCH_YEARS;
  let dayMs = fromWallMs - (((fromWallMs % DAY_MS) + DAY_MS) % DAY_MS);
  let fromSecond = Math.floor((fromWallMs - dayMs) / 1000);
  for (;;) {
    const date = new Date(dayMs);
    const year = date.getUTCFullYear();
    const month = date.getUTCMonth();
    if (year > lastYear) return Number.POSITIVE_INFINITY;
    if (s.month[month] !== 1) {
      dayMs = Date.UTC(year, month + 1, 1);
      fromSecond = 0;
      continue;
    }
    if (dayMatches(s, year, month, date.getUTCDate())) {
      const second = timeOfDay(s, fromSecond);
      if (second >= 0) return dayMs + second * 1000;
    }
    dayMs += DAY_MS;
    fromSecond = 0;
  }
}
