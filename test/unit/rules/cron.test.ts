// Cron expressions of calendar windows (src/rules/cron.ts and calendar.ts's ticks in a zone), against croner:
// the same expressions accepted and the same next ticks, over random expressions, zones with DST and times near
// their transitions.
import { expect } from 'chai';
import { Cron } from 'croner';
import fc from 'fast-check';
import { assertCron, createPeriodFn } from '../../../src/rules/calendar.js';

/** Runs per property: RATEKEEPER_CRON_RUNS=20000 for a long search. */
const RUNS = Number(process.env.RATEKEEPER_CRON_RUNS ?? 100);

const ZONES = [
  'UTC',
  'Europe/Berlin',
  'America/New_York',
  'America/Santiago', // DST at midnight: the day starts at 01:00
  'America/Havana', // DST at midnight
  'Australia/Lord_Howe', // a 30-minute shift
  'Pacific/Chatham', // a 45-minute offset
  'America/St_Johns',
  'Asia/Tehran', // DST until 2022
  'Asia/Kolkata',
];

const formats = new Map<string, Intl.DateTimeFormat>();

function offsetMs(zone: string, atMs: number): number {
  const parts: Record<string, number> = {};
  let format = formats.get(zone);
  if (format === undefined) {
    format = new Intl.DateTimeFormat('en-US', {
      timeZone: zone,
      hourCycle: 'h23',
      year: 'numeric',
      month: 'numeric',
      day: 'numeric',
      hour: 'numeric',
      minute: 'numeric',
      second: 'numeric',
    });
    formats.set(zone, format);
  }
  for (const part of format.formatToParts(atMs)) parts[part.type] = Number(part.value);
  const wall = Date.UTC(
    parts.year ?? 0,
    (parts.month ?? 1) - 1,
    parts.day,
    parts.hour,
    parts.minute,
    parts.second,
  );
  return wall - (atMs - (((atMs % 1000) + 1000) % 1000));
}

/** Each zone's offset changes from 2021 to 2027, found week by week, then to the second. */
function transitions(zone: string): number[] {
  const found: number[] = [];
  const WEEK = 7 * 86_400_000;
  for (let t = Date.UTC(2021, 0, 1); t < Date.UTC(2028, 0, 1); t += WEEK) {
    if (offsetMs(zone, t) === offsetMs(zone, t + WEEK)) continue;
    let low = t;
    let high = t + WEEK;
    while (high - low > 1000) {
      const middle = low + Math.floor((high - low) / 2000) * 1000;
      if (offsetMs(zone, middle) === offsetMs(zone, low)) low = middle;
      else high = middle;
    }
    found.push(high);
  }
  return found;
}

const NEAR = ZONES.map((zone) => ({ zone, at: transitions(zone) }));

function theirs(expression: string, zone: string, fromMs: number): number {
  const next = new Cron(expression, { timezone: zone, mode: '5-or-6-parts' }).nextRun(new Date(fromMs));
  return next === null ? Number.POSITIVE_INFINITY : next.getTime();
}

function ours(expression: string, zone: string, fromMs: number): number {
  return createPeriodFn({ cron: expression }, zone)(fromMs).endMs;
}

const accepted = (check: () => unknown) => {
  try {
    check();
    return true;
  } catch {
    return false;
  }
};

const pick = <T>(...items: T[]) => fc.constantFrom(...items);
const int = (min: number, max: number) => fc.integer({ min, max });
/** A number, a range, a range with a step, or a step of '*', from `min` to `max`. */
const item = (min: number, max: number) =>
  fc.oneof(
    int(min, max).map(String),
    fc.tuple(int(min, max), int(min, max)).map(([a, b]) => `${Math.min(a, b)}-${Math.max(a, b)}`),
    fc
      .tuple(int(min, max), int(min, max), int(1, 9))
      .map(([a, b, s]) => `${Math.min(a, b)}-${Math.max(a, b)}/${s}`),
    int(1, Math.min(max, 30)).map((s) => `*/${s}`),
  );
const field = (min: number, max: number, ...special: string[]) =>
  fc.oneof(
    { weight: 2, arbitrary: pick('*', ...special) },
    {
      weight: 3,
      arbitrary: fc.array(item(min, max), { minLength: 1, maxLength: 3 }).map((xs) => xs.join(',')),
    },
  );
const weekdayItem = fc.oneof(
  item(0, 7),
  pick(
    'MON',
    'tue',
    'Fri',
    'SUN',
    'mon-fri',
    'SAT-SUN',
    'FRIL',
    '5L',
    'MON#1',
    '1#2',
    '5#L',
    '0#5',
    '1-5#3',
    '6L',
  ),
);
const weekdays = fc.oneof(
  { weight: 3, arbitrary: pick('*', '?') },
  {
    weight: 4,
    arbitrary: fc
      .tuple(fc.boolean(), fc.array(weekdayItem, { minLength: 1, maxLength: 2 }))
      .map(([and, xs]) => `${and ? '+' : ''}${xs.join(',')}`),
  },
);
const expressions = fc.oneof(
  { weight: 1, arbitrary: pick('@daily', '@hourly', '@weekly', '@monthly', '@yearly', '@midnight') },
  {
    weight: 12,
    arbitrary: fc
      .tuple(
        fc.option(field(0, 59, '0', '30'), { freq: 3 }),
        field(0, 59, '0', '30', '*/15'),
        field(0, 4, '0', '2', '3', '1'),
        field(1, 31, '?', 'L', 'LW', '15W', '1W', '31W', 'L,15', '29', '31'),
        field(1, 12, 'JAN', 'mar-oct', 'FEB', '?'),
        weekdays,
      )
      .map(([s, ...rest]) => (s === null ? rest : [s, ...rest]).join(' ')),
  },
);

