// The soak's figures as Markdown (its block in bench/RESULTS.md) and as the checks that must hold.
import os from 'node:os';
import type { AuditResult } from './audit.js';
import type { SettleAudit } from './audit-settle.js';
import type { SlotAudit } from './audit-slots.js';
import type { SoakConfig } from './config.js';
import type { InjectedFault } from './faults.js';
import { heapGrowth, lateGrowth, type MinuteFigures } from './resources.js';

export interface SoakOutcome {
  config: SoakConfig;
  startedAt: number;
  faults: Array<InjectedFault & { probeBackMs: number }>;
  /** Per process, its figures per minute. */
  minutes: MinuteFigures[][];
  unhandled: string[];
  audit: AuditResult;
  slots: SlotAudit;
  settle: SettleAudit;
  redisVersion: string;
  postgresVersion: string;
  /** The machine's 1-minute load average when the traffic started and when it stopped. */
  load: { start: number; end: number };
}

/** PostgreSQL's messages for a statement cut by a timeout and for a connection the server ended. */
const RIDDEN_THROUGH =
  /canceling statement due to (lock|statement) timeout|terminating connection due to (administrator command|crash|idle)|could not serialize|Connection terminated unexpectedly/;

/**
 * Store errors the limiters reported for PostgreSQL statements that docs/stores.md says are sent again
 * (cut by a role's lock_timeout or statement_timeout: with the store's own settings; on a connection a
 * restart or pg_terminate_backend ended: on another one): none should reach the app.
 */
export function postgresCutsReachingTheApp(a: AuditResult): number {
  return [...a.storeErrors]
    .filter(([cause]) => cause.startsWith('postgres: ') && RIDDEN_THROUGH.test(cause))
    .reduce((sum, [, n]) => sum + n, 0);
}

const fmt = (n: number, digits = 0) =>
  n.toLocaleString('en-US', { maximumFractionDigits: digits, minimumFractionDigits: digits });

/** The checks that must hold, each with what was measured; failures first. */
export function soakChecks(o: SoakOutcome): Array<{ check: string; measured: string; ok: boolean }> {
  const a = o.audit;
  const growth = heapGrowth(o.minutes);
  const lateHeap = lateGrowth(o.minutes, (m) => m.heapAfterGcBytes);
  const lateHandles = lateGrowth(o.minutes, (m) => m.handles);
  const sl = o.slots;
  const st = o.settle;
  const riddenThrough = postgresCutsReachingTheApp(a);
  const pct = (x: number) => (Number.isNaN(x) ? 'n/a (under 4 samples)' : `${fmt(x * 100, 1)}%`);
  return [
    {
      check: 'over-admissions outside outages: 0',
      measured: `${a.overAdmissionsOutsideOutages} windows, ${a.overUnitsOutsideOutages} units`,
      ok: a.overAdmissionsOutsideOutages === 0,
    },
    {
      check: 'Redis over its own limit outside faults: 0',
      measured: String(a.redisOverOutsideFaults),
      ok: a.redisOverOutsideFaults === 0,
    },
    {
      check: 'outage windows within the bound',
      measured: `${a.outageWindowsOver} over the limit, worst ${fmt(a.worstOutageRatio, 2)}x, ${a.outageWindowsOverBound} over the bound`,
      ok: a.outageWindowsOverBound === 0,
    },
    {
      check: 'admitted by Redis while locked: 0',
      measured: String(a.admittedWhileLocked),
      ok: a.admittedWhileLocked === 0,
    },
    {
      check: 'store receipts and times agree with the window model and the clock',
      measured: `${a.receiptMismatches} receipts, ${a.storeTimesOutside} times outside the call`,
      ok: a.receiptMismatches === 0 && a.storeTimesOutside === 0,
    },
    {
      check: 'locks listed by locked() = locks in force at the end',
      measured: `${a.locksListed} listed, ${a.locksInForce} in force, ${a.locksMissing.length} missing, ${a.locksExtra.length} extra`,
      ok: a.locksMissing.length === 0 && a.locksExtra.length === 0,
    },
    {
      check: 'handlers of one key running at once outside outages: never above the limit',
      measured: `${sl.overOutsideOutages} times (peak ${sl.peakOutsideOutages}); ${sl.overInOutages} above it in outages or past a lapsed slot`,
      ok: sl.overOutsideOutages === 0,
    },
    {
      check: 'slots still held after the last request (status() holders): none',
      measured: `${sl.leftHolders.length} keys, ${sl.leftHolders.reduce((n, h) => n + h.count, 0)} slots`,
      ok: sl.leftHolders.length === 0,
    },
    {
      check: 'every slot lost without its release counted by the lapsed metric',
      measured: `${sl.sureLapses} surely lapsed, ${sl.observedLapses} counted; ${sl.lapsesMissed.length} processes short`,
      ok: sl.lapsesMissed.length === 0,
    },
    {
      check: 'settled costs within limit + the differences settled after the last admission',
      measured: `${st.overBoundOutsideOutages} of ${fmt(st.periods)} periods over it outside outages (${st.overLimit} past the limit on debts)`,
      ok: st.overBoundOutsideOutages === 0,
    },
    {
      check: 'PostgreSQL statements cut by a role timeout or ended by the server, reaching the app: 0',
      measured: String(riddenThrough),
      ok: riddenThrough === 0,
    },
    { check: 'unhandled rejections: 0', measured: String(o.unhandled.length), ok: o.unhandled.length === 0 },
    {
      check: 'heap after GC, second half of the run: < 5% growth (levels off)',
      measured: `${pct(lateHeap)} (from the second sample: ${pct(growth)})`,
      ok: Number.isNaN(lateHeap) || lateHeap < 0.05,
    },
    {
      check: 'open handles, second half of the run: < 50% growth (levels off)',
      measured: pct(lateHandles),
      ok: Number.isNaN(lateHandles) || lateHandles < 0.5,
    },
  ];
}

