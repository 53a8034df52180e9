// Core scenarios: decisions/s and latency per contender, on Redis or in memory, interleaved repetitions.

import type { Redis } from 'ioredis';
import type { BenchConfig } from './config.js';
import type { Contender, ContenderInstance, CoreScenario, LimitSpec, StoreKind } from './contender.js';
import { closeRedis, errorMessage, openRedis, redisCpuSeconds, withTimeout } from './contender.js';
import { measureHeap } from './heap.js';
import { type LoadResult, runLoad } from './load.js';
import { ms, num, pct, ratio, type Section, type Table } from './report.js';
import { median, pairedRatio, spread } from './stats.js';

/** Figures of one contender in one scenario; medians over the repetitions. */
export interface CoreRow {
  name: string;
  group: Contender['group'];
  note: string;
  runs: LoadResult[];
  opsPerSec: number;
  /** Half-range of decisions/s over the repetitions, relative to the median. */
  spread: number;
  /** Median of the per-repetition ratios to the floor's decisions/s. */
  vsFloor: number;
  p50Ms: number;
  p99Ms: number;
  /** Median admitted per repetition. */
  admitted: number;
  ops: number;
  errors: number;
  /** Median CPU of the benchmark process (the library's client side and the driver) per decision, µs. */
  clientCpuUs: number;
  /** Median CPU of redis-server per decision, µs (NaN in memory scenarios). */
  redisCpuUs: number;
  /** Median share of one core redis-server used during the runs (NaN in memory scenarios). */
  redisBusy: number;
  failed?: string;
}

export interface CoreResult {
  store: StoreKind;
  scenario: CoreScenario;
  floor: string;
  rows: CoreRow[];
}

interface Entry {
  contender: Contender;
  instance?: ContenderInstance;
  runs: LoadResult[];
  /** Per repetition: CPU µs per decision of this process, and of redis-server; redis-server's busy share. */
  cpu: Array<{ clientUs: number; redisUs: number; redisBusy: number }>;
  failed?: string;
}

const floorName: Record<StoreKind, string> = { redis: 'raw floor (EVALSHA)', memory: 'raw floor (Map)' };

function keysFor(scenario: CoreScenario, label: string, count: number): string[] {
  if (scenario === 'hot') return [`hot-${label}`];
  return Array.from({ length: count }, (_, i) => `u${label}-${i}`);
}

async function measure(
  entry: Entry,
  keys: readonly string[],
  maxMs: number,
  config: BenchConfig,
  store: StoreKind,
  admin?: Redis,
) {
  if (!entry.instance || entry.failed) return undefined;
  try {
    const redisBefore = admin ? await redisCpuSeconds(admin) : Number.NaN;
    const clientBefore = process.cpuUsage();
    const result = await runLoad(entry.instance.decide, {
      concurrency: config.concurrency,
      maxOps: store === 'redis' ? config.redisMaxOps : config.memoryMaxOps,
      maxMs,
      keys,
      stallTimeoutMs: config.stallTimeoutMs,
      sampleEvery: store === 'redis' ? 1 : 8,
    });
    const client = process.cpuUsage(clientBefore);
    const redisUsed = admin ? (await redisCpuSeconds(admin)) - redisBefore : Number.NaN;
    if (result.errors === result.ops) entry.failed = `every decision threw: ${result.firstError ?? '?'}`;
    return {
      result,
      cpu: {
        clientUs: (client.user + client.system) / Math.max(1, result.ops),
        redisUs: (redisUsed * 1e6) / Math.max(1, result.ops),
        redisBusy: redisUsed / (result.elapsedMs / 1000),
      },
    };
  } catch (error) {
    entry.failed = errorMessage(error);
    return undefined;
  }
}

