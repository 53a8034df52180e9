// redis-server instructions per decision, counted by callgrind: deterministic, unlike CPU time on a shared machine.
// Usage: npx tsx bench/redis-callgrind.ts [name-regex]   (CALLGRIND_DECISIONS=2000; CALLGRIND_KEEP=1 keeps
// the dumps, one per case, for callgrind_annotate; REDIS_SERVER_BIN=<path> measures another redis-server, e.g. one
// built with symbols)
// Each case runs its decisions in rounds of `batch` requests made at once (one script call per round
// for ours: the batch a closed-loop client of that concurrency gets), between a zeroing and a dump of
// callgrind's counters; instructions of redis-server divided by decisions. Needs valgrind.

import { execFile, spawn } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { Redis } from 'ioredis';
import { CheckCall } from '../src/stores/redis-protocol.js';
import { loadScripts } from '../src/stores/redis-scripts.js';
import { RedisStore } from '../src/stores/redis-store.js';
import type { StoreOp, StoreRule } from '../src/stores/store.js';
import { stopChild, track } from '../test/support/processes.js';
import { redisServerBinary } from '../test/support/redis/redis-process.js';
import { freePort } from '../test/support/redis.js';

const run = promisify(execFile);
const decisions = Number(process.env.CALLGRIND_DECISIONS ?? 2000);
const filter = process.argv[2] ? new RegExp(process.argv[2], 'i') : undefined;

/** The raw floor's script (bench/raw-floor.ts): one EVALSHA per decision. */
const RAW_FIXED = `
if redis.call('SET', KEYS[1], 1, 'NX', 'PX', ARGV[2]) then return 1 end
if redis.call('INCR', KEYS[1]) <= tonumber(ARGV[1]) then return 1 end
return 0
`;

interface Case {
  name: string;
  /** Requests made at once per round. */
  batch: number;
  /** Decides one request on key `key`. */
  decide(key: string): Promise<unknown>;
}

function storeRule(name: string, type: StoreRule['type'], sizeMs: number): StoreRule {
  return {
    name,
    type,
    sizeMs,
    buckets: type === 'sliding' ? 10 : 0,
    // Token bucket and GCRA: the capacity is the op's limit.
    burst: 0,
    lockout: undefined,
    dryRun: false,
  };
}

function storeCase(
  store: RedisStore,
  name: string,
  rules: StoreRule[],
  batch: number,
  keyOf: (key: string) => string = (key) => key,
): Case {
  return {
    name,
    batch,
    decide(fresh) {
      const key = keyOf(fresh);
      const nowMs = store.now();
      const ops: StoreOp[] = rules.map((rule) => ({
        rule,
        key,
        cost: 1,
        limit: 1_000_000,
        ...(rule.type === 'calendar' && {
          periodEndMs: nowMs + 86_400_000,
          nextPeriodEndMs: nowMs + 172_800_000,
        }),
      }));
      return store.evaluate(ops, 'check');
    },
  };
}

/**
 * lua/check.lua's cross-slot form (a Cluster master's batch of several slots), called directly: on a
 * standalone server its cost per decision is what a Cluster master pays for such a batch.
 */
function crossSlotCase(client: Redis, rule: StoreRule, batch: number): Case {
  const script = loadScripts().checkCrossSlot;
  let call: CheckCall | undefined;
  return {
    name: `fixed x1, ${batch} per call, cross-slot`,
    batch,
    decide(key) {
      call ??= new CheckCall();
      const op = { rule, key, cost: 1, limit: 1_000_000 };
      call.add({ prefix: 'cgx', cluster: true }, [op], 'check', false, 'server');
      if (call.requests < batch) return Promise.resolve();
      const { keys } = call;
      const args = [String(keys.length), ...keys, ...call.args()];
      call = undefined;
      return client.evalsha(script.sha, 1, keys[0] as string, ...args).catch(async (error: unknown) => {
        if (!String(error).includes('NOSCRIPT')) throw error;
        return client.eval(script.source, 1, keys[0] as string, ...args);
      });
    },
  };
}

/** The newest callgrind dump in `dir`. */
function lastDump(dir: string): string {
  const files = readdirSync(dir)
    .filter((f) => /^cg\.out\.\d+\.\d+$/.test(f))
    .sort((a, b) => Number(a.split('.').pop()) - Number(b.split('.').pop()));
  return join(dir, files[files.length - 1] as string);
}

/** Total instructions (Ir) of a callgrind dump. */
function dumpInstructions(file: string): number {
  const totals = /^(?:totals|summary): (\d+)/m.exec(readFileSync(file, 'utf8'));
  if (totals === null) throw new Error('no totals in the callgrind dump');
  return Number(totals[1]);
}

/**
 * Instructions of a dump spent in the script commands themselves (EVALSHA and EVAL, inclusive): the
 * total less the server's own housekeeping (cron, active expiry) and connection handling, which vary
 * with wall time on a loaded machine.
 */
