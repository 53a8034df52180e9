// Calendar period boundaries from the platform's time zone data (Intl) and cron ticks: exact instants around DST.
import { expect } from 'chai';
import { type CalendarPeriods, createPeriodFn, isValidTimeZone } from '../../../src/rules/calendar.js';
import type { CalendarUnit } from '../../../src/types.js';

function periods(spec: { unit?: CalendarUnit; cron?: string }, zone: string, at: string): string[] {
  const p: CalendarPeriods = createPeriodFn(spec, zone)(Date.parse(at));
  return [new Date(p.endMs).toISOString(), new Date(p.nextEndMs).toISOString()];
}

describe('calendar periods', () => {
  it('a day where the clock skips midnight starts at 01:00 (America/Santiago, DST at 24:00)', () => {
    expect(periods({ unit: 'day' }, 'America/Santiago', '2026-09-05T12:00:00Z')).to.deep.equal([
      '2026-09-06T04:00:00.000Z', // 01:00 -03, the first instant of 6 September
      '2026-09-07T03:00:00.000Z', // a 23-hour day
    ]);
  });

  it('a day on which the clock falls back lasts 25 hours (America/New_York)', () => {
    expect(periods({ unit: 'day' }, 'America/New_York', '2026-11-01T04:00:00Z')).to.deep.equal([
      '2026-11-02T05:00:00.000Z',
      '2026-11-03T05:00:00.000Z',
    ]);
  });

  it('the repeated hour when the clock falls back is two hours, each ending on time', () => {
    expect(periods({ unit: 'hour' }, 'America/New_York', '2026-11-01T05:30:00Z')).to.deep.equal([
      '2026-11-01T06:00:00.000Z', // 01:30 EDT: ends at the first 02:00, which reads 01:00 EST
      '2026-11-01T07:00:00.000Z',
    ]);
    expect(periods({ unit: 'hour' }, 'America/New_York', '2026-11-01T06:30:00Z')[0]).to.equal(
      '2026-11-01T07:00:00.000Z',
    );
  });

  it('hours end on the local hour in a zone half an hour off UTC (Asia/Kolkata)', () => {
    expect(periods({ unit: 'hour' }, 'Asia/Kolkata', '2026-01-01T00:10:00Z')).to.deep.equal([
      '2026-01-01T00:30:00.000Z',
      '2026-01-01T01:30:00.000Z',
    ]);
  });

  it('a week ends on Monday at midnight, even seen from Sunday; a month at the first, across the year', () => {
    expect(periods({ unit: 'week' }, 'Asia/Shanghai', '2026-03-08T10:00:00Z')).to.deep.equal([
      '2026-03-08T16:00:00.000Z', // Monday 9 March, 00:00 in Shanghai
      '2026-03-15T16:00:00.000Z',
    ]);
    expect(periods({ unit: 'month' }, 'Europe/Berlin', '2026-12-15T10:00:00Z')).to.deep.equal([
      '2026-12-31T23:00:00.000Z',
      '2027-01-31T23:00:00.000Z',
    ]);
  });

  it('cron ticks in the zone given, across a DST change, and predefined schedules', () => {
    // Friday 11:00 in Berlin; Monday 09:00 is in summer time.
    expect(periods({ cron: '0 9 * * 1-5' }, 'Europe/Berlin', '2026-03-27T10:00:00Z')).to.deep.equal([
      '2026-03-30T07:00:00.000Z',
      '2026-03-31T07:00:00.000Z',
    ]);
    // On a tick, the period ends at the next one.
    expect(periods({ cron: '*/15 * * * *' }, 'UTC', '2026-01-05T10:15:00Z')).to.deep.equal([
      '2026-01-05T10:30:00.000Z',
      '2026-01-05T10:45:00.000Z',
    ]);
    expect(periods({ cron: '@daily' }, 'Asia/Shanghai', '2026-01-05T10:15:00Z')).to.deep.equal([
      '2026-01-05T16:00:00.000Z',
      '2026-01-06T16:00:00.000Z',
    ]);
  });

  it('knows IANA zones and refuses made-up ones', () => {
    for (const zone of ['UTC', 'Asia/Shanghai', 'America/Argentina/Buenos_Aires']) {
      expect(isValidTimeZone(zone), zone).to.equal(true);
    }
    for (const zone of ['Mars/Olympus', '', 'Asia/Shang hai'])
      expect(isValidTimeZone(zone), zone).to.equal(false);
  });
});
