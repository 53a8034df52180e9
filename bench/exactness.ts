// Exactness: several processes race on one key through one Redis; how many attempts get admitted.

import type { BenchConfig } from './config.js';
import { type Contender, errorMessage } from './contender.js';
import { Child } from './fork.js';
import { num, type Section, type Table } from './report.js';

export interface ExactRow {
  name: string;
  group: Contender['group'];
  admitted?: number;
  perProcess?: number[];
  errors?: number;
  failed?: string;
}

/** Like Promise.all, but waits for every answer before rejecting, so that no reply is left behind. */
async function allOrFirstError<T>(promises: Promise<T>[]): Promise<T[]> {
  const settled = await Promise.allSettled(promises);
  const failure = settled.find((s): s is PromiseRejectedResult => s.status === 'rejected');
  if (failure) throw failure.reason;
  return settled.map((s) => (s as PromiseFulfilledResult<T>).value);
}

async function raceOne(
  contender: Contender,
  index: number,
  workers: Child[],
  config: BenchConfig,
  redisPort: number,
) {
  const row: ExactRow = { name: contender.name, group: contender.group };
  const timeoutMs = config.stallTimeoutMs;
  const key = 'race';
  try {
    const setup = {
      type: 'setup',
      contender: contender.name,
      limit: config.exactLimit,
      // A day: nothing refills or expires during the race (token bucket and GCRA refill continuously).
      windowMs: 86_400_000,
      prefix: `exact-${index}:`,
      redisPort,
      key,
    };
    await allOrFirstError(workers.map((w) => w.ask(setup, timeoutMs)));
    const race = { type: 'race', key, attempts: config.exactAttempts, concurrency: config.exactConcurrency };
    const answers = await allOrFirstError(workers.map((w) => w.ask(race, timeoutMs)));
    row.perProcess = answers.map((a) => Number(a.admitted));
    row.admitted = row.perProcess.reduce((a, b) => a + b, 0);
    row.errors = answers.reduce((sum, a) => sum + Number(a.errors), 0);
    const firstError = answers.find((a) => a.firstError)?.firstError;
    if (row.errors > 0 && firstError) row.failed = `${num(row.errors)} errors, first: ${String(firstError)}`;
  } catch (error) {
    row.failed = errorMessage(error);
  }
  await Promise.allSettled(workers.map((w) => w.ask({ type: 'teardown' }, timeoutMs)));
  return row;
}

function verdict(row: ExactRow, limit: number): string {
  if (row.admitted === undefined) return 'failed';
  const delta = row.admitted - limit;
  if (delta === 0) return 'exact';
  return delta > 0 ? `over-admits by ${num(delta)}` : `under-admits by ${num(-delta)}`;
}

/** Races every Redis contender with `exactProcesses` forked processes. */
export async function runExactness(
  contenders: readonly Contender[],
  config: BenchConfig,
  redisPort: number,
  log: (line: string) => void,
): Promise<{ section: Section; rows: ExactRow[] }> {
  const racers = contenders.filter((c) => c.store === 'redis');
  const workers = Array.from({ length: config.exactProcesses }, (_, i) =>
    Child.start('exactness-worker', `exactness worker ${i + 1}`),
  );
  const rows: ExactRow[] = [];
  try {
    for (const [index, contender] of racers.entries()) {
      rows.push(await raceOne(contender, index, workers, config, redisPort));
    }
  } finally {
    await Promise.allSettled(workers.map((w) => w.stop()));
  }
  log(`  exactness: ${rows.length} contenders raced`);
  const table: Table = {
    title: `Exactness: ${config.exactProcesses} processes x ${num(config.exactAttempts)} attempts on one key, limit ${num(config.exactLimit)}`,
    columns: ['contender', 'admitted', 'verdict', 'admitted per process', 'note'],
    rows: rows.map((r) => [
      r.name,
      num(r.admitted),
      verdict(r, config.exactLimit),
      r.perProcess?.map((n) => num(n)).join(' / ') ?? '-',
      r.failed ?? '',
    ]),
  };
  const section: Section = {
    id: 'exactness',
    title: 'Exactness under a race',
    intro:
      `${config.exactProcesses} forked processes, each with its own client, set the contender up, then start together and ` +
      `send ${num(config.exactAttempts)} attempts each (${config.exactConcurrency} in flight per process) at one key ` +
      `whose limit is ${num(config.exactLimit)} per day. A correct limiter admits exactly ${num(config.exactLimit)}. ` +
      'Memory stores are per process and not raced.',
    tables: [table],
  };
  return { section, rows };
}
