// The soak's figures as Markdown (its block in bench/RESULTS.md) and as the checks that must hold.
import os from 'node:os';
import type { AuditResult } from './audit.js';
import type { SoakConfig } from './config.js';
import type { InjectedFault } from './faults.js';
import type { MinuteFigures } from './worker.js';

export interface SoakOutcome {
  config: SoakConfig;
  startedAt: number;
  faults: Array<InjectedFault & { probeBackMs: number }>;
  /** Per process, its figures per minute. */
  minutes: MinuteFigures[][];
  unhandled: string[];
  audit: AuditResult;
  redisVersion: string;
}

const fmt = (n: number, digits = 0) =>
  n.toLocaleString('en-US', { maximumFractionDigits: digits, minimumFractionDigits: digits });

/** Heap growth from minute 2 to the last minute, per process, worst one (a fraction); NaN under 3 minutes. */
export function heapGrowth(minutes: MinuteFigures[][]): number {
  let worst = Number.NaN;
  for (const list of minutes) {
    const second = list[1];
    const last = list[list.length - 1];
    if (second === undefined || last === undefined || list.length < 3) continue;
    const growth = (last.heapAfterGcBytes - second.heapAfterGcBytes) / second.heapAfterGcBytes;
    worst = Number.isNaN(worst) ? growth : Math.max(worst, growth);
  }
  return worst;
}

/** The checks that must hold, each with what was measured; failures first. */
export function soakChecks(o: SoakOutcome): Array<{ check: string; measured: string; ok: boolean }> {
  const a = o.audit;
  const growth = heapGrowth(o.minutes);
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
    { check: 'unhandled rejections: 0', measured: String(o.unhandled.length), ok: o.unhandled.length === 0 },
    {
      check: 'heap after GC, minute 2 to the end: < 5% growth',
      measured: Number.isNaN(growth) ? 'n/a (under 3 minutes)' : `${fmt(growth * 100, 1)}%`,
      ok: Number.isNaN(growth) || growth < 0.05,
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
      fmt(Math.max(...row.map((m) => m.eventLoopP99Ms)), 1),
      fmt(Math.max(...row.map((m) => m.storeCallP99Ms)), 1),
      fmt(row.reduce((sum, m) => sum + m.storeCalls, 0)),
    ];
  });
  return [
    `## Soak: ${c.processes} app processes, ${fmt(c.durationMs / 60_000, 1)} minutes, ${o.faults.length} faults`,
    '',
    `Written by \`npm run soak\` on ${new Date(o.startedAt).toISOString()} (${os.cpus().length} cores, Node ${process.version}, Redis ${o.redisVersion}). ` +
      `Each process runs its limiters on a spawned 3-master Cluster with a replica each and on a standalone server, ${c.sessions} request loops per store, ` +
      `storeTimeout ${c.storeTimeoutMs} ms, the README's ioredis settings; traffic over every window type, the login and code recipes with reported outcomes, ` +
      'lockouts and operator resets. Every call is written down outside the library with the wall-clock bracket around it and the store time Redis decided at; ' +
      'the audit replays each key against its rule (bench/soak/windows.ts).',
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
          'Redis TIME samples, worst distance from the app clock',
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
        'Redis deciding again after (ms, probe)',
        'last policy decision after the end (ms)',
      ],
      o.faults.map((f, i) => [
        String(i + 1),
        fmt((f.start - o.startedAt) / 1000, 1),
        `${f.kind}: ${f.detail}`,
        f.stores.join(', '),
        fmt(f.end - f.start),
        fmt(f.probeBackMs),
        fmt(Math.max(0, a.backOnRedisMs[i] ?? 0)),
      ]),
    ),
    '',
    minutes === 0
      ? 'No whole minute of traffic: no per-minute figures.'
      : table(
          [
            'minute',
            'heap after GC (MiB, each process)',
            'event-loop delay p99 (ms, worst process)',
            'store call p99 (ms, worst process)',
            'store calls',
          ],
          perMinute,
        ),
  ].join('\n');
}
