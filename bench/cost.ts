// Redis cost per decision: commands sent and executed (MONITOR, INFO commandstats), keys and bytes per identity.

import type { Redis } from 'ioredis';
import type { BenchConfig } from './config.js';
import { type Contender, type ContenderInstance, errorMessage, withTimeout } from './contender.js';
import { num, type Section, type Table } from './report.js';

/** The cost of one contender. Per-decision figures are averages over the measured decisions. */
export interface CostRow {
  name: string;
  group: Contender['group'];
  /** Commands the client sent (EVALSHA, EVAL, plain commands), per decision. */
  sentPerDecision?: number;
  /** Commands Redis executed, including those run inside scripts (INFO commandstats), per decision. */
  executedPerDecision?: number;
  /** e.g. `evalsha 1 [set 0.2, incr 0.8]`: top-level commands, then those inside scripts. */
  commands?: string;
  keysPerIdentity?: number;
  bytesAfterOneHit?: number;
  bytesAfterHits?: number;
  /** Commands sent per decision on a key already denied. */
  sentPerDenied?: number;
  failed?: string;
}

/** Commands issued by the measuring connections, left out of every count. */
const adminCommands = new Set(['info', 'config', 'monitor', 'echo', 'client', 'hello', 'select', 'ping']);
const endMarker = 'ratekeeper-bench-cost-end';

interface Tally {
  sent: Map<string, number>;
  inScripts: Map<string, number>;
}

function bump(map: Map<string, number>, name: string): void {
  map.set(name, (map.get(name) ?? 0) + 1);
}

function sum(map: Map<string, number>): number {
  let total = 0;
  for (const count of map.values()) total += count;
  return total;
}

/** Runs `work` while MONITOR tallies every command, split into sent by clients and run inside scripts. */
async function monitored(admin: Redis, work: () => Promise<void>, timeoutMs: number): Promise<Tally> {
  const tally: Tally = { sent: new Map(), inScripts: new Map() };
  const monitor = await admin.monitor();
  try {
    let sawEnd: () => void = () => {};
    const ended = new Promise<void>((resolve) => {
      sawEnd = resolve;
    });
    monitor.on('monitor', (_time: string, args: string[], source: string) => {
      const name = (args[0] ?? '').toLowerCase();
      if (name === 'echo' && args[1] === endMarker) sawEnd();
      if (adminCommands.has(name)) return;
      bump(source === 'lua' ? tally.inScripts : tally.sent, name);
    });
    await work();
    await admin.echo(endMarker);
    await Promise.race([
      ended,
      new Promise((_, reject) => setTimeout(() => reject(new Error('MONITOR lagged')), timeoutMs)),
    ]);
  } finally {
    monitor.disconnect();
  }
  return tally;
}

/** Sum of `calls` over INFO commandstats, admin commands left out. */
async function executedCommands(admin: Redis): Promise<number> {
  const info = await admin.info('commandstats');
  let total = 0;
  for (const match of info.matchAll(/^cmdstat_([^:]+):calls=(\d+)/gm)) {
    const name = (match[1] ?? '').split('|')[0] ?? '';
    if (!adminCommands.has(name)) total += Number(match[2]);
  }
  return total;
}

/** Number of keys in the database and their total MEMORY USAGE (bytes, key names included). */
async function keyspace(admin: Redis): Promise<{ keys: number; bytes: number }> {
  let cursor = '0';
  let keys = 0;
  let bytes = 0;
  do {
    const [next, batch] = await admin.scan(cursor, 'COUNT', 1000);
    cursor = next;
    for (const key of batch) {
      keys++;
      bytes += Number((await admin.memory('USAGE', key, 'SAMPLES', 0)) ?? 0);
    }
  } while (cursor !== '0');
  return { keys, bytes };
}

function describe(tally: Tally, decisions: number): string {
  const list = (map: Map<string, number>) =>
    [...map.entries()]
      .sort((a, b) => b[1] - a[1])
      .map(([name, count]) => `${name} ${num(count / decisions, 2).replace(/\.00$/, '')}`)
      .join(', ');
  const inner = list(tally.inScripts);
  return `${list(tally.sent) || 'none'}${inner ? ` [${inner}]` : ''}`;
}

function pending(contender: Contender): CostRow {
  return { name: contender.name, group: contender.group };
}

