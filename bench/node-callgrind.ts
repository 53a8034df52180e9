// Instructions the Node process runs per HTTP request, counted by callgrind: what each limiter middleware adds to a
// real request, independent of machine load.
// `npm run bench -- node-cost`; alone: npx tsx bench/node-callgrind.ts [app-regex]
//   (NODE_COST_WARMUP=2000, NODE_COST_REQUESTS=3000, NODE_COST_RUNS=2, NODE_COST_PARALLEL=2 apps at a time;
//   CALLGRIND_KEEP=1 keeps the dumps for callgrind_annotate; NODE_COST_SOURCE=src measures src/ and adapters/
//   through tsx instead of the package as built)
// ratekeeper is measured as users run it: the package built by `npm run build` (dist/, made first), as
// the peers are measured from their published builds. Through tsx, every closure the request path makes
// is also named at run time (esbuild's keepNames: a __name call, Object.defineProperty), which the
// build does not do.
// Each app (bench/node-cost-app.ts: Express 5 bare, with express-rate-limit, with ratekeeper; memory and Redis)
// runs with its own keep-alive client (10 requests in flight, GET /, one rule keyed by IP, limit 1e9, fixed 1 h)
// in one Node process under valgrind --tool=callgrind. The process sends its warm-up; this one zeroes the
// counters (callgrind_control -z); the process sends the measured requests; this one dumps them (-d):
// instructions of the process (every thread: JIT, GC; the client's work too, alike for every app) per request,
// less the bare app's. Redis runs outside valgrind and is not counted (bench/redis-callgrind.ts counts it).

import { execFile, spawn } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { stopChild, track } from '../test/support/processes.js';
import { startRedis } from '../test/support/redis.js';
import { IN_FLIGHT, NODE_COST_APPS, type NodeCostApp } from './node-cost-app.js';
import { num, ratio, type Section, type Table, textTable } from './report.js';
import { median } from './stats.js';

const run = promisify(execFile);

const NAMES: Record<NodeCostApp, string> = {
  bare: 'express (bare)',
  'erl-memory': 'express-rate-limit (memory)',
  'erl-redis': 'express-rate-limit + rate-limit-redis',
  'rk-memory': 'ratekeeper (memory)',
  'rk-redis': 'ratekeeper (RedisStore, ioredis)',
  'rk-memory-concurrency': 'ratekeeper concurrency rule (memory)',
  'rk-redis-concurrency': 'ratekeeper concurrency rule (RedisStore, ioredis)',
};
/** Each ratekeeper app's peer: the ratio's denominator. */
const PEER: Partial<Record<NodeCostApp, NodeCostApp>> = {
  'rk-memory': 'erl-memory',
  'rk-redis': 'erl-redis',
};
/** Each concurrency app's app with a fixed rule on the same store (target: at most 1.3x its added work, issue 44). */
const FIXED_TWIN: Partial<Record<NodeCostApp, NodeCostApp>> = {
  'rk-memory-concurrency': 'rk-memory',
  'rk-redis-concurrency': 'rk-redis',
};
const CONCURRENCY_TARGET = 1.3;

export interface NodeCostRow {
  app: NodeCostApp;
  name: string;
  /** Instructions of the process per request, one figure per run. */
  perRequest: number[];
  /** perRequest less the bare app's, per run. */
  added: number[];
}

function lastDump(dir: string): string {
  const files = readdirSync(dir)
    .filter((f) => /^cg\.out\.\d+\.\d+$/.test(f))
    .sort((a, b) => Number(a.split('.').pop()) - Number(b.split('.').pop()));
  return join(dir, files[files.length - 1] as string);
}

function dumpInstructions(file: string): number {
  const totals = /^(?:totals|summary): (\d+)/m.exec(readFileSync(file, 'utf8'));
  if (totals === null) throw new Error('no totals in the callgrind dump');
  return Number(totals[1]);
}

/**
 * Whether the warm-up runs uninstrumented (NODE_COST_STEADY=1, or a warm-up above 5,000 requests): a
 * steady state, every hot function compiled before the count, in minutes rather than hours.
 */
function uninstrumentedWarmUp(): boolean {
  return process.env.NODE_COST_STEADY === '1' || Number(process.env.NODE_COST_WARMUP ?? 2000) > 5000;
}

