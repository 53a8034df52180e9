// `npm run bench -- hot-key`: 4 processes on one key (limit 100,000 a minute, demand above it), leasing off
// and on in the same run, on Redis and on PostgreSQL, with and without one process killed partway; writes
// its block in bench/RESULTS.md.
import os from 'node:os';
import { type HotKeyRun, runHotKey, totals } from '../test/support/hot-key.js';
import { startPostgres } from '../test/support/postgres.js';
import { commandCalls, startRedis } from '../test/support/redis.js';
import { RESULTS_PATH, writeBlock } from './results-file.js';

const PROCESSES = 4;
const LIMIT = 100_000;
/** Long enough for leasing off to reach the limit on a busy 2-core machine, well inside the minute. */
const RUN_MS = Number(process.env.HOT_KEY_RUN_MS ?? 12_000);
const KILL_AFTER_MS = 300;
/** Decisions each process makes on a key of its own first: its code compiled, as a serving process's is. */
const WARM_UP = 2000;
const reps = Number(process.env.BENCH_REPS ?? 2);

interface Row {
  backend: string;
  leasing: boolean;
  killed: boolean;
  admitted: number;
  /** Decisions per second while the key was under its limit (all processes, to the last admission). */
  perSecond: number;
  /** Store script calls (Redis) or statements (PostgreSQL) per admitted decision. */
  callsPerAdmit: number;
  errors: number;
}

function loadLine(): string {
  const [one, five] = os.loadavg();
  return `load average ${one?.toFixed(1)} (1 min), ${five?.toFixed(1)} (5 min) on ${os.cpus().length} cores`;
}

export async function runHotKeyBench(log: (line: string) => void): Promise<void> {
  const redis = await startRedis();
  const pgServer = await startPostgres();
  const loadBefore = loadLine();
  log(`redis-server ${redis.version} on ${redis.port}, PostgreSQL on ${pgServer.port}; ${loadBefore}`);
  const rows: Row[] = [];
  let n = 0;
  const scriptCalls = async () =>
    (await commandCalls(redis, 'evalsha')) +
    (await commandCalls(redis, 'fcall')) +
    (await commandCalls(redis, 'eval'));
  try {
    for (let r = 0; r < reps; r++)
      for (const killed of [false, true])
        for (const backend of ['redis', 'postgres'] as const)
          for (const leasing of [false, true]) {
            const run: HotKeyRun = {
              backend,
              url: backend === 'redis' ? redis.url : pgServer.url,
              prefix: `hk${n++}`,
              window: { type: 'fixed', size: '1m' },
              limit: LIMIT,
              keys: ['tenant'],
              leasing,
              inFlight: 16,
              runMs: RUN_MS,
              warmUp: WARM_UP,
            };
            let before = 0;
            const tallies = await runHotKey(
              run,
              PROCESSES,
              killed ? { afterMs: KILL_AFTER_MS } : undefined,
              async () => {
                if (backend === 'redis') before = await scriptCalls();
              },
            );
            const t = totals(tallies);
            const calls = backend === 'redis' ? (await scriptCalls()) - before : t.statements;
            const row: Row = {
              backend,
              leasing,
              killed,
              admitted: t.admitted,
              perSecond: (t.decisionsToLastAdmit / t.lastAdmitMs) * 1000,
              callsPerAdmit: calls / Math.max(1, t.admitted),
              errors: t.storeErrors,
            };
            rows.push(row);
            log(
              `  ${backend} leasing ${leasing ? 'on ' : 'off'}${killed ? ', one killed' : ''}: admitted ${row.admitted}, ` +
                `${Math.round(row.perSecond)} decisions/s, ${row.callsPerAdmit.toFixed(3)} calls per admission` +
                (t.storeErrors ? `, ${t.storeErrors} store errors (${t.firstStoreError})` : ''),
            );
          }
  } finally {
    await redis.stop();
    await pgServer.stop();
  }
  const body = report(rows, loadBefore, loadLine());
  log(body);
  await writeBlock('bench:hot-key', body, process.env.BENCH_OUT ?? RESULTS_PATH);
}

function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  const mid = Math.floor(sorted.length / 2);
  return sorted.length % 2
    ? (sorted[mid] as number)
    : ((sorted[mid - 1] as number) + (sorted[mid] as number)) / 2;
}

function report(rows: Row[], loadBefore: string, loadAfter: string): string {
  const lines = [
    '## Hot key: exact leasing (`npm run bench -- hot-key`)',
    '',
    `${PROCESSES} processes (16 decisions in flight each) on one key of a fixed window, limit ${LIMIT.toLocaleString('en')} a minute, ` +
      `demand above it, ${RUN_MS / 1000} s per run; leasing off (as before) and on (\`leasing: true\`, the defaults) in the same run, ` +
      `${reps} repetitions; each process first makes ${WARM_UP.toLocaleString('en')} decisions on a key of its own (its code compiled, as a serving process's is). "One killed": the first process SIGKILLs itself ${KILL_AFTER_MS} ms in, holding its block, its tally ` +
      'written just before. Decisions/s: all decisions until the last admission, over that time. Calls (from the start, the warm-up not counted): EVALSHA, FCALL and ' +
      'EVAL from Redis INFO commandstats; on PostgreSQL, statements counted in the client (pg Client.query). ' +
      `Machine shared with other work: ${loadBefore} before, ${loadAfter} after.`,
    '',
    '| store | one killed | leasing | admitted (each run) | decisions/s (median) | × off | calls per admission (max) |',
    '|---|---|---|---|---|---|---|',
  ];
  for (const backend of ['redis', 'postgres'])
    for (const killed of [false, true]) {
      const off = rows.filter((r) => r.backend === backend && r.killed === killed && !r.leasing);
      for (const leasing of [false, true]) {
        const these = rows.filter(
          (r) => r.backend === backend && r.killed === killed && r.leasing === leasing,
        );
        const rate = median(these.map((r) => r.perSecond));
        const times = rate / median(off.map((r) => r.perSecond));
        lines.push(
          `| ${backend} | ${killed ? 'yes' : 'no'} | ${leasing ? 'on' : 'off'} | ${these.map((r) => r.admitted).join(', ')} | ` +
            `${Math.round(rate).toLocaleString('en')} | ${times.toFixed(1)} | ${Math.max(...these.map((r) => r.callsPerAdmit)).toFixed(3)} |`,
        );
      }
    }
  return lines.join('\n');
}
