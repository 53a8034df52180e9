// redis-server instructions per decision, counted by callgrind: deterministic, unlike CPU time on a shared machine.
// `npm run bench -- redis-cost` runs it (with the MONITOR counts of cost.ts); alone:
//   npx tsx bench/redis-callgrind.ts [name-regex]   (CALLGRIND_DECISIONS=2000; CALLGRIND_KEEP=1 keeps the dumps,
//   one per case, for callgrind_annotate; REDIS_SERVER_BIN=<path> measures another redis-server;
//   CALLGRIND_FLOORS=e1,c runs only those floors). Comparing trees (`npm run bench:redis-callgrind`):
//   CALLGRIND_SAVE=<file> keeps this run's rows as JSON; CALLGRIND_BEFORE=<label>=<file>[,...] puts earlier
//   runs' rows beside this one's (Ir per decision and the change); CALLGRIND_BLOCK=<file> writes the tables
//   as the bench:redis-callgrind block of bench/RESULTS.md (or BENCH_OUT), under the Markdown in <file>
//   (what changed, the method); CALLGRIND_ROWS=<file> (with CALLGRIND_VERSION, CALLGRIND_DECISIONS) takes a
//   saved run's rows instead of measuring.
// Each case runs its decisions in rounds of `inFlight` requests made at once (ratekeeper's store batches
// them: one script call per 32), between a zeroing and a dump of callgrind's counters; instructions of
// redis-server divided by decisions. Fresh distinct keys, a fixed window of 1,000,000 per 60 s unless
// named. Needs valgrind.

import { execFile, spawn } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { Redis } from 'ioredis';
import { CheckCall } from '../src/stores/redis/check-call.js';
import { connectionOf } from '../src/stores/redis/client.js';
import { loadScripts } from '../src/stores/redis/function-library.js';
import { RedisStore } from '../src/stores/redis/redis-store.js';
import { runScript } from '../src/stores/redis/replies.js';
import type { StoreOp, StoreRule } from '../src/stores/store.js';
import { stopChild, track } from '../test/support/processes.js';
import { redisServerBinary } from '../test/support/redis/redis-process.js';
import { freePort } from '../test/support/redis.js';
import { expressRedis, flexibleRedis } from './peers.js';
import { markdownTable, num, ratio, type Section, type Table, textTable } from './report.js';
import { RESULTS_PATH, writeBlock } from './results-file.js';

const run = promisify(execFile);

/** The floors' decision: INCR, and PEXPIRE when the key is new; admitted while at most the limit. */
const FLOOR_ONE = `
local n = redis.call('INCR', KEYS[1])
if n == 1 then redis.call('PEXPIRE', KEYS[1], ARGV[2]) end
if n <= tonumber(ARGV[1]) then return 1 end
return 0
`;
/** The same for every key of the call: the batched floor. */
const FLOOR_MANY = `
local limit, out = tonumber(ARGV[1]), {}
for i = 1, #KEYS do
  local n = redis.call('INCR', KEYS[i])
  if n == 1 then redis.call('PEXPIRE', KEYS[i], ARGV[2]) end
  if n <= limit then out[i] = 1 else out[i] = 0 end
end
return out
`;
/**
 * What a decision on the server's clock that creates its key needs at the least: TIME, then one SET NX
 * GET PX per key (the value formatted once per call), and a reply of the time and one integer per key.
 * KEYS: the keys of every decision; ARGV[1]: keys per decision.
 */
const FLOOR_CLOCKED = `
local t = redis.call('TIME')
local ms = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local value = string.format('%d%07d', ms + 60000, 1)
local out = { ms }
for i = 1, #KEYS do
  if redis.call('SET', KEYS[i], value, 'NX', 'GET', 'PX', '60000') then out[i + 1] = 0 else out[i + 1] = 64 end
end
return out
`;
/**
 * The same bound for one key per identity (a hash, a field per rule): TIME, then per decision an HMGET
 * of its fields, one HSET of all of them (a value formatted once per call) and a PEXPIRE NX. KEYS: one
 * hash per decision; ARGV: the field names.
 */
