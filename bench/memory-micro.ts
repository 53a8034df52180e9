// Focused memory-store benchmark: ours against the peers' memory stores, longer interleaved runs than core-memory.
//
//   npx tsx bench/memory-micro.ts [filter-regex]
//   MICRO_REPS=7 MICRO_MS=600 MICRO_SCENARIO=hot npx tsx bench/memory-micro.ts 'fixed|Map|express'
//
// Same driver (bench/load.ts) and the same contenders as `npm run bench -- core-memory`, so figures
// are comparable; only the repetition count and run length differ (defaults: 5 reps of 500 ms).

import { loadConfig } from './config.js';
import type { Contender, ContenderInstance } from './contender.js';
import { loadContenders } from './contenders.js';
import { runLoad } from './load.js';
import { median, pairedRatio } from './stats.js';

const reps = Number(process.env.MICRO_REPS ?? 5);
const runMs = Number(process.env.MICRO_MS ?? 500);
const scenario = process.env.MICRO_SCENARIO === 'hot' ? 'hot' : 'distinct';
const filter = process.argv[2] ? new RegExp(process.argv[2], 'i') : undefined;

const config = loadConfig();
const { contenders } = await loadContenders(filter);
const memory = contenders.filter((c: Contender) => c.store === 'memory');
const spec = {
  limit: scenario === 'distinct' ? config.admittedLimit : config.hotLimit,
  windowMs: config.windowMs,
};

const entries: Array<{ contender: Contender; instance: ContenderInstance; ops: number[]; cpu: number[] }> =
  [];
for (const contender of memory) {
  const instance = await contender.create(spec, { redisPort: 0, prefix: 'micro:' });
  entries.push({ contender, instance, ops: [], cpu: [] });
}
const keysFor = (label: string) =>
  scenario === 'hot'
    ? [`hot-${label}`]
    : Array.from({ length: config.distinctKeys }, (_, i) => `u${label}-${i}`);
const load = (entry: (typeof entries)[number], keys: string[], maxMs: number) =>
  runLoad(entry.instance.decide, {
    concurrency: config.concurrency,
    maxOps: 10_000_000,
    maxMs,
    keys,
    stallTimeoutMs: config.stallTimeoutMs,
    sampleEvery: 8,
  });

for (const entry of entries) await load(entry, keysFor('warm'), 300);
for (let rep = 0; rep < reps; rep++) {
  const keys = keysFor(`r${rep}`);
  for (const entry of entries) {
    // Also per CPU second of this process: steadier than wall time when another process shares the cores.
    const cpu0 = process.cpuUsage();
    const result = await load(entry, keys, runMs);
    const cpu = process.cpuUsage(cpu0);
    entry.ops.push(result.opsPerSec);
    entry.cpu.push(result.ops / ((cpu.user + cpu.system) / 1e6));
  }
}
for (const entry of entries) await entry.instance.close();

const fmt = (x: number) => (Number.isFinite(x) ? `${x.toFixed(2)}x` : '-');
const count = (x: number) => Math.round(x).toLocaleString('en').padStart(12);
console.log(`scenario ${scenario}, ${reps} reps x ${runMs} ms, ${config.concurrency} in flight; medians`);
for (const clock of ['ops', 'cpu'] as const) {
  const byName = (name: string) => entries.find((e) => e.contender.name === name)?.[clock] ?? [];
  const floor = byName('raw floor (Map)');
  const flexible = byName('rate-limiter-flexible RateLimiterMemory');
  const erl = byName('express-rate-limit MemoryStore');
  const unit = clock === 'ops' ? 'per wall s' : 'per CPU s';
  console.log(
    `${'contender'.padEnd(42)} ${unit.padStart(12)} ${'x Map'.padStart(7)} ${'x rlf'.padStart(7)} ${'x erl'.padStart(7)}`,
  );
  for (const entry of entries) {
    const values = entry[clock];
    console.log(
      `${entry.contender.name.padEnd(42)} ${count(median(values))} ${fmt(pairedRatio(values, floor)).padStart(7)} ${fmt(pairedRatio(values, flexible)).padStart(7)} ${fmt(pairedRatio(values, erl)).padStart(7)}`,
    );
  }
}