/** One app in its own process under callgrind: instructions per measured request. */
async function measureApp(
  app: NodeCostApp,
  redisPort: number,
  warmUp: number,
  requests: number,
  keep: boolean,
): Promise<number> {
  const dir = mkdtempSync(join(tmpdir(), `rk-node-cost-${app}-`));
  const script = fileURLToPath(new URL('./node-cost-app.ts', import.meta.url));
  const built = process.env.NODE_COST_SOURCE !== 'src';
  const child = track(
    spawn(
      'valgrind',
      [
        '--tool=callgrind',
        // The warm-up uninstrumented (several times faster), instrumentation switched on after it.
        ...(uninstrumentedWarmUp() ? ['--instr-atstart=no'] : []),
        `--callgrind-out-file=${join(dir, 'cg.out.%p')}`,
        process.execPath,
        '--import',
        'tsx',
        script,
        app,
        String(redisPort),
        String(warmUp),
        String(requests),
      ],
      {
        stdio: ['pipe', 'pipe', 'inherit'],
        cwd: fileURLToPath(new URL('..', import.meta.url)),
        env: built ? { ...process.env, BENCH_RATEKEEPER_MODULE: 'dist/index.js' } : process.env,
      },
    ),
  );
  try {
    const lines = createInterface({ input: child.stdout as NonNullable<typeof child.stdout> });
    const said = (word: string) =>
      new Promise<void>((resolve, reject) => {
        const onLine = (line: string) => {
          if (line !== word) return;
          lines.off('line', onLine);
          resolve();
        };
        lines.on('line', onLine);
        child.once('exit', (code) =>
          reject(new Error(`${app}: the process exited (${code}) before '${word}'`)),
        );
      });
    await said('warm');
    if (uninstrumentedWarmUp()) await run('callgrind_control', ['-i', 'on', String(child.pid)]);
    await run('callgrind_control', ['-z', String(child.pid)]);
    const done = said('done');
    child.kill('SIGUSR2');
    await done;
    await run('callgrind_control', ['-d', String(child.pid)]);
    return Math.round(dumpInstructions(lastDump(dir)) / requests);
  } finally {
    await stopChild(child, 10_000);
    if (keep) console.log(`  ${app}: dumps kept in ${dir}`);
    else rmSync(dir, { recursive: true, force: true });
  }
}

export async function runNodeCallgrind(
  redisPort: number,
  log: (line: string) => void,
  options: { filter?: RegExp } = {},
): Promise<{ section: Section; rows: NodeCostRow[] }> {
  const warmUp = Number(process.env.NODE_COST_WARMUP ?? 2000);
  const requests = Number(process.env.NODE_COST_REQUESTS ?? 3000);
  const runs = Number(process.env.NODE_COST_RUNS ?? 2);
  const keep = process.env.CALLGRIND_KEEP === '1';
  const apps = NODE_COST_APPS.filter((a) => a === 'bare' || !options.filter || options.filter.test(a));
  if (process.env.NODE_COST_SOURCE !== 'src') {
    log('Building the package (npm run build): ratekeeper is measured from dist/');
    await run('npm', ['run', 'build'], {
      cwd: fileURLToPath(new URL('..', import.meta.url)),
      maxBuffer: 1 << 26,
    });
  }
  log(
    `Express apps under callgrind, one process each with its client (${IN_FLIGHT} in flight): ` +
      `${warmUp} requests of warm-up, ${requests} measured, ${runs} runs`,
  );
  const rows: NodeCostRow[] = apps.map((app) => ({ app, name: NAMES[app], perRequest: [], added: [] }));
  // Two at a time by default: valgrind runs one thread at a time, and the machine has cores to spare for two.
  const parallel = Math.max(1, Number(process.env.NODE_COST_PARALLEL ?? 2));
  for (let r = 0; r < runs; r++) {
    const counts: number[] = [];
    for (let i = 0; i < apps.length; i += parallel) {
      const pair = apps.slice(i, i + parallel);
      const measured = await Promise.all(
        pair.map((app) => measureApp(app, redisPort, warmUp, requests, keep)),
      );
      counts.push(...measured);
    }
    const bare = counts[0] as number;
    for (const [i, row] of rows.entries()) {
      const count = counts[i] as number;
      row.perRequest.push(count);
      row.added.push(count - bare);
      log(`  run ${r + 1}: ${row.name.padEnd(40)} ${num(count).padStart(10)} (added ${num(count - bare)})`);
    }
  }
  return { section: nodeSection(rows, warmUp, requests), rows };
}