const FLOOR_HASHED = `
local t = redis.call('TIME')
local ms = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local value = string.format('%d%07d', ms + 60000, 1)
local out, set = { ms }, {}
for f = 1, #ARGV do set[2 * f - 1], set[2 * f] = ARGV[f], value end
for i = 1, #KEYS do
  redis.call('HMGET', KEYS[i], unpack(ARGV))
  redis.call('HSET', KEYS[i], unpack(set))
  redis.call('PEXPIRE', KEYS[i], '60000', 'NX')
  for f = 1, #ARGV do out[#out + 1] = 64 end
end
return out
`;
const FLOOR_LIBRARY = `#!lua name=rkbenchfloor
redis.register_function('rkbench_floor_one', function(KEYS, ARGV)${FLOOR_ONE}end)
redis.register_function('rkbench_floor_many', function(KEYS, ARGV)${FLOOR_MANY}end)
redis.register_function('rkbench_floor_clocked', function(KEYS, ARGV)${FLOOR_CLOCKED}end)
redis.register_function('rkbench_floor_hashed', function(KEYS, ARGV)${FLOOR_HASHED}end)
`;

const LIMIT = 1_000_000;
/**
 * A calendar op's period end: one for the whole run, a day from its start, as a day's period is the
 * same for every request of the day (one computed from each request's clock made a new op text, parsed
 * by the script, every ms: more of them the slower the machine).
 */
const PERIOD_END_MS = Date.now() + 86_400_000;
const WINDOW_MS = 60_000;

/** One measured subject. */
interface Case {
  /** Short name: the row of the table, and what the targets refer to. */
  id: string;
  name: string;
  /** Requests made at once per round. */
  inFlight: number;
  /** Decides one request on the fresh identity `key` (or, after `prepare`, the measured step on it). */
  decide(key: string): Promise<unknown>;
  /**
   * Run on every measured identity before the counters are zeroed, `inFlight` at once: what the measured
   * step needs and is not counted (a release's decision).
   */
  prepare?(key: string): Promise<unknown>;
  /** Sends what decide() left queued (the floors' batches). */
  flush?(): Promise<unknown>;
}

export interface CallgrindRow {
  id: string;
  name: string;
  inFlight: number;
  /** redis-server instructions per decision: all, and inside the script commands only. */
  all: number;
  scripts: number;
}

function storeRule(name: string, type: StoreRule['type'], lockout = false): StoreRule {
  return {
    name,
    type,
    // A concurrency rule's lease.
    sizeMs: WINDOW_MS,
    buckets: type === 'sliding' ? 10 : 0,
    // Token bucket and GCRA: the capacity is the op's limit.
    burst: 0,
    lockout: lockout ? { durationMs: 60_000, escalate: 1, maxDurationMs: 0, forgetAfterMs: 0 } : undefined,
    dryRun: false,
  } as StoreRule;
}

function storeCase(
  store: RedisStore,
  id: string,
  name: string,
  rules: StoreRule[],
  inFlight: number,
  keyOf: (key: string) => string = (key) => key,
): Case {
  return {
    id,
    name,
    inFlight,
    decide(fresh) {
      const key = keyOf(fresh);
      const ops: StoreOp[] = rules.map((rule) => ({
        rule,
        key,
        cost: 1,
        limit: LIMIT,
        ...(rule.type === 'calendar' && {
          periodEndMs: PERIOD_END_MS,
          nextPeriodEndMs: PERIOD_END_MS + 86_400_000,
        }),
      }));
      return store.evaluate(ops, 'check');
    },
  };
}

function storeOp(rule: StoreRule, key: string, cost = 1): StoreOp {
  return {
    rule,
    key,
    cost,
    limit: LIMIT,
    ...(rule.type === 'calendar' && {
      periodEndMs: PERIOD_END_MS,
      nextPeriodEndMs: PERIOD_END_MS + 86_400_000,
    }),
  };
}

/**
 * A step after a decision, measured alone: the decision (`check`, cost `estimate`) is made before the
 * counters are zeroed, then `step` runs on its op and receipt, `inFlight` at once. A concurrency
 * release is the store's refund of the slot (Holdings#free); a settle is what Settlements#settle sends:
 * an actual cost above the estimate is one `record` of the difference, one below it a refund of the
 * difference and a `peek` for the counts after it.
 */
