// Focused Redis-path micro-benchmark: the raw floor against our Redis store, interleaved, medians and commands per decision.
// Usage: npx tsx bench/redis-micro.ts [name-regex]   (MICRO_REPS=5 MICRO_MS=1000 MICRO_CONCURRENCY=64)
// Per contender: decisions/s, paired ratio to the raw floor, script calls sent and commands executed per
// decision (INFO commandstats), Redis and Node CPU µs per decision (INFO cpu, process.cpuUsage).

import type { Redis } from 'ioredis';
import { RedisStore } from '../src/stores/redis/redis-store.js';
import type { StoreOp, StoreRule } from '../src/stores/store.js';
import { startRedis } from '../test/support/redis.js';
import { type Contender, closeRedis, type LimitSpec, openRedis, redisCpuSeconds } from './contender.js';
import { runLoad } from './load.js';
import { ratekeeperContenders } from './ratekeeper.js';
import { rawRedis, rawRedisPipelined } from './raw-floor.js';
import { median } from './stats.js';

const reps = Number(process.env.MICRO_REPS ?? 5);
const runMs = Number(process.env.MICRO_MS ?? 1000);
const concurrency = Number(process.env.MICRO_CONCURRENCY ?? 64);
const filter = process.argv[2] ? new RegExp(process.argv[2], 'i') : undefined;

/** The Redis store alone, without the limiter in front: what the store itself costs per decision. */
function storeOnly(rules: number): Contender {
  return {
    name: `RedisStore.evaluate x${rules}`,
    store: 'redis',
    group: 'ratekeeper',
    async create(spec, ctx) {
      const client = openRedis(ctx.redisPort);
      const store = new RedisStore({ client, prefix: ctx.prefix?.replace(/:$/, '') ?? 'rk' });
      const storeRules: StoreRule[] = Array.from({ length: rules }, (_, i) => ({
        name: `r${i + 1}`,
        type: 'fixed',
        sizeMs: spec.windowMs * (i + 1),
        buckets: 0,
        burst: 0,
        lockout: undefined,
        dryRun: false,
      }));
      return {
        async decide(key: string) {
          const ops: StoreOp[] = storeRules.map((rule) => ({ rule, key, cost: 1, limit: spec.limit }));
          const { results } = await store.evaluate(ops, 'check');
          return results.every((r) => r.allowed);
        },
        async close() {
          await store.close();
          await closeRedis(client);
        },
      };
    },
  };
}

/** Commands executed since RESETSTAT (inside scripts included), and script calls sent (EVALSHA, EVAL). */
async function commandCalls(client: Redis): Promise<{ executed: number; sent: number }> {
  const info = await client.info('commandstats');
  let executed = 0;
  let sent = 0;
  for (const match of info.matchAll(/^cmdstat_([\w|]+):calls=(\d+)/gm)) {
    const name = match[1] as string;
    if (name === 'info' || name.startsWith('config')) continue;
    executed += Number(match[2]);
    if (name === 'evalsha' || name === 'eval') sent += Number(match[2]);
  }
  return { executed, sent };
}

async function main() {
  const server = await startRedis();
  const admin = server.client();
  try {
    const ours = (await ratekeeperContenders()).filter((c) =>
      /^ratekeeper redis (fixed|fixed x[13] rules)$/.test(c.name),
    );
    const all = [rawRedis, rawRedisPipelined, ...ours, storeOnly(1), storeOnly(3)];
    const contenders = all.filter((c) => c.group === 'floor' || !filter || filter.test(c.name));
    const spec: LimitSpec = { limit: 1_000_000, windowMs: 60_000 };
    const instances = await Promise.all(
      contenders.map((c, i) => c.create(spec, { redisPort: server.port, prefix: `m${i}:` })),
    );
    const keys = (label: string) => Array.from({ length: 10_000 }, (_, i) => `u${label}-${i}`);
    const rates: number[][] = contenders.map(() => []);
    const commands: number[][] = contenders.map(() => []);
    const sent: number[][] = contenders.map(() => []);
    const redisCpu: number[][] = contenders.map(() => []);
    const nodeCpu: number[][] = contenders.map(() => []);
    const load = (i: number, label: string, ms: number) =>
      runLoad((instances[i] as { decide: (key: string) => Promise<boolean> }).decide, {
        concurrency,
        maxOps: 5_000_000,
        maxMs: ms,
        keys: keys(label),
        stallTimeoutMs: 30_000,
      });
    for (let i = 0; i < contenders.length; i++) await load(i, 'warm', 300);
    for (let rep = 0; rep < reps; rep++) {
      for (let i = 0; i < contenders.length; i++) {
        await admin.config('RESETSTAT');
        const cpuBefore = await redisCpuSeconds(admin);
        const nodeBefore = process.cpuUsage();
        const result = await load(i, `r${rep}`, runMs);
        const nodeUsed = process.cpuUsage(nodeBefore);
        const cpuAfter = await redisCpuSeconds(admin);
        (nodeCpu[i] as number[]).push((nodeUsed.user + nodeUsed.system) / result.ops);
        const calls = await commandCalls(admin);
        (redisCpu[i] as number[]).push(((cpuAfter - cpuBefore) * 1e6) / result.ops);
        if (result.errors > 0)
          console.log(`${contenders[i]?.name}: ${result.errors} errors: ${result.firstError}`);
        (rates[i] as number[]).push(result.opsPerSec);
        (commands[i] as number[]).push(calls.executed / result.ops);
        (sent[i] as number[]).push(calls.sent / result.ops);
      }
      process.stderr.write(`rep ${rep + 1}/${reps}\n`);
    }
    const floor = rates[0] as number[];
    console.log(`concurrency ${concurrency}, ${reps} reps of ${runMs} ms, medians`);
    const columns = ['decisions/s', 'x floor', 'sent/dec', 'cmds/dec', 'Redis µs/dec', 'Node µs/dec'];
    console.log(`${'contender'.padEnd(40)}${columns.map((c) => c.padStart(13)).join('')}  runs (k/s)`);
    contenders.forEach((c, i) => {
      const r = rates[i] as number[];
      const at = (values: number[][], digits: number) => median(values[i] as number[]).toFixed(digits);
      const cells = [
        Math.round(median(r)).toLocaleString('en'),
        `${median(r.map((v, k) => v / (floor[k] as number))).toFixed(2)}x`,
        at(sent, 3),
        at(commands, 2),
        at(redisCpu, 1),
        at(nodeCpu, 1),
      ];
      const runs = r.map((v) => Math.round(v / 1000)).join(' ');
      console.log(`${c.name.padEnd(40)}${cells.map((cell) => cell.padStart(13)).join('')}  ${runs}`);
    });
    await Promise.all(instances.map((inst) => inst.close()));
  } finally {
    await closeRedis(admin);
    await server.stop();
  }
}

await main();
