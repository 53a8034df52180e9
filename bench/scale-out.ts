// Scale-out scenario: P app processes sharing one Redis, and a 3-master Cluster; aggregate
// decisions/s and Redis CPU per decision summed over the servers (INFO cpu), peers and the raw script beside ours.
// `npm run bench -- scale-out` (SCALE_OUT_PROCESSES=1,2,4 SCALE_OUT_SECONDS=5): writes its block in bench/RESULTS.md.
import os from 'node:os';
import { type NodeAddress, startCluster, startRedis, withConnection } from '../test/support/redis.js';
import { Child, type Message } from './fork.js';
import { markdownTable } from './report.js';
import { RESULTS_PATH, writeBlock } from './results-file.js';
import type { WorkerTask } from './scale-out-worker.js';

const processes = (process.env.SCALE_OUT_PROCESSES ?? '1,2,4').split(',').map(Number);
const seconds = Number(process.env.SCALE_OUT_SECONDS ?? 5);
const reps = Number(process.env.BENCH_REPS ?? 1);
/** Decisions in flight per process, as in the issue's figures. */
const CONCURRENCY = 64;
/** Far above what a run reaches: every decision is an admission on a fresh key. */
const LIMIT = 1_000_000;
const WINDOW_MS = 60_000;

const STANDALONE = [
  'raw floor (EVALSHA)',
  'express-rate-limit + rate-limit-redis',
  'rate-limiter-flexible RateLimiterRedis',
  'ratekeeper redis fixed',
];
const CLUSTER = ['raw floor (EVALSHA)', 'ratekeeper redis fixed'];

interface Row {
  target: 'redis' | 'cluster';
  contender: string;
  processes: number;
  perSecond: number;
  /** Redis CPU per decision, µs, summed over the servers. */
  cpuUs: number;
  errors: number;
  firstError?: string;
}

/** CPU seconds (user + system) a server has used, from INFO cpu. */
async function cpuSeconds(node: NodeAddress): Promise<number> {
  const info = String(await withConnection(node, (conn) => conn.info('cpu')));
  const field = (name: string) => Number(new RegExp(`^${name}:([\\d.]+)`, 'm').exec(info)?.[1] ?? Number.NaN);
  return field('used_cpu_user') + field('used_cpu_sys');
}

async function expect(child: Child, type: string, timeoutMs: number): Promise<Message> {
  const message = await child.next(timeoutMs);
  if (message.type === 'failed') throw new Error(`${child.label}: ${String(message.error)}`);
  if (message.type !== type) throw new Error(`${child.label}: expected ${type}, got ${message.type}`);
  return message;
}

/** One measurement: P processes, each its own client and limiter, started together on the same servers. */
async function measure(
  target: WorkerTask['target'],
  servers: NodeAddress[],
  contender: string,
  count: number,
  run: number,
): Promise<Row> {
  const children = Array.from({ length: count }, (_, i) =>
    Child.start('scale-out-worker', `worker ${i + 1}/${count}`),
  );
  try {
    await Promise.all(children.map((child) => expect(child, 'up', 60_000)));
    const task: WorkerTask = {
      contender,
      target,
      prefix: `so${run}:`,
      limit: LIMIT,
      windowMs: WINDOW_MS,
      concurrency: CONCURRENCY,
      warmupMs: 1000,
      durationMs: seconds * 1000,
    };
    for (const child of children) child.send({ type: 'start', task });
    await Promise.all(children.map((child) => expect(child, 'ready', 60_000)));
    const cpuBefore = await Promise.all(servers.map(cpuSeconds));
    const started = performance.now();
    for (const child of children) child.send({ type: 'go' });
    const done = await Promise.all(children.map((child) => expect(child, 'done', seconds * 1000 + 30_000)));
    const elapsedS = (performance.now() - started) / 1000;
    const cpuAfter = await Promise.all(servers.map(cpuSeconds));
    const cpu = cpuAfter.reduce((sum, after, i) => sum + after - (cpuBefore[i] ?? 0), 0);
    const ops = done.reduce((sum, m) => sum + Number(m.ops), 0);
    const errors = done.reduce((sum, m) => sum + Number(m.errors), 0);
    const firstError = done.find((m) => m.firstError !== undefined)?.firstError;
    return {
      target: target.kind,
      contender,
      processes: count,
      perSecond: ops / elapsedS,
      cpuUs: (cpu / ops) * 1e6,
      errors,
      ...(firstError !== undefined && { firstError: String(firstError) }),
    };
  } finally {
    await Promise.all(children.map((child) => child.stop()));
  }
}