function afterCase(
  store: RedisStore,
  id: string,
  name: string,
  rule: StoreRule,
  inFlight: number,
  estimate: number,
  step: (op: StoreOp, receipt: number) => Promise<unknown>,
): Case {
  const decided = new Map<string, { op: StoreOp; receipt: number }>();
  return {
    id,
    name,
    inFlight,
    async prepare(key) {
      const op = storeOp(rule, key, estimate);
      const { results } = await store.evaluate([op], 'check');
      const result = results[0];
      if (result?.allowed !== true) throw new Error(`${id}: the decision before the step was denied`);
      decided.set(key, { op, receipt: result.receipt });
    },
    decide(key) {
      const held = decided.get(key);
      if (held === undefined) throw new Error(`${id}: no decision for ${key}`);
      decided.delete(key);
      return step(held.op, held.receipt);
    },
  };
}

/**
 * lua/check.lua's cross-slot form (a Cluster master's batch of several slots), called as the store calls
 * it: on a standalone server its cost per decision is what a Cluster master pays for such a batch.
 */
function crossSlotCase(client: Redis, rule: StoreRule, perCall: number): Case {
  const script = loadScripts().checkCrossSlot;
  const connection = connectionOf(client);
  let call: CheckCall | undefined;
  return {
    id: 'fixed cross-slot',
    name: `ratekeeper fixed, ${perCall} per call, cross-slot (Cluster master)`,
    inFlight: perCall,
    decide(key) {
      call ??= new CheckCall();
      const op = { rule, key, cost: 1, limit: LIMIT };
      call.add({ prefix: 'cgx', cluster: true }, [op], 'check', false, 'server');
      if (call.requests < perCall) return Promise.resolve();
      const { keys } = call;
      const args = [String(keys.length), ...keys, ...call.args()];
      call = undefined;
      return runScript(connection, script, keys.slice(0, 1), args);
    },
  };
}

/** A floor: one call per decision, or one call per `perCall` decisions; by SHA, or as a function. */
function floorCase(
  client: Redis,
  id: string,
  name: string,
  how: { sha: string } | { fn: string },
  perCall: number,
): Case {
  const send = (keys: string[]) =>
    'sha' in how
      ? client.evalsha(how.sha, keys.length, ...keys, String(LIMIT), String(WINDOW_MS))
      : client.call('FCALL', how.fn, String(keys.length), ...keys, String(LIMIT), String(WINDOW_MS));
  let keys: string[] = [];
  return {
    id,
    name,
    inFlight: perCall === 1 ? 1 : perCall,
    decide(key) {
      keys.push(`floor:${key}`);
      if (keys.length < perCall) return Promise.resolve();
      const batch = keys;
      keys = [];
      return send(batch);
    },
  };
}

/**
 * The clocked bound (FLOOR_CLOCKED): `perCall` decisions of `keysEach` keys per FCALL, or per EVALSHA of
 * the same script when `sha` is given.
 */
function clockedCase(
  client: Redis,
  id: string,
  name: string,
  perCall: number,
  keysEach: number,
  sha?: string,
): Case {
  let keys: string[] = [];
  return {
    id,
    name,
    inFlight: perCall,
    decide(key) {
      for (let k = 1; k <= keysEach; k++) keys.push(`bound:{${key}}:${k}`);
      if (keys.length < perCall * keysEach) return Promise.resolve();
      const batch = keys;
      keys = [];
      return sha === undefined
        ? client.call('FCALL', 'rkbench_floor_clocked', String(batch.length), ...batch)
        : client.evalsha(sha, batch.length, ...batch);
    },
  };
}

/** The hashed bound (FLOOR_HASHED): `perCall` decisions of `fields` fields of one hash per FCALL. */
function hashedCase(client: Redis, id: string, name: string, perCall: number, fields: number): Case {
  let keys: string[] = [];
  const names = Array.from({ length: fields }, (_, f) => `r${f + 1}`);
  return {
    id,
    name,
    inFlight: perCall,
    decide(key) {
      keys.push(`bound:{${key}}`);
      if (keys.length < perCall) return Promise.resolve();
      const batch = keys;
      keys = [];
      return client.call('FCALL', 'rkbench_floor_hashed', String(batch.length), ...batch, ...names);
    },
  };
}

