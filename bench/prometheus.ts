// ratekeeper/prometheus on the hot path: the same decisions with and without prometheusMetrics counting them,
// interleaved (off, on, off, on ...), on the memory store and on a spawned Redis. Writes its own block of
// bench/RESULTS.md.
//
//   npm run bench:prometheus            (PROM_REPS=7 PROM_MS=1500; BENCH_OUT=<file> to write elsewhere)

import { cpus, loadavg } from 'node:os';
import { performance } from 'node:perf_hooks';
import { Histogram, Registry } from 'prom-client';
import {
  createLimiter,
  type Decision,
  type DecisionInfo,
  type Limiter,
  type LimiterObserver,
  MemoryStore,
  publishDecisionCounts,
  RedisStore,
  type RequestInfo,
  type Rule,
} from '../src/index.js';
import { prometheusMetrics, STORE_SECONDS_BUCKETS } from '../src/operators/prometheus.js';
import { startRedis } from '../test/support/redis.js';
import { closeRedis, openRedis } from './contender.js';
import { markdownTable, num, type Table, textTable } from './report.js';
import { RESULTS_PATH, writeBlock } from './results-file.js';
import { median, pairedRatio, spread } from './stats.js';

const reps = Number(process.env.PROM_REPS ?? 7);
const runMs = Number(process.env.PROM_MS ?? 1500);
const KEYS = Array.from({ length: 10_000 }, (_, i) => `198.51.100.${i % 250}:${i}`);
const window = { type: 'fixed', size: '1h' } as const;
const huge = 1_000_000_000;

interface Run {
  /** CPU µs of this process per decision (user + system). */
  cpuUs: number;
  /** Decisions per second, wall time. */
  perSec: number;
}

interface Scenario {
  name: string;
  /** Decisions in flight at once. */
  concurrency: number;
  limiter(): Promise<{ limiter: Limiter; decide: (i: number) => Promise<unknown>; close(): Promise<void> }>;
}

/** `concurrency` lanes each awaiting its decisions in turn, for about `ms`. */
async function measure(
  decide: (i: number) => Promise<unknown>,
  concurrency: number,
  ms: number,
): Promise<Run> {
  let n = 0;
  const cpu = process.cpuUsage();
  const start = performance.now();
  const deadline = start + ms;
  const lane = async () => {
    while (performance.now() < deadline) {
      // 64 decisions between clock reads: reading it costs a few % of a memory-store decision.
      for (let j = 0; j < 64; j++) await decide(n++);
    }
  };
  await Promise.all(Array.from({ length: concurrency }, lane));
  const elapsed = performance.now() - start;
  const used = process.cpuUsage(cpu);
  return { cpuUs: (used.user + used.system) / n, perSec: (n * 1000) / elapsed };
}

const request = (i: number): RequestInfo => ({
  method: 'POST',
  path: '/api/orders',
  ip: `198.51.100.${i % 250}`,
  headers: {},
});

function scenarios(redisPort: number): Scenario[] {
  const one: Rule = { name: 'api', key: 'ip', limit: huge, window };
  const three: Rule[] = [
    { name: 'api', key: 'ip', limit: huge, window },
    {
      name: 'orders',
      match: 'POST /api/orders',
      key: 'ip',
      limit: huge,
      window: { type: 'sliding', size: '1m' },
    },
    { name: 'burst', key: 'ip', limit: huge, window: { type: 'token-bucket', size: '1s' } },
  ];
  return [
    {
      name: 'memory store, consume, 1 rule, 10,000 keys',
      concurrency: 1,
      async limiter() {
        const limiter = createLimiter({ store: new MemoryStore(), rules: [one] });
        return {
          limiter,
          decide: (i) => limiter.consume('api', KEYS[i % KEYS.length] as string),
          close: () => limiter.close(),
        };
      },
    },
    {
      name: 'memory store, check(req), 3 rules',
      concurrency: 1,
      async limiter() {
        const limiter = createLimiter({ store: new MemoryStore(), rules: three });
        return { limiter, decide: (i) => limiter.check(request(i)), close: () => limiter.close() };
      },
    },
    {
      name: 'Redis, consume, 1 rule, 32 in flight',
      concurrency: 32,
      async limiter() {
        const client = openRedis(redisPort);
        const limiter = createLimiter({
          store: new RedisStore({ client, prefix: `bp${Math.random().toString(36).slice(2, 8)}` }),
          rules: [one],
        });
        return {
          limiter,
          decide: (i) => limiter.consume('api', KEYS[i % KEYS.length] as string),
          async close() {
            await limiter.close();
            await closeRedis(client);
          },
        };
      },
    },
  ];
}