const table = (head: string[], rows: string[][]) =>
  [
    `| ${head.join(' | ')} |`,
    `| ${head.map(() => '---').join(' | ')} |`,
    ...rows.map((r) => `| ${r.join(' | ')} |`),
  ].join('\n');

export function soakMarkdown(o: SoakOutcome): string {
  const a = o.audit;
  const c = o.config;
  const minutes = Math.max(0, ...o.minutes.map((m) => m.length));
  const perMinute = Array.from({ length: minutes }, (_, i) => {
    const row = o.minutes.map((m) => m[i]).filter((m): m is MinuteFigures => m !== undefined);
    return [
      String(i + 1),
      row.map((m) => fmt(m.heapAfterGcBytes / 2 ** 20, 1)).join(' / '),
      row.map((m) => fmt(m.rssBytes / 2 ** 20, 0)).join(' / '),
      row.map((m) => fmt(m.handles)).join(' / '),
      fmt(Math.max(...row.map((m) => m.eventLoopP99Ms)), 1),
      fmt(Math.max(...row.map((m) => m.storeCallP99Ms)), 1),
      fmt(row.reduce((sum, m) => sum + m.storeCalls, 0)),
    ];
  });
  return [
    `## Soak: ${c.processes} app processes, ${fmt(c.durationMs / 60_000, 1)} minutes, ${o.faults.length} faults`,
    '',
    `Written by \`npm run soak\` on ${new Date(o.startedAt).toISOString()} (${os.cpus().length} cores, Node ${process.version}, Redis ${o.redisVersion}, PostgreSQL ${o.postgresVersion}). ` +
      `Each process runs its limiters on a spawned 3-master Redis Cluster with a replica each, on a standalone Redis and on a PostgreSQL server, ${c.sessions} request loops per store, ` +
      `storeTimeout ${c.storeTimeoutMs} ms, the README's ioredis settings; traffic over every window type, grouped rules (one record per identity on Redis), the login and code recipes with reported outcomes, ` +
      `lockouts and operator resets; and ${c.flightSessions} loops per store each of work in flight: Express responses streamed through a concurrency rule (lease 1 s, a quarter abandoned mid-stream), ` +
      '`acquire` callers waiting for a slot (lease 3 s), checks holding one (lease 2 s), and calls settled at 0 to twice their estimate. ' +
      'Every call is written down outside the library with the wall-clock bracket around it and the store time the store decided at, every handler with when it ran; ' +
      'the audits replay each key against its rule (bench/soak/windows.ts), count handlers at once per key, and charge settled costs per period. ' +
      `The machine's load average (1 min) was ${fmt(o.load.start, 1)} when the traffic started and ${fmt(o.load.end, 1)} when it stopped, on ${os.cpus().length} cores: ` +
      'what runs beside the soak shares them, and slows its calls (store calls past storeTimeout go to the failure policy, as in production).',
    '',
    table(
      ['check', 'measured', ''],
      soakChecks(o).map((x) => [x.check, x.measured, x.ok ? 'ok' : '**FAILED**']),
    ),
    '',
    table(
      ['figure', 'value'],
      [
        ['decisions', fmt(a.decisions)],
        ['admissions', fmt(a.admissions)],
        ['decided by the failure policy', fmt(a.policyDecisions)],
        ['store evaluations (unanswered)', `${fmt(a.evaluations)} (${fmt(a.unanswered)})`],
        ['keys audited', fmt(a.keys)],
        [
          'store errors by cause (most frequent)',
          [...a.storeErrors]
            .sort((x, y) => y[1] - x[1])
            .slice(0, 4)
            .map(([cause, n]) => `${fmt(n)} ${cause}`)
            .join('; ') || 'none',
        ],
        [
          'handlers that held a slot (streams abandoned mid-stream)',
          `${fmt(o.slots.handlers)} (${fmt(o.slots.abortedStreams)})`,
        ],
        [
          'slots held, released, lapsed (observers)',
          `${fmt(o.slots.held)}, ${fmt(o.slots.released)}, ${fmt(o.slots.observedLapses)}`,
        ],
        [
          'calls that gave up (by kind)',
          Object.entries(o.slots.gaveUp)
            .map(([what, n]) => `${fmt(n)} ${what}`)
            .join('; ') || 'none',
        ],
        [
          'settles (above, below the estimate; failed)',
          `${fmt(o.settle.settles)} (${fmt(o.settle.above)}, ${fmt(o.settle.below)}; ${fmt(o.settle.failed)})`,
        ],
        [
          'settled periods with an outage, worst charge against the bound',
          `${fmt(o.settle.outagePeriods)}, ${fmt(o.settle.worstOutageRatio, 2)}x`,
        ],
        [
          'store clock samples, worst distance from the app clock',
          `${fmt(a.clockSamples)}, ${fmt(a.clockDeviationMs)} ms`,
        ],
      ],
    ),
    '',
    table(
      [
        '#',
        'at (s)',
        'fault',
        'stores',
        'lasted (ms)',
        'store deciding again after (ms, probe)',
        'last policy decision after the end (ms)',
      ],
      o.faults.map((f, i) => [
        String(i + 1),
        fmt((f.start - o.startedAt) / 1000, 1),
        `${f.kind}: ${f.detail}`,
        f.stores.join(', ') || 'an app process',
        fmt(f.end - f.start),
        fmt(f.probeBackMs),
        fmt(Math.max(0, a.backOnRedisMs[i] ?? 0)),
      ]),
    ),
    '',
    minutes === 0
      ? 'No whole sampling period of traffic: no figures per period.'
      : table(
          [
            c.sampleEveryMs === 60_000 ? 'minute' : `sample (every ${fmt(c.sampleEveryMs / 1000)} s)`,
            `heap after GC (MiB, each process)`,
            'RSS (MiB, each process)',
            'open handles (each process)',
            'event-loop delay p99 (ms, worst process)',
            'store call p99 (ms, worst process)',
            'store calls',
          ],
          perMinute,
        ),
  ].join('\n');
}