/** One scenario on one store: create every contender, warm up, then interleave the repetitions. */
export async function runCoreScenario(
  store: StoreKind,
  scenario: CoreScenario,
  contenders: readonly Contender[],
  config: BenchConfig,
  redisPort: number,
  log: (line: string) => void,
): Promise<CoreResult> {
  const spec: LimitSpec = {
    limit: scenario === 'distinct' ? config.admittedLimit : config.hotLimit,
    windowMs: config.windowMs,
  };
  const entries: Entry[] = contenders
    .filter((c) => c.store === store && (c.scenarios ?? ['distinct', 'hot']).includes(scenario))
    .map((contender): Entry => ({ contender, runs: [], cpu: [] }));
  const runMs = store === 'redis' ? config.redisRunMs : config.memoryRunMs;
  // Reads redis-server's CPU around each run: which side, client or server, bounds a contender.
  const admin = store === 'redis' ? openRedis(redisPort) : undefined;

  for (const [index, entry] of entries.entries()) {
    try {
      entry.instance = await withTimeout(
        entry.contender.create(spec, { redisPort, prefix: `core-${scenario}-${index}:` }),
        config.stallTimeoutMs,
        'setup',
      );
    } catch (error) {
      entry.failed = `setup: ${errorMessage(error)}`;
    }
  }
  for (const entry of entries)
    await measure(entry, keysFor(scenario, 'warm', 1000), config.warmupMs, config, store);
  for (let rep = 0; rep < config.reps; rep++) {
    const keys = keysFor(scenario, `r${rep}`, config.distinctKeys);
    for (const entry of entries) {
      const measured = await measure(entry, keys, runMs, config, store, admin);
      if (measured) {
        entry.runs.push(measured.result);
        entry.cpu.push(measured.cpu);
      }
    }
    log(`  ${store} ${scenario}: repetition ${rep + 1}/${config.reps} done`);
  }
  for (const entry of entries) {
    try {
      if (entry.instance) await withTimeout(entry.instance.close(), config.stallTimeoutMs, 'close');
    } catch {
      // a contender that fails to close has still been measured
    }
  }
  if (admin) await closeRedis(admin);

  const floor = entries.find((e) => e.contender.name === floorName[store]);
  const floorOps = floor?.runs.map((r) => r.opsPerSec) ?? [];
  const rows = entries.map((entry): CoreRow => {
    const ops = entry.runs.map((r) => r.opsPerSec);
    const row: CoreRow = {
      name: entry.contender.name,
      group: entry.contender.group,
      note: entry.contender.note ?? '',
      runs: entry.runs,
      opsPerSec: median(ops),
      spread: spread(ops),
      vsFloor: pairedRatio(ops, floorOps),
      p50Ms: median(entry.runs.map((r) => r.p50Ms)),
      p99Ms: median(entry.runs.map((r) => r.p99Ms)),
      admitted: median(entry.runs.map((r) => r.admitted)),
      ops: median(entry.runs.map((r) => r.ops)),
      errors: entry.runs.reduce((sum, r) => sum + r.errors, 0),
      clientCpuUs: median(entry.cpu.map((c) => c.clientUs)),
      redisCpuUs: median(entry.cpu.map((c) => c.redisUs)),
      redisBusy: median(entry.cpu.map((c) => c.redisBusy)),
    };
    if (entry.failed) row.failed = entry.failed;
    return row;
  });
  return { store, scenario, floor: floorName[store], rows };
}

const scenarioTitle: Record<CoreScenario, string> = {
  distinct: 'distinct keys, all admitted',
  hot: 'one hot key over its limit',
};