/** Instants near a transition of the zone (within 6 h, any ms), or anywhere from 2000 to 2040. */
const times = (zone: string) => {
  const at = NEAR.find((z) => z.zone === zone)?.at ?? [];
  const anywhere = int(Date.UTC(2000, 0, 1), Date.UTC(2040, 0, 1));
  if (at.length === 0) return anywhere;
  return fc.oneof(
    {
      weight: 4,
      arbitrary: fc.tuple(pick(...at), int(-6 * 3_600_000, 6 * 3_600_000)).map(([t, d]) => t + d),
    },
    { weight: 1, arbitrary: anywhere },
  );
};

describe('cron expressions of calendar windows, against croner', () => {
  it('ticks of L, W, #, + and DST: a fixed time in a gap runs at its end, an hourly tick runs at both 02:30s', () => {
    const ticks = (cron: string, zone: string, at: string, n = 3) => {
      const found: string[] = [];
      let from = Date.parse(at);
      for (let i = 0; i < n; i++) {
        from = ours(cron, zone, from);
        found.push(new Date(from).toISOString());
      }
      return found;
    };
    expect(ticks('0 0 L * *', 'UTC', '2028-01-31T00:00:00Z')).to.deep.equal([
      '2028-02-29T00:00:00.000Z',
      '2028-03-31T00:00:00.000Z',
      '2028-04-30T00:00:00.000Z',
    ]);
    // The 1st of February 2026 is a Sunday: 1W is Monday the 2nd; FRI#L is the last Friday.
    expect(ticks('0 12 1W * *', 'UTC', '2026-01-15T00:00:00Z', 2)).to.deep.equal([
      '2026-02-02T12:00:00.000Z',
      '2026-03-02T12:00:00.000Z',
    ]);
    expect(ticks('0 0 * * FRI#L', 'UTC', '2026-01-01T00:00:00Z', 1)).to.deep.equal([
      '2026-01-30T00:00:00.000Z',
    ]);
    // + asks for both: the 13th that is a Friday.
    expect(ticks('0 0 13 * +FRI', 'UTC', '2026-01-01T00:00:00Z', 2)).to.deep.equal([
      '2026-02-13T00:00:00.000Z',
      '2026-03-13T00:00:00.000Z',
    ]);
    // Berlin skips 02:00-03:00 on 29 March 2026 and repeats 02:00-03:00 on 25 October 2026.
    expect(ticks('30 2 * * *', 'Europe/Berlin', '2026-03-28T12:00:00Z', 2)).to.deep.equal([
      '2026-03-29T01:00:00.000Z', // 03:00 CEST, the gap's end
      '2026-03-30T00:30:00.000Z',
    ]);
    expect(ticks('30 * * * *', 'Europe/Berlin', '2026-10-24T23:00:00Z', 3)).to.deep.equal([
      '2026-10-24T23:30:00.000Z', // 01:30 CEST
      '2026-10-25T00:30:00.000Z', // 02:30 CEST
      '2026-10-25T01:30:00.000Z', // 02:30 CET
    ]);
    expect(ticks('30 2 * * *', 'Europe/Berlin', '2026-10-24T23:00:00Z', 2)).to.deep.equal([
      '2026-10-25T00:30:00.000Z', // once, at the first 02:30
      '2026-10-26T01:30:00.000Z',
    ]);
    expect(ours('0 0 30 2 *', 'UTC', 0)).to.equal(Number.POSITIVE_INFINITY);
  });

  it('accepts and refuses the expressions croner does', () => {
    const token = pick(
      '0',
      '5',
      '7',
      '12',
      '24',
      '31',
      '60',
      '*',
      '*/5',
      '/',
      '-',
      ',',
      '?',
      'L',
      'W',
      'LW',
      '#',
      '#2',
      '+',
      'MON',
      'sun',
      'jan',
      'DEC',
      'x',
      'l',
      'w',
      '@daily',
      '@reboot',
      '1-5',
      '5-1',
      '0-7/2',
      '*/0',
      '*/61',
    );
    const fieldText = fc.array(token, { minLength: 1, maxLength: 3 }).map((xs) => xs.join(''));
    const text = fc.oneof(
      fc.array(fieldText, { minLength: 4, maxLength: 7 }).map((xs) => xs.join(' ')),
      expressions,
    );
    fc.assert(
      fc.property(text, (expression) => {
        const theirsOk = accepted(() =>
          new Cron(expression, { timezone: 'UTC', mode: '5-or-6-parts' }).nextRun(new Date(0)),
        );
        expect(
          accepted(() => assertCron(expression)),
          expression,
        ).to.equal(theirsOk);
      }),
      { numRuns: RUNS * 3 },
    );
  });

  it('gives the tick croner gives, three in a row, in zones with DST near their transitions', () => {
    const cases = fc
      .constantFrom(...ZONES)
      .chain((zone) => fc.tuple(expressions, fc.constant(zone), times(zone)));
    fc.assert(
      fc.property(cases, ([expression, zone, at]) => {
        if (!accepted(() => assertCron(expression))) return;
        let from = at;
        for (let i = 0; i < 3 && Number.isFinite(from); i++) {
          const expected = theirs(expression, zone, from);
          expect(
            ours(expression, zone, from),
            `${expression} in ${zone} after ${new Date(from).toISOString()}`,
          ).to.equal(expected);
          from = expected;
        }
      }),
      { numRuns: RUNS },
    );
  });
});