async function measureOne(contender: Contender, config: BenchConfig, redisPort: number, admin: Redis) {
  const row = pending(contender);
  const timeoutMs = config.stallTimeoutMs;
  let instance: ContenderInstance | undefined;
  let hot: ContenderInstance | undefined;
  try {
    // Limit and window such that every hit is admitted and every state outlives the measurement
    // (a GCRA or token-bucket key at 1 of a million per minute would already have expired).
    instance = await withTimeout(
      contender.create({ limit: config.costLimit, windowMs: config.costWindowMs }, { redisPort }),
      timeoutMs,
      'setup',
    );
    const decide = instance.decide;
    for (let i = 0; i < 20; i++) await decide(`warm-${i}`);

    // Identities hit `costHits` times each: per-decision commands, then bytes per identity.
    await admin.flushall();
    await admin.config('RESETSTAT');
    const identities = Array.from({ length: config.costKeys }, (_, i) => `id-${i}`);
    const tally = await monitored(
      admin,
      async () => {
        for (let hit = 0; hit < config.costHits; hit++) await Promise.all(identities.map((id) => decide(id)));
      },
      timeoutMs,
    );
    const decisions = identities.length * config.costHits;
    row.sentPerDecision = sum(tally.sent) / decisions;
    row.executedPerDecision = (await executedCommands(admin)) / decisions;
    row.commands = describe(tally, decisions);
    const afterHits = await keyspace(admin);
    row.bytesAfterHits = afterHits.bytes / identities.length;

    await admin.flushall();
    await Promise.all(identities.map((id) => decide(id)));
    const afterOne = await keyspace(admin);
    row.bytesAfterOneHit = afterOne.bytes / identities.length;
    row.keysPerIdentity = afterOne.keys / identities.length;

    // A key already denied: what each further attempt costs.
    hot = await withTimeout(
      contender.create({ limit: config.hotLimit, windowMs: config.windowMs }, { redisPort }),
      timeoutMs,
      'setup',
    );
    const decideHot = hot.decide;
    for (let i = 0; i <= config.hotLimit; i++) await decideHot('hot');
    const denied = await monitored(
      admin,
      async () => {
        for (let i = 0; i < config.costHotDecisions; i++) await decideHot('hot');
      },
      timeoutMs,
    );
    row.sentPerDenied = sum(denied.sent) / config.costHotDecisions;
  } catch (error) {
    row.failed = errorMessage(error);
  } finally {
    for (const open of [instance, hot]) {
      try {
        if (open) await withTimeout(open.close(), timeoutMs, 'close');
      } catch {
        // measured already
      }
    }
  }
  return row;
}

/** Measures every Redis contender, one after the other, on an otherwise idle server. */
export async function runCost(
  contenders: readonly Contender[],
  config: BenchConfig,
  redisPort: number,
  admin: Redis,
  log: (line: string) => void,
): Promise<{ section: Section; rows: CostRow[] }> {
  const rows: CostRow[] = [];
  for (const contender of contenders.filter((c) => c.store === 'redis')) {
    const measured = withTimeout(
      measureOne(contender, config, redisPort, admin),
      2 * config.stallTimeoutMs,
      'cost',
    );
    rows.push(
      await measured.catch((error: unknown) => ({ ...pending(contender), failed: errorMessage(error) })),
    );
  }
  await admin.flushall();
  log(`  redis-cost: ${rows.length} contenders measured`);
  const table: Table = {
    title: 'Redis cost per decision and per identity',
    columns: [
      'contender',
      'sent / decision',
      'executed / decision',
      'commands per decision [inside scripts]',
      'keys / identity',
      'bytes / identity, 1 hit',
      `bytes / identity, ${config.costHits} hits`,
      'sent / denied decision',
    ],
    rows: rows.map((r) =>
      r.failed
        ? [r.name, 'failed', '-', r.failed, '-', '-', '-', '-']
        : [
            r.name,
            num(r.sentPerDecision, 2),
            num(r.executedPerDecision, 2),
            r.commands ?? '-',
            num(r.keysPerIdentity, 2),
            num(r.bytesAfterOneHit),
            num(r.bytesAfterHits),
            num(r.sentPerDenied, 2),
          ],
    ),
  };
  const section: Section = {
    id: 'redis-cost',
    title: 'Redis cost',
    intro:
      `${num(config.costKeys)} identities hit ${config.costHits} times each (limit ${num(config.costLimit)} per ` +
      `${config.costWindowMs / 3_600_000} h), after a warm-up ` +
      `that loads the scripts. "sent" counts what the client sent (MONITOR: EVALSHA, EVAL and plain commands); ` +
      `"executed" is the sum of calls over INFO commandstats, which also counts the commands a script runs. ` +
      `Bytes are MEMORY USAGE (SAMPLES 0) summed over the keys an identity left behind, key names included. ` +
      `"sent / denied decision": ${num(config.costHotDecisions)} more attempts on a key already over its limit of ${config.hotLimit}.`,
    tables: [table],
  };
  return { section, rows };
}