/** The table of one core scenario. */
export function coreTable(result: CoreResult, config: BenchConfig): Table {
  const admittedHeader = result.scenario === 'distinct' ? 'admitted' : `admitted (limit ${config.hotLimit})`;
  const rows = result.rows.map((row) => {
    const redis = result.store === 'redis';
    if (row.failed && row.runs.length === 0)
      return [row.name, 'failed', '-', '-', '-', '-', '-', '-', ...(redis ? ['-', '-'] : []), row.failed];
    const admitted =
      result.scenario === 'distinct'
        ? `${num((row.admitted / Math.max(1, row.ops)) * 100, 1)}%`
        : `${num(row.admitted)} of ${num(row.ops)}`;
    const remark = [
      row.note,
      row.errors ? `${num(row.errors)} errors` : '',
      row.failed ? `failed: ${row.failed}` : '',
    ]
      .filter(Boolean)
      .join('; ');
    return [
      row.name,
      num(row.opsPerSec),
      pct(row.spread),
      ratio(row.vsFloor),
      ms(row.p50Ms),
      ms(row.p99Ms),
      admitted,
      num(row.clientCpuUs, redis ? 1 : 2),
      ...(redis ? [num(row.redisCpuUs, 1), pct0(row.redisBusy)] : []),
      remark,
    ];
  });
  const under = result.rows.filter((r) => r.runs.length > 0 && r.admitted < config.hotLimit * 0.95);
  const notes =
    result.scenario === 'hot' && under.length > 0
      ? [
          `Fewer than ${config.hotLimit} admitted (${under.map((r) => r.name).join(', ')}): the decision reads a ` +
            'count that later in-flight decisions had already changed (a store returning its live counter object).',
        ]
      : [];
  return {
    notes,
    title: `${result.store === 'redis' ? 'Redis' : 'Memory store'}: ${scenarioTitle[result.scenario]}`,
    columns: [
      'contender',
      'decisions/s',
      'spread',
      `x ${result.floor}`,
      'p50 ms',
      'p99 ms',
      admittedHeader,
      'client CPU µs / decision',
      ...(result.store === 'redis' ? ['Redis CPU µs / decision', 'Redis busy'] : []),
      'note',
    ],
    rows,
  };
}

/** A share of one core as a whole percentage. */
function pct0(share: number): string {
  return Number.isFinite(share) ? `${Math.round(share * 100)}%` : '-';
}

/** Both core scenarios of one store, as a report section. */
export async function runCore(
  store: StoreKind,
  contenders: readonly Contender[],
  config: BenchConfig,
  redisPort: number,
  log: (line: string) => void,
): Promise<{ section: Section; results: CoreResult[] }> {
  const results: CoreResult[] = [];
  for (const scenario of ['distinct', 'hot'] as const) {
    results.push(await runCoreScenario(store, scenario, contenders, config, redisPort, log));
  }
  const window = `limit ${num(config.admittedLimit)} (distinct) or ${config.hotLimit} (hot) per ${config.windowMs / 1000} s`;
  const bound = store === 'redis' ? config.redisRunMs : config.memoryRunMs;
  const tables = results.map((r) => coreTable(r, config));
  if (store === 'memory') tables.push((await measureHeap(contenders, config, config.heapKeys)).table);
  const section: Section = {
    id: `core-${store}`,
    title: store === 'redis' ? 'Core decisions, Redis' : 'Core decisions, memory store',
    intro:
      `${config.concurrency} decisions in flight from one process; ${window}; ` +
      `${store === 'redis' ? '' : 'no Redis; '}` +
      `each run ${bound} ms (at most ${num(store === 'redis' ? config.redisMaxOps : config.memoryMaxOps)} decisions), ` +
      `${config.reps} interleaved repetitions after a warm-up; medians. "distinct" cycles through ` +
      `${num(config.distinctKeys)} fresh keys per repetition; "hot" hammers one fresh key per repetition. ` +
      `Ratios are the median of per-repetition ratios to ${floorName[store]}. ` +
      `"client CPU" is this process's CPU (the library and the driver) per decision` +
      `${store === 'redis' ? '; "Redis CPU" is redis-server\'s (INFO cpu) per decision, and "Redis busy" the share of one core it used during the run: near 100% the server, not the client, bounds the figure' : ''}.`,
    tables,
  };
  return { section, results };
}