/** A peer's Redis limiter (bench/peers.ts), called as its middleware calls it. */
async function peerCase(
  peer: typeof expressRedis,
  port: number,
  id: string,
  name: string,
  inFlight: number,
): Promise<{ case: Case; close(): Promise<void> }> {
  const instance = await peer.create({ limit: LIMIT, windowMs: WINDOW_MS }, { redisPort: port });
  return {
    case: { id, name, inFlight, decide: (key) => instance.decide(key) },
    close: () => instance.close(),
  };
}

/** The major version of a redis-server binary, from its `--version` line (0 when unreadable). */
async function majorVersion(binary: string): Promise<number> {
  const { stdout } = await run(binary, ['--version']);
  return Number(/ v=(\d+)/.exec(stdout)?.[1] ?? 0);
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
 * Instructions of a dump spent in the server's cron (serverCron, inclusive): housekeeping that runs on
 * wall time, so that a row that takes longer on a loaded machine meets more of it (up to 2,000 Ir per
 * decision at 1 in flight under valgrind). Left out of the counts.
 */
async function cronInstructions(file: string): Promise<number> {
  const { stdout } = await run('callgrind_annotate', ['--inclusive=yes', '--threshold=100', file], {
    maxBuffer: 64 * 1024 * 1024,
  });
  const found = /^\s*([\d,]+) \([^)]*\)\s+\S*:serverCron /m.exec(stdout);
  return found === null ? 0 : Number((found[1] as string).replaceAll(',', ''));
}

/**
 * Instructions of a dump spent in the script commands themselves (EVALSHA, EVAL and FCALL, inclusive):
 * the total less the server's own housekeeping (cron, active expiry) and connection handling, which
 * vary with wall time on a loaded machine.
 */
async function scriptInstructions(file: string): Promise<number> {
  const { stdout } = await run('callgrind_annotate', ['--inclusive=yes', '--threshold=100', file], {
    maxBuffer: 64 * 1024 * 1024,
  });
  let sum = 0;
  const pattern = /^\s*([\d,]+) \([^)]*\)\s+\S*:(?:evalShaCommand|evalCommand|fcallCommand) /gm;
  for (const [, n] of stdout.matchAll(pattern)) sum += Number((n as string).replaceAll(',', ''));
  return sum;
}

/** The redis-server under callgrind, with a client; `measure` counts one case. */
async function startMeasured(): Promise<{
  port: number;
  client: Redis;
  version: string;
  measure(c: Case, decisions: number, index: number): Promise<CallgrindRow>;
  stop(): Promise<void>;
}> {
  const dir = mkdtempSync(join(tmpdir(), 'rk-callgrind-'));
  const port = await freePort();
  const args = ['--tool=callgrind', `--callgrind-out-file=${join(dir, 'cg.out.%p')}`, redisServerBinary()];
  args.push('--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no');
  // One cron tick a second.
  args.push('--hz', '1', '--dir', dir, '--loglevel', 'warning');
  // What the server does on wall time is left out, so that a loaded machine does not move the counts:
  // rehashing a growing key table happens in the commands that grow it, not partly in the cron, and
  // keys that expire (a token bucket's or GCRA's fresh state lives about a ms) are not swept by the
  // active expiry cycle (DEBUG SET-ACTIVE-EXPIRE 0 below, which Redis 7 allows when told).
  args.push('--activerehashing', 'no');
  if ((await majorVersion(redisServerBinary())) >= 7) args.push('--enable-debug-command', 'local');
  const child = track(spawn('valgrind', args, { stdio: 'ignore' }));
  const client = new Redis({ host: '127.0.0.1', port, maxRetriesPerRequest: 1, retryStrategy: () => 200 });
  client.on('error', () => {});
  for (let i = 0; i < 300 && client.status !== 'ready'; i++) await new Promise((r) => setTimeout(r, 100));
  if (client.status !== 'ready')
    throw new Error('redis-server under valgrind did not start (is valgrind installed?)');
  await client.call('DEBUG', 'SET-ACTIVE-EXPIRE', '0');
  const info = await client.info('server');
  const version = /redis_version:(\S+)/.exec(info)?.[1] ?? 'unknown';
  return {
    port,
    client,
    version,
    async measure(c, decisions, n) {
      const rounds = Math.ceil(decisions / c.inFlight);
      const go = async (label: string, count: number, step: (key: string) => Promise<unknown>) => {
        for (let r = 0; r < count; r++) {
          await Promise.all(Array.from({ length: c.inFlight }, (_, i) => step(`${label}${n}-${r}-${i}`)));
        }
      };
      if (c.prepare) await go('w', 20, c.prepare);
      await go('w', 20, c.decide);
      if (c.prepare) await go('m', rounds, c.prepare);
      await run('callgrind_control', ['-z', String(child.pid)]);
      await go('m', rounds, c.decide);
      await run('callgrind_control', ['-d', String(child.pid)]);
      const dump = lastDump(dir);
      const per = (total: number) => Math.round(total / (rounds * c.inFlight));
      return {
        id: c.id,
        name: c.name,
        inFlight: c.inFlight,
        all: per(dumpInstructions(dump) - (await cronInstructions(dump))),
        scripts: per(await scriptInstructions(dump)),
      };
    },
    async stop() {
      client.disconnect();
      await stopChild(child, 5000);
      if (process.env.CALLGRIND_KEEP === '1') console.log(`dumps kept in ${dir}`);
      else rmSync(dir, { recursive: true, force: true });
    },
  };
}