/** ns per call of the hooks prometheusMetrics adds, called directly (no limiter around them): the cost itself. */
async function hooksAlone(): Promise<string[][]> {
  let hooks: LimiterObserver = {};
  const fake = {
    rules: [],
    observe: (observer: LimiterObserver) => {
      hooks = observer;
      return () => {};
    },
  };
  const registry = new Registry();
  prometheusMetrics(fake as unknown as Limiter, { registry });
  const ruleResult = (rule: string) => ({
    rule,
    key: 'k',
    allowed: true,
    limit: 5,
    remaining: 4,
    count: 1,
    resetMs: 1,
    locked: false,
  });
  const decisionOf = (rules: string[]): Decision => ({
    ...ruleResult(rules[0] as string),
    rules: rules.map(ruleResult),
  });
  const info: DecisionInfo = { mode: 'check', source: 'store' };
  const one = decisionOf(['api']);
  const three = decisionOf(['api', 'orders', 'burst']);
  const call = { operation: 'check', seconds: 0.0004 };
  let feedHooks: LimiterObserver = {};
  const feedFake = {
    observe: (observer: LimiterObserver) => {
      feedHooks = observer;
      return () => {};
    },
  };
  const feed = publishDecisionCounts(feedFake as unknown as Limiter, {
    client: { publish: async () => 0 },
    interval: '1h',
  });
  const reference = new Histogram({
    name: 'reference_seconds',
    help: 'prom-client histogram, for comparison',
    labelNames: ['operation'],
    buckets: [...STORE_SECONDS_BUCKETS],
    registers: [],
  });
  const labels = { operation: 'check' };
  const cases: Array<[string, () => void]> = [
    ['decision hook, 1 rule', () => hooks.decision?.(one, info)],
    ['decision hook, 3 rules', () => hooks.decision?.(three, info)],
    ['storeCall hook (histogram)', () => hooks.storeCall?.(call)],
    ['publishDecisionCounts decision hook, 1 rule', () => feedHooks.decision?.(one, info)],
    ['publishDecisionCounts decision hook, 3 rules', () => feedHooks.decision?.(three, info)],
    ["for comparison: prom-client's Histogram.observe with a label", () => reference.observe(labels, 0.0004)],
  ];
  const rows: string[][] = [];
  for (const [name, fn] of cases) {
    const runs: number[] = [];
    for (let rep = 0; rep < reps; rep++) {
      const n = 1_000_000;
      const start = performance.now();
      for (let i = 0; i < n; i++) fn();
      runs.push(((performance.now() - start) * 1e6) / n);
    }
    rows.push([name, num(median(runs), 0)]);
  }
  await registry.metrics();
  await feed.stop();
  return rows;
}

async function main(): Promise<void> {
  const loadAvg = loadavg()[0] as number;
  const alone = await hooksAlone();
  const server = await startRedis();
  const rows: string[][] = [];
  try {
    for (const scenario of scenarios(server.port)) {
      // Two limiters side by side, one counted into a registry; runs interleaved so drifts hit both.
      const off = await scenario.limiter();
      const on = await scenario.limiter();
      const registry = new Registry();
      prometheusMetrics(on.limiter, { registry });
      await measure(off.decide, scenario.concurrency, runMs / 3); // warm-up
      await measure(on.decide, scenario.concurrency, runMs / 3);
      const runsOff: Run[] = [];
      const runsOn: Run[] = [];
      for (let rep = 0; rep < reps; rep++) {
        runsOff.push(await measure(off.decide, scenario.concurrency, runMs));
        runsOn.push(await measure(on.decide, scenario.concurrency, runMs));
        await registry.metrics(); // a scrape between runs, as Prometheus would
      }
      await off.close();
      await on.close();
      const cpuOff = median(runsOff.map((r) => r.cpuUs));
      const cpuOn = median(runsOn.map((r) => r.cpuUs));
      const ratio = pairedRatio(
        runsOn.map((r) => r.cpuUs),
        runsOff.map((r) => r.cpuUs),
      );
      rows.push([
        scenario.name,
        num(median(runsOff.map((r) => r.perSec))),
        num(median(runsOn.map((r) => r.perSec))),
        num(cpuOff, 2),
        num(cpuOn, 2),
        num((cpuOn - cpuOff) * 1000, 0),
        num(ratio, 3),
        `±${num(spread(runsOff.map((r) => r.cpuUs)) * 100, 0)}% / ±${num(spread(runsOn.map((r) => r.cpuUs)) * 100, 0)}%`,
      ]);
      process.stdout.write(`  ${scenario.name}: ${num(cpuOff, 2)} -> ${num(cpuOn, 2)} µs CPU per decision\n`);
    }
  } finally {
    await server.stop();
  }
  const table: Table = {
    title: 'prometheusMetrics on the hot path',
    columns: [
      'scenario',
      'decisions/s without',
      'decisions/s with',
      'CPU µs/decision without',
      'CPU µs/decision with',
      'added ns/decision',
      'CPU ratio with/without',
      'run-to-run spread without / with',
    ],
    rows,
    notes: [
      `Medians of ${reps} interleaved runs of ${runMs} ms (without, with, without, with ...), one process; CPU is this ` +
        "process's user + system time (the Redis server's not counted), the ratio the median of per-run ratios; " +
        'the spread is half the range of the runs over their median: a difference smaller than it is noise. ' +
        'With metrics, each decision adds one count per rule to a plain array (flushed into prom-client at each ' +
        'scrape); each shared-store call is observed in the histogram.',
    ],
  };
  const hooksTable: Table = {
    title: 'prometheusMetrics hooks alone',
    columns: ['hook', 'ns per call'],
    rows: alone,
    notes: [
      `Each hook called 1,000,000 times in a loop, median of ${reps} runs: the work metrics add to a decision ` +
        "and to a Redis call, without the decision's own cost and noise (publishDecisionCounts: the " +
        "counting `watch`'s feed adds, plus one PUBLISH per interval). The last row is why the store-call " +
        "histogram keeps its own bucket counts (read through the registry as any histogram): prom-client's " +
        'observe hashes the labels on every call.',
    ],
  };
  process.stdout.write(`${textTable(table)}\n${textTable(hooksTable)}\n`);
  const body = [
    '## prometheusMetrics cost (ops)',
    '',
    `Measured ${new Date().toISOString().slice(0, 10)} with \`npm run bench:prometheus\` (bench/prometheus.ts), on this ` +
      `machine (${cpus().length} cores shared by other work, load average ${num(loadAvg, 1)} at the start: read the ` +
      'ratio and the spread more than the absolute figures).',
    '',
    markdownTable(table),
    '',
    markdownTable(hooksTable),
  ].join('\n');
  await writeBlock('bench:prometheus', body, process.env.BENCH_OUT ?? RESULTS_PATH);
}

await main();