/** Each run's ratio of a ratekeeper row's added instructions to its peer's (or to `over`'s). */
export function peerRatios(
  rows: readonly NodeCostRow[],
  app: NodeCostApp,
  over: NodeCostApp | undefined = PEER[app],
): number[] {
  const own = rows.find((r) => r.app === app);
  const peer = rows.find((r) => r.app === over);
  if (own === undefined || peer === undefined) return [];
  return own.added.map((added, i) => added / (peer.added[i] as number));
}

function nodeSection(rows: NodeCostRow[], warmUp: number, requests: number): Section {
  const table: Table = {
    title: 'express: Node instructions per HTTP request (callgrind), per run',
    columns: ['app', 'instructions / request', 'added by the limiter', 'vs express-rate-limit (same store)'],
    rows: rows.map((r) => [
      r.name,
      r.perRequest.map((n) => num(n)).join('; '),
      r.app === 'bare' ? '-' : r.added.map((n) => num(n)).join('; '),
      PEER[r.app]
        ? peerRatios(rows, r.app)
            .map((x) => ratio(x))
            .join('; ')
        : '-',
    ]),
  };
  // The verdict is on the median run: the bare app a run's figures are less moves by up to 90,000
  // instructions per request between runs of the same code (bench/RESULTS.md), and a single run's ratio
  // with it (1.00x-1.95x for one tree), so each run's ratio and difference are shown beside it.
  const twins: Table = {
    title: `a concurrency rule vs a fixed rule on the same store: added instructions, target <= ${CONCURRENCY_TARGET}x (median of the runs)`,
    columns: [
      'app',
      'vs the fixed rule, per run',
      'median',
      'instructions / request more than the fixed rule, per run',
      'verdict',
    ],
    rows: rows.flatMap((r) => {
      const twin = FIXED_TWIN[r.app];
      const ratios = twin === undefined ? [] : peerRatios(rows, r.app, twin);
      const fixed = rows.find((f) => f.app === twin);
      if (ratios.length === 0 || fixed === undefined) return [];
      const middle = median(ratios);
      return [
        [
          r.name,
          ratios.map((x) => ratio(x)).join('; '),
          ratio(middle),
          r.perRequest.map((n, i) => num(n - (fixed.perRequest[i] as number))).join('; '),
          middle <= CONCURRENCY_TARGET ? 'met' : 'missed',
        ],
      ];
    }),
  };
  return {
    id: 'node-callgrind',
    title: 'Node work per HTTP request (callgrind)',
    intro:
      `Each app in its own Node process under valgrind --tool=callgrind with a keep-alive client in the same ` +
      `process (${IN_FLIGHT} requests in flight, GET /, one rule keyed by IP, limit 1e9, fixed 1 h; ratekeeper's ` +
      `RedisStore with storeTimeout 600000 and onStoreError 'deny', default headers; express-rate-limit with ` +
      `standardHeaders 'draft-6' and legacyHeaders true, rate-limit-redis on the same Redis): ${num(warmUp)} ` +
      `requests of warm-up, counters zeroed, ${num(requests)} requests measured, counters dumped; instructions of ` +
      'the process (all threads) per request. "Added" is the app less the bare app of the same run. ' +
      (process.env.NODE_COST_SOURCE === 'src'
        ? 'ratekeeper from src/ and adapters/ through tsx (NODE_COST_SOURCE=src). '
        : 'ratekeeper as built by `npm run build` (dist/index.js, dist/express.js), as users run it. ') +
      'Command: `npm run bench -- node-cost`.',
    tables: twins.rows.length > 0 ? [table, twins] : [table],
  };
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const filter = process.argv[2] ? new RegExp(process.argv[2], 'i') : undefined;
  const redis = await startRedis();
  try {
    const { section } = await runNodeCallgrind(
      redis.port,
      (line) => console.log(line),
      filter ? { filter } : {},
    );
    for (const table of section.tables) console.log(textTable(table));
  } finally {
    await redis.stop();
  }
  process.exit(0);
}