/** The targets, each a ratio of two rows' instructions per decision ('all'). */
const TARGETS: ReadonlyArray<{ what: string; row: string; over: string; atMost: number }> = [
  { what: 'fixed, 64 in flight, vs the batched floor (c)', row: 'fixed 64', over: 'c', atMost: 1.5 },
  {
    what: 'fixed, 64 in flight, vs rate-limit-redis',
    row: 'fixed 64',
    over: 'rate-limit-redis',
    atMost: 0.75,
  },
  {
    what: 'fixed, 1 in flight, vs the clock floor by EVALSHA (e1)',
    row: 'fixed 1',
    over: 'e1',
    atMost: 1.25,
  },
  { what: '3 fixed rules vs 1, 64 in flight', row: 'fixed x3 64', over: 'fixed 64', atMost: 2.2 },
  {
    what: 'a rule with a rule-wide limit set, 64 in flight, vs the same without',
    row: 'rule-wide 64',
    over: 'fixed 64',
    atMost: 1.1,
  },
  {
    what: 'a rule with a rule-wide limit set, 1 in flight, vs the same without',
    row: 'rule-wide 1',
    over: 'fixed 1',
    atMost: 1.1,
  },
  { what: 'sliding, 64 in flight, vs (c)', row: 'sliding 64', over: 'c', atMost: 2.5 },
  { what: 'sliding-log, 64 in flight, vs (c)', row: 'sliding-log 64', over: 'c', atMost: 2.5 },
  { what: 'calendar, 64 in flight, vs (c)', row: 'calendar 64', over: 'c', atMost: 2 },
  { what: 'token-bucket, 64 in flight, vs (c)', row: 'token-bucket 64', over: 'c', atMost: 2 },
  { what: 'gcra, 64 in flight, vs (c)', row: 'gcra 64', over: 'c', atMost: 2 },
  { what: 'concurrency decision, 64 in flight, vs (c)', row: 'concurrency 64', over: 'c', atMost: 2 },
  { what: 'concurrency release, 64 in flight, vs (c)', row: 'release 64', over: 'c', atMost: 1 },
];