async function scriptInstructions(file: string): Promise<number> {
  const { stdout } = await run('callgrind_annotate', ['--inclusive=yes', '--threshold=100', file], {
    maxBuffer: 64 * 1024 * 1024,
  });
  let sum = 0;
  for (const [, n] of stdout.matchAll(/^\s*([\d,]+) \([^)]*\)\s+\S*:(?:evalShaCommand|evalCommand) /gm)) {
    sum += Number((n as string).replaceAll(',', ''));
  }
  return sum;
}

async function main() {
  const dir = mkdtempSync(join(tmpdir(), 'rk-callgrind-'));
  const port = await freePort();
  const args = ['--tool=callgrind', `--callgrind-out-file=${join(dir, 'cg.out.%p')}`, redisServerBinary()];
  args.push('--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no');
  // One cron tick a second: server housekeeping stays a rounding error in the counts.
  args.push('--hz', '1', '--dir', dir, '--loglevel', 'warning');
  const child = track(spawn('valgrind', args, { stdio: 'ignore' }));
  const client = new Redis({ host: '127.0.0.1', port, maxRetriesPerRequest: 1, retryStrategy: () => 200 });
  client.on('error', () => {});
  const store = new RedisStore({ client, prefix: 'cg' });
  try {
    for (let i = 0; i < 200 && client.status !== 'ready'; i++) await new Promise((r) => setTimeout(r, 100));
    // The store learns which rules have had an override (redis-overrides.ts) on its first decision, and
    // reads every rule's override until it knows: measured once it does.
    const overridden = storeRule('ov', 'fixed', 60_000);
    // Figures from before overrides existed are taken with this same file, without the override cases.
    const withOverrides = typeof store.override === 'function';
    if (withOverrides) await store.override(overridden, 'vip', 2_000_000);
    await store.evaluate([], 'check');
    await storeCase(store, '', [overridden], 1).decide('first');
    await new Promise((r) => setTimeout(r, 3000));
    const rawSha = (await client.script('LOAD', RAW_FIXED)) as string;
    const raw: Case = {
      name: 'raw floor script',
      batch: 1,
      decide: (key) => client.evalsha(rawSha, 1, `raw:${key}`, '1000000', '60000'),
    };
    const fixed = [
      storeRule('r1', 'fixed', 60_000),
      storeRule('r2', 'fixed', 120_000),
      storeRule('r3', 'fixed', 180_000),
    ];
    const cases: Case[] = [
      raw,
      storeCase(store, 'fixed x1, 1 per call', fixed.slice(0, 1), 1),
      storeCase(store, 'fixed x1, 8 per call', fixed.slice(0, 1), 8),
      storeCase(store, 'fixed x1, 32 per call', fixed.slice(0, 1), 32),
      crossSlotCase(client, fixed[0] as StoreRule, 32),
      storeCase(store, 'fixed x3, 1 per call', fixed, 1),
      storeCase(store, 'fixed x3, 32 per call', fixed, 32),
      ...(['calendar', 'sliding-log', 'sliding', 'token-bucket', 'gcra'] as const).map((type) =>
        storeCase(store, `${type} x1, 32 per call`, [storeRule(type, type, 60_000)], 32),
      ),
      // A rule that has had an override: its keys without one, then one key with one.
      ...(withOverrides
        ? [
            storeCase(store, 'overridden rule, 1 per call', [overridden], 1),
            storeCase(store, 'overridden rule, 32 per call', [overridden], 32),
            storeCase(store, 'overridden key, 32 per call', [overridden], 32, () => 'vip'),
          ]
        : []),
    ].filter((c) => c === raw || !filter || filter.test(c.name));
    console.log(
      `redis-server instructions per decision (callgrind), ${decisions} decisions per case, fresh keys: all, and in the script commands`,
    );
    for (const [n, c] of cases.entries()) {
      const rounds = Math.ceil(decisions / c.batch);
      const go = async (label: string, count: number) => {
        for (let r = 0; r < count; r++) {
          await Promise.all(Array.from({ length: c.batch }, (_, i) => c.decide(`${label}${n}-${r}-${i}`)));
        }
      };
      await go('w', 20);
      await run('callgrind_control', ['-z', String(child.pid)]);
      await go('m', rounds);
      await run('callgrind_control', ['-d', String(child.pid)]);
      const dump = lastDump(dir);
      const per = (n: number) =>
        Math.round(n / (rounds * c.batch))
          .toLocaleString('en')
          .padStart(10);
      console.log(
        `${c.name.padEnd(30)} ${per(dumpInstructions(dump))} ${per(await scriptInstructions(dump))}`,
      );
    }
  } finally {
    await store.close();
    client.disconnect();
    await stopChild(child, 5000);
    if (process.env.CALLGRIND_KEEP === '1') console.log(`dumps kept in ${dir}`);
    else rmSync(dir, { recursive: true, force: true });
  }
}

await main();