function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.floor(sorted.length / 2)] ?? Number.NaN;
}

/** Runs every contender at every P, `reps` interleaved repetitions; medians. */
async function sweep(
  target: WorkerTask['target'],
  servers: NodeAddress[],
  contenders: string[],
  log: (line: string) => void,
): Promise<Row[]> {
  const rows: Row[] = [];
  let run = 0;
  for (const count of processes) {
    const runs = new Map<string, Row[]>();
    for (let r = 0; r < reps; r++) {
      for (const contender of contenders) {
        const row = await measure(target, servers, contender, count, run++);
        log(
          `  ${target.kind} P=${count} ${contender}: ${Math.round(row.perSecond)}/s, ${row.cpuUs.toFixed(1)} µs Redis CPU per decision${row.errors ? `, ${row.errors} errors (${row.firstError})` : ''}`,
        );
        runs.set(contender, [...(runs.get(contender) ?? []), row]);
      }
    }
    for (const contender of contenders) {
      const list = runs.get(contender) ?? [];
      const first = list[0] as Row;
      rows.push({
        ...first,
        perSecond: median(list.map((row) => row.perSecond)),
        cpuUs: median(list.map((row) => row.cpuUs)),
        errors: list.reduce((sum, row) => sum + row.errors, 0),
      });
    }
  }
  return rows;
}

function table(title: string, rows: Row[], contenders: string[]): string {
  const cell = (row: Row | undefined) =>
    row === undefined
      ? '–'
      : `${(row.perSecond / 1000).toFixed(1)}k/s (${row.cpuUs.toFixed(1)} µs)${row.errors ? ` ${row.errors} errors` : ''}`;
  return markdownTable({
    title,
    columns: ['app processes', ...contenders],
    rows: processes.map((count) => [
      String(count),
      ...contenders.map((name) =>
        cell(rows.find((row) => row.processes === count && row.contender === name)),
      ),
    ]),
  });
}

export async function runScaleOut(log: (line: string) => void): Promise<void> {
  const redis = await startRedis();
  let standalone: Row[];
  try {
    log(`standalone redis-server ${redis.version} on port ${redis.port}`);
    standalone = await sweep({ kind: 'redis', port: redis.port }, [redis], STANDALONE, log);
  } finally {
    await redis.stop();
  }
  const cluster = await startCluster();
  let clustered: Row[];
  try {
    const masters = cluster.nodes.filter((node) => node.role === 'master');
    const nodes = masters.map(({ host, port }) => ({ host, port }));
    clustered = await sweep({ kind: 'cluster', nodes }, masters, CLUSTER, log);
  } finally {
    await cluster.stop();
  }
  const cpus = os.cpus();
  const body = [
    '## Scale-out, 2-core figures',
    '',
    `Made by \`npm run bench -- scale-out\` (SCALE_OUT_PROCESSES=${processes.join(',')}, SCALE_OUT_SECONDS=${seconds}, ` +
      `BENCH_REPS=${reps}) on ${cpus.length} × ${cpus[0]?.model ?? '?'}, Node ${process.version}, ${new Date().toISOString().slice(0, 10)}. ` +
      `Every process is its own Node with its own client and limiter, ${CONCURRENCY} decisions in flight, fresh keys (all admitted), ` +
      'fixed window, one rule. Cells: aggregate decisions per second (Redis CPU per decision from INFO cpu, summed over the servers). ' +
      'Here the app processes, the load and every redis-server share 2 cores, no pinning: aggregate rates are bounded by the ' +
      'machine, not by Redis, and say little about the quiet 16-core machine of the issue; Redis CPU per decision is the steadier ' +
      'figure, and `npx tsx bench/redis-callgrind.ts` (instructions per decision) the machine-independent one.',
    '',
    table('One Redis shared by P processes', standalone, STANDALONE),
    '',
    table('3-master Cluster (the peers have no Cluster mode measured here)', clustered, CLUSTER),
  ].join('\n');
  log(body);
  await writeBlock('bench:scale-out', body, process.env.BENCH_OUT ?? RESULTS_PATH);
}