/** Runs every case against one redis-server under callgrind, in one run; `filter` picks cases by name. */
export async function runRedisCallgrind(
  log: (line: string) => void,
  options: { decisions?: number; filter?: RegExp } = {},
): Promise<{ section: Section; rows: CallgrindRow[] }> {
  const decisions = options.decisions ?? Number(process.env.CALLGRIND_DECISIONS ?? 2000);
  const server = await startMeasured();
  const { client, port } = server;
  const store = new RedisStore({ client, prefix: 'cg' });
  const closers: Array<() => Promise<void>> = [];
  const rows: CallgrindRow[] = [];
  try {
    // The store learns which rules have had an override (redis-overrides.ts) on its first decision, and
    // reads every rule's override until it knows: measured once it does.
    const overridden = storeRule('ov', 'fixed');
    await store.override?.(overridden, 'vip', 2 * LIMIT);
    // A rule whose every key has a rule-wide limit (limiter.setLimit): read once per script call.
    const ruleWide = storeRule('rw', 'fixed');
    await store.override?.(ruleWide, null, LIMIT);
    await storeCase(store, '', '', [overridden], 1).decide('first');
    await new Promise((r) => setTimeout(r, 3000));
    const oneSha = (await client.script('LOAD', FLOOR_ONE)) as string;
    const manySha = (await client.script('LOAD', FLOOR_MANY)) as string;
    const clockedSha = (await client.script('LOAD', FLOOR_CLOCKED)) as string;
    await client.call('FUNCTION', 'LOAD', 'REPLACE', FLOOR_LIBRARY);
    const express = await peerCase(
      expressRedis,
      port,
      'rate-limit-redis',
      'rate-limit-redis (express-rate-limit)',
      64,
    );
    const flexible = await peerCase(
      flexibleRedis,
      port,
      'rate-limiter-flexible',
      'rate-limiter-flexible',
      64,
    );
    closers.push(express.close, flexible.close);
    const fixed = [storeRule('r1', 'fixed'), storeRule('r2', 'fixed'), storeRule('r3', 'fixed')];
    const concurrency = storeRule('cc', 'concurrency');
    const settled = storeRule('st', 'fixed');
    const release = (op: StoreOp, receipt: number) => store.refund([{ op, receipt }]);
    // Three rules on one key form, as a limiter compiles them (rules/compile.ts): grouped, one hash per
    // identity (StoreRule.grouped). A rule alone on its key is not.
    const grouped = fixed.map((rule) => ({ ...rule, grouped: true }));
    // CALLGRIND_FLOORS=e1,c: only these floors (all by default), while iterating on one row.
    const floors = new Set(
      process.env.CALLGRIND_FLOORS?.split(',') ?? ['a', 'b', 'c', 'd', 'e', 'e1', 'f', 'g', 'h'],
    );
    const cases: Case[] = [
      floorCase(
        client,
        'a',
        '(a) floor: one EVALSHA per decision (INCR; PEXPIRE when new)',
        { sha: oneSha },
        1,
      ),
      floorCase(client, 'b', '(b) the same as a Redis function (FCALL)', { fn: 'rkbench_floor_one' }, 1),
      floorCase(client, 'c', '(c) batched floor: one EVALSHA deciding 32 keys', { sha: manySha }, 32),
      floorCase(client, 'd', '(d) the same as a Redis function (FCALL)', { fn: 'rkbench_floor_many' }, 32),
      clockedCase(client, 'e', '(e) bound: FCALL with TIME and SET NX GET PX, 1 per call', 1, 1),
      clockedCase(
        client,
        'e1',
        '(e1) clock floor: TIME and SET NX GET PX by EVALSHA, 1 per call',
        1,
        1,
        clockedSha,
      ),
      clockedCase(client, 'f', '(f) bound: the same, 32 per call', 32, 1),
      clockedCase(client, 'g', '(g) bound: the same with 3 keys per decision, 32 per call', 32, 3),
      hashedCase(
        client,
        'h',
        '(h) bound: TIME, HMGET, HSET of 3 fields, PEXPIRE NX per decision, 32 per call',
        32,
        3,
      ),
      express.case,
      flexible.case,
      storeCase(store, 'fixed 1', 'ratekeeper fixed, 1 in flight', fixed.slice(0, 1), 1),
      storeCase(store, 'fixed 64', 'ratekeeper fixed, 64 in flight', fixed.slice(0, 1), 64),
      crossSlotCase(client, fixed[0] as StoreRule, 32),
      storeCase(store, 'fixed x3 1', 'ratekeeper 3 fixed rules of one identity, 1 in flight', grouped, 1),
      storeCase(store, 'fixed x3 64', 'ratekeeper 3 fixed rules of one identity, 64 in flight', grouped, 64),
      ...(['calendar', 'token-bucket', 'gcra', 'sliding', 'sliding-log'] as const).map((type) =>
        storeCase(store, `${type} 64`, `ratekeeper ${type}, 64 in flight`, [storeRule(type, type)], 64),
      ),
      storeCase(store, 'concurrency 1', 'ratekeeper concurrency, 1 in flight', [concurrency], 1),
      storeCase(store, 'concurrency 64', 'ratekeeper concurrency, 64 in flight', [concurrency], 64),
      afterCase(
        store,
        'concurrency held 64',
        'ratekeeper concurrency on a key holding a slot, 64 in flight',
        concurrency,
        64,
        1,
        (op) => store.evaluate([op], 'check'),
      ),
      afterCase(
        store,
        'release 1',
        'ratekeeper concurrency release, 1 in flight',
        concurrency,
        1,
        1,
        release,
      ),
      afterCase(
        store,
        'release 64',
        'ratekeeper concurrency release, 64 in flight',
        concurrency,
        64,
        1,
        release,
      ),
      afterCase(
        store,
        'settle up 64',
        'ratekeeper settle above the estimate (fixed), 64 in flight',
        settled,
        64,
        100,
        (op) => store.evaluate([{ ...op, cost: 50 }], 'record'),
      ),
      afterCase(
        store,
        'settle down 64',
        'ratekeeper settle below the estimate (fixed), 64 in flight',
        settled,
        64,
        100,
        async (op, receipt) => {
          await store.refund([{ op: { ...op, cost: 60 }, receipt }]);
          return store.evaluate([{ ...op, cost: 0 }], 'peek');
        },
      ),
      storeCase(
        store,
        'lockout 64',
        'ratekeeper fixed with a lockout, 64 in flight',
        [storeRule('lk', 'fixed', true)],
        64,
      ),
      storeCase(
        store,
        'overridden rule 64',
        'ratekeeper rule that has had an override, 64 in flight',
        [overridden],
        64,
      ),
      storeCase(
        store,
        'overridden key 64',
        'ratekeeper key with an override, 64 in flight',
        [overridden],
        64,
        () => 'vip',
      ),
      storeCase(
        store,
        'rule-wide 1',
        'ratekeeper fixed with a rule-wide limit set, 1 in flight',
        [ruleWide],
        1,
      ),
      storeCase(
        store,
        'rule-wide 64',
        'ratekeeper fixed with a rule-wide limit set, 64 in flight',
        [ruleWide],
        64,
      ),
    ].filter((c) => floors.has(c.id) || !options.filter || options.filter.test(c.name));
    log(`redis-server ${server.version} under callgrind, ${decisions} decisions per case, fresh keys`);
    for (const [n, c] of cases.entries()) {
      // Every case starts on an empty keyspace: the cost of growing Redis's key tables then falls on each
      // case alike, whatever ran before it.
      await client.flushall('SYNC');
      await store.override?.(overridden, 'vip', 2 * LIMIT);
      await store.override?.(ruleWide, null, LIMIT);
      const row = await server.measure(c, decisions, n);
      rows.push(row);
      log(`  ${c.name.padEnd(62)} ${num(row.all).padStart(9)} ${num(row.scripts).padStart(9)}`);
    }
  } finally {
    await store.close();
    for (const close of closers) await close().catch(() => {});
    await server.stop();
  }
  return { section: callgrindSection(rows, server.version, decisions), rows };
}

function callgrindSection(rows: CallgrindRow[], version: string, decisions: number): Section {
  const by = new Map(rows.map((r) => [r.id, r]));
  const over = (row: CallgrindRow, id: string) => {
    const base = by.get(id);
    return base === undefined ? undefined : row.all / base.all;
  };
  const table: Table = {
    title: `redis-server instructions per decision (callgrind, redis-server ${version})`,
    columns: ['subject', 'in flight', 'Ir / decision', 'in script commands', 'vs (a)', 'vs (c)'],
    rows: rows.map((r) => [
      r.name,
      String(r.inFlight),
      num(r.all),
      num(r.scripts),
      ratio(over(r, 'a')),
      ratio(over(r, 'c')),
    ]),
    notes: [
      `${decisions} decisions per subject on fresh distinct keys, a fixed window of 1,000,000 per 60 s (other types as named); ` +
        'instructions of the whole redis-server process but its cron (serverCron), with no active expiry and no rehashing in the cron, ' +
        'between a zeroing and a dump of the counters, divided by decisions.',
      'In flight: requests made at once; ratekeeper batches them, 32 per script call. Each subject starts on an empty ' +
        'keyspace (FLUSHALL). Two runs on this machine differ by up to about 3% per row (more for the 1-per-call rows).',
    ],
  };
  const checks: Table = {
    title: 'Redis cost targets (ratios of the figures above, same run)',
    columns: ['target', 'measured', 'verdict'],
    rows: TARGETS.filter((t) => by.has(t.row) && by.has(t.over)).map((t) => {
      const value = (by.get(t.row) as CallgrindRow).all / (by.get(t.over) as CallgrindRow).all;
      return [`${t.what} <= ${t.atMost}x`, ratio(value), value <= t.atMost ? 'met' : 'missed'];
    }),
  };
  return {
    id: 'redis-callgrind',
    title: 'Redis work per decision (callgrind)',
    intro:
      'Instructions redis-server runs per decision, counted by valgrind --tool=callgrind: independent of machine load. ' +
      'Command: `npm run bench -- redis-cost`.',
    tables: [table, checks],
  };
}

/**
 * This run's rows beside earlier runs' (CALLGRIND_BEFORE, each `label=file` of a CALLGRIND_SAVE): Ir per
 * decision (the whole process) of each, and this run's change against each, per row of this run.
 */
function comparisonTable(
  rows: readonly CallgrindRow[],
  before: ReadonlyArray<[string, CallgrindRow[]]>,
): Table {
  const change = (now: number, then: number | undefined) =>
    then === undefined ? '-' : `${now >= then ? '+' : ''}${(((now - then) / then) * 100).toFixed(1)}%`;
  return {
    title: 'redis-server instructions per decision, this run against earlier ones',
    columns: [
      'subject',
      ...before.map(([label]) => label),
      'this run',
      ...before.map(([label]) => `vs ${label}`),
      'this run, in script commands',
    ],
    rows: rows.map((row) => {
      const then = before.map(([, earlier]) => earlier.find((r) => r.name === row.name)?.all);
      return [
        row.name,
        ...then.map((v) => num(v)),
        num(row.all),
        ...then.map((v) => change(row.all, v)),
        num(row.scripts),
      ];
    }),
  };
}

/** The section of a run whose rows were saved (CALLGRIND_SAVE), for the server and decisions named. */
function keptRun(file: string): { section: Section; rows: CallgrindRow[] } {
  const rows = JSON.parse(readFileSync(file, 'utf8')) as CallgrindRow[];
  const version = process.env.CALLGRIND_VERSION ?? 'unknown';
  return { section: callgrindSection(rows, version, Number(process.env.CALLGRIND_DECISIONS ?? 2000)), rows };
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const filter = process.argv[2] ? new RegExp(process.argv[2], 'i') : undefined;
  // CALLGRIND_ROWS=<file>: the rows of an earlier run (CALLGRIND_SAVE) written again, nothing measured.
  const kept = process.env.CALLGRIND_ROWS;
  const { section, rows } =
    kept === undefined
      ? await runRedisCallgrind((line) => console.log(line), filter ? { filter } : {})
      : keptRun(kept);
  const save = process.env.CALLGRIND_SAVE;
  if (save) writeFileSync(save, `${JSON.stringify(rows, null, 2)}\n`);
  const before = (process.env.CALLGRIND_BEFORE ?? '')
    .split(',')
    .filter((part) => part !== '')
    .map((part): [string, CallgrindRow[]] => {
      const at = part.indexOf('=');
      return [part.slice(0, at), JSON.parse(readFileSync(part.slice(at + 1), 'utf8')) as CallgrindRow[]];
    });
  const tables = before.length === 0 ? section.tables : [comparisonTable(rows, before), ...section.tables];
  for (const table of tables) console.log(textTable(table));
  const block = process.env.CALLGRIND_BLOCK;
  if (block) {
    const body = [`## ${section.title}`, readFileSync(block, 'utf8').trim(), ...tables.map(markdownTable)];
    await writeBlock('bench:redis-callgrind', body.join('\n\n'), process.env.BENCH_OUT ?? RESULTS_PATH);
  }
  process.exit(0);
}
