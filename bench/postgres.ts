// PostgreSQL scenario: ratekeeper's PostgresStore against rate-limiter-flexible's RateLimiterPostgres on one server,
// RedisStore beside them for scale; decisions/s at 64 in flight, server and client CPU per decision, exact counts, a profile.
// `npm run bench -- postgres` (BENCH_REPS rounds, POSTGRES_BENCH_SECONDS each): writes its block in bench/RESULTS.md.
import os from 'node:os';
import type pg from 'pg';
import { RateLimiterPostgres, RateLimiterRedis } from 'rate-limiter-flexible';
import { createLimiter, PostgresStore, RedisStore } from '../src/index.js';
import { type PostgresServer, startPostgres } from '../test/support/postgres.js';
import { type RedisServer, startRedis } from '../test/support/redis.js';
import { closeRedis, openRedis, redisCpuSeconds } from './contender.js';
import { runLoad } from './load.js';
import { type Backend, backendCpuSeconds, flexible, profileCheck } from './postgres-profile.js';
import { markdownTable } from './report.js';
import { RESULTS_PATH, writeBlock } from './results-file.js';
import { median, pairedRatio, spread } from './stats.js';

const quick = process.env.BENCH_QUICK === '1';
const reps = Number(process.env.BENCH_REPS ?? (quick ? 2 : 5));
const seconds = Number(process.env.POSTGRES_BENCH_SECONDS ?? (quick ? 2 : 4));
/** Decisions in flight, as in the issue. */
const CONCURRENCY = 64;
/** Connections in each subject's pool: the same for both PostgreSQL subjects. */
const POOL = Number(process.env.POSTGRES_BENCH_POOL ?? 16);
/** Distinct keys cycled through, all admitted (the limit is far above what a run reaches). */
const KEYS = 10_000;
const LIMIT = 1_000_000_000;
const WINDOW_S = 3600;
/** The exactness race: one key, this limit, three times as many attempts. */
const RACE_LIMIT = 1000;

interface Instance {
  decide(key: string): Promise<boolean>;
  close(): Promise<void>;
}
interface Subject {
  name: string;
  backend: Backend;
  create(limit: number, tag: string): Promise<Instance>;
}

interface Round {
  perSecond: number;
  /** Server CPU per decision (µs): the PostgreSQL backends from /proc, or redis-server's INFO cpu. */
  serverUs: number;
  /** This process's CPU per decision (µs): the library's client side and the load driver. */
  clientUs: number;
  errors: number;
  firstError?: string;
}

/** ratekeeper's PostgresStore deciding one rule of `type` (WINDOW_S long), its name `prefix` and the tag. */
function postgresStoreSubject(
  pgServer: PostgresServer,
  name: string,
  prefix: string,
  type: 'fixed' | 'sliding',
): Subject {
  return {
    name,
    backend: 'postgres',
    async create(limit, tag) {
      const pool = pgServer.pool({ max: POOL });
      const store = new PostgresStore({ pool, schema: 'bench' });
      const rule = {
        name: `${prefix}${tag}`,
        key: 'ip',
        limit,
        window: { type, size: WINDOW_S * 1000 },
      };
      const limiter = createLimiter({ store, rules: [rule], storeTimeout: '60s' });
      return {
        decide: async (key) => (await limiter.consume(rule.name, key)).allowed,
        close: async () => {
          await limiter.close();
          await pool.end();
        },
      };
    },
  };
}

function subjects(pgServer: PostgresServer, redis: RedisServer): Subject[] {
  return [
    postgresStoreSubject(pgServer, 'ratekeeper PostgresStore', 'b', 'fixed'),
    // A sliding window of the same size and limit: decided by check.sql's PL/pgSQL (one call per request,
    // the requests waiting sharing a statement, check-many.sql), where the subject above takes check-batch.sql.
    postgresStoreSubject(pgServer, 'ratekeeper PostgresStore, sliding window (check.sql)', 's', 'sliding'),
    {
      name: 'rate-limiter-flexible RateLimiterPostgres',
      backend: 'postgres',
      async create(limit, tag) {
        const pool = pgServer.pool({ max: POOL });
        const limiter = await new Promise<RateLimiterPostgres>((resolve, reject) => {
          const made: RateLimiterPostgres = new RateLimiterPostgres(
            {
              storeClient: pool,
              storeType: 'pool',
              tableName: 'rlflx_bench',
              keyPrefix: `b${tag}`,
              points: limit,
              duration: WINDOW_S,
            },
            (error?: Error) => (error ? reject(error) : resolve(made)),
          );
        });
        return { decide: (key) => flexible(() => limiter.consume(key)), close: () => pool.end() };
      },
    },
    {
      name: 'ratekeeper RedisStore',
      backend: 'redis',
      async create(limit, tag) {
        const client = openRedis(redis.port);
        const rule = {
          name: 'b',
          key: 'ip',
          limit,
          window: { type: 'fixed' as const, size: WINDOW_S * 1000 },
        };
        const store = new RedisStore({ client, prefix: `b${tag}` });
        const limiter = createLimiter({ store, rules: [rule], storeTimeout: '60s' });
        return {
          decide: async (key) => (await limiter.consume('b', key)).allowed,
          close: async () => {
            await limiter.close();
            await closeRedis(client);
          },
        };
      },
    },
    {
      name: 'rate-limiter-flexible RateLimiterRedis',
      backend: 'redis',
      async create(limit, tag) {
        const client = openRedis(redis.port);
        const limiter = new RateLimiterRedis({
          storeClient: client,
          points: limit,
          duration: WINDOW_S,
          keyPrefix: `f${tag}`,
        });
        return { decide: (key) => flexible(() => limiter.consume(key)), close: () => closeRedis(client) };
      },
    },
  ];
}

/** One round of one subject: warmed up, then `seconds` of decisions at 64 in flight on KEYS keys. */
async function measure(subject: Subject, tag: string, servers: Servers): Promise<Round> {
  const instance = await subject.create(LIMIT, tag);
  try {
    const keys = Array.from({ length: KEYS }, (_, i) => `${tag}.${i}`);
    const load = { concurrency: CONCURRENCY, keys, stallTimeoutMs: 60_000, sampleEvery: 1 };
    await runLoad(instance.decide, { ...load, maxOps: 50_000, maxMs: 1000 });
    const serverCpu = () =>
      subject.backend === 'postgres'
        ? backendCpuSeconds(servers.dataDir)
        : redisCpuSeconds(servers.redisAdmin);
    const [cpuBefore, clientBefore] = [await serverCpu(), process.cpuUsage()];
    const result = await runLoad(instance.decide, { ...load, maxOps: 10_000_000, maxMs: seconds * 1000 });
    const client = process.cpuUsage(clientBefore);
    const cpu = (await serverCpu()) - cpuBefore;
    return {
      perSecond: result.opsPerSec,
      serverUs: (cpu / result.ops) * 1e6,
      clientUs: (client.user + client.system) / result.ops,
      errors: result.errors,
      ...(result.firstError !== undefined && { firstError: result.firstError }),
    };
  } finally {
    await instance.close();
  }
}

/** The race on one key: 3x the limit at 64 in flight; what was admitted. */
async function race(subject: Subject, tag: string): Promise<number> {
  const instance = await subject.create(RACE_LIMIT, tag);
  try {
    const result = await runLoad(instance.decide, {
      concurrency: CONCURRENCY,
      keys: [`race.${tag}`],
      maxOps: RACE_LIMIT * 3,
      maxMs: 600_000,
      stallTimeoutMs: 60_000,
    });
    if (result.errors > 0) throw new Error(`${subject.name}: ${result.errors} errors (${result.firstError})`);
    return result.admitted;
  } finally {
    await instance.close();
  }
}

interface Servers {
  dataDir: string;
  pgAdmin: pg.Pool;
  redisAdmin: ReturnType<typeof openRedis>;
}

function loadLine(): string {
  const [one, five] = os.loadavg();
  return `load average ${one?.toFixed(1)} (1 min), ${five?.toFixed(1)} (5 min) on ${os.cpus().length} cores`;
}

export async function runPostgres(log: (line: string) => void): Promise<void> {
  const pgServer = await startPostgres();
  const redis = await startRedis();
  const pgAdmin = pgServer.pool({ max: 2 });
  const redisAdmin = redis.client();
  try {
    const version = (await pgAdmin.query('SHOW server_version')).rows[0] as { server_version: string };
    const dataDir = ((await pgAdmin.query('SHOW data_directory')).rows[0] as { data_directory: string })
      .data_directory;
    const servers: Servers = { dataDir, pgAdmin, redisAdmin };
    // POSTGRES_BENCH_ONLY=postgres: the two PostgreSQL subjects alone (a quicker run while working on the store).
    const only = process.env.POSTGRES_BENCH_ONLY;
    const list = subjects(pgServer, redis).filter((s) => only === undefined || s.backend === only);
    log(
      `PostgreSQL ${version.server_version} on port ${pgServer.port}, redis-server ${redis.version}; ${loadLine()}`,
    );
    const loadBefore = loadLine();
    const races: Record<string, number> = {};
    for (const [i, subject] of list.entries()) {
      races[subject.name] = await race(subject, `r${i}`);
      log(
        `  race ${subject.name}: ${races[subject.name]} admitted of ${RACE_LIMIT * 3}, limit ${RACE_LIMIT}`,
      );
    }
    const rounds = new Map<string, Round[]>(list.map((s) => [s.name, []]));
    for (let r = 0; r < reps; r++) {
      for (const [i, subject] of list.entries()) {
        const round = await measure(subject, `m${r}x${i}`, servers);
        rounds.get(subject.name)?.push(round);
        log(
          `  round ${r + 1}/${reps} ${subject.name}: ${Math.round(round.perSecond)}/s, server ${round.serverUs.toFixed(0)} µs, ` +
            `client ${round.clientUs.toFixed(0)} µs` +
            (round.errors ? `, ${round.errors} errors (${round.firstError})` : ''),
        );
      }
    }
    const loadAfter = loadLine();
    // POSTGRES_BENCH_PROFILE=0: no profile after the rounds.
    const profile = process.env.POSTGRES_BENCH_PROFILE === '0' ? '' : await profileCheck(pgServer, log);
    const body = report(list, rounds, races, {
      version: version.server_version,
      loadBefore,
      loadAfter,
      profile,
    });
    log(body);
    await writeBlock('bench:postgres', body, process.env.BENCH_OUT ?? RESULTS_PATH);
  } finally {
    redisAdmin.disconnect();
    await pgAdmin.end();
    await redis.stop();
    await pgServer.stop();
  }
}

function report(
  list: Subject[],
  rounds: Map<string, Round[]>,
  races: Record<string, number>,
  facts: { version: string; loadBefore: string; loadAfter: string; profile: string },
): string {
  const ours = rounds.get('ratekeeper PostgresStore') ?? [];
  const field = (name: string, pick: (r: Round) => number) => (rounds.get(name) ?? []).map(pick);
  const rows = list.map((s) => {
    const rs = rounds.get(s.name) ?? [];
    const rate = rs.map((r) => r.perSecond);
    const pg = s.backend === 'postgres';
    return [
      s.name,
      `${Math.round(median(rate)).toLocaleString('en-US')} (±${Math.round(spread(rate) * 100)}%)`,
      `${pairedRatio(
        rate,
        ours.map((r) => r.perSecond),
      ).toFixed(2)}x`,
      `${median(rs.map((r) => r.serverUs)).toFixed(0)} µs ${pg ? '(backends, /proc)' : '(INFO cpu)'}`,
      `${pairedRatio(
        field(s.name, (r) => r.serverUs),
        ours.map((r) => r.serverUs),
      ).toFixed(2)}x`,
      `${median(rs.map((r) => r.clientUs)).toFixed(0)} µs`,
      `${races[s.name]} of ${RACE_LIMIT * 3}`,
      String(rs.reduce((sum, r) => sum + r.errors, 0)),
    ];
  });
  const cpus = os.cpus();
  return [
    '## PostgreSQL: PostgresStore, RateLimiterPostgres, RedisStore',
    '',
    `Made by \`npm run bench -- postgres\` (BENCH_REPS=${reps}, POSTGRES_BENCH_SECONDS=${seconds}, pools of ${POOL} connections) ` +
      `on ${cpus.length} × ${cpus[0]?.model ?? '?'}, Node ${process.version}, PostgreSQL ${facts.version}, ` +
      `${new Date().toISOString().slice(0, 16)}Z; ${facts.loadBefore} before, ${facts.loadAfter} after.`,
    '',
    `Each subject in this process, ${CONCURRENCY} decisions in flight on ${KEYS.toLocaleString('en-US')} keys cycled through ` +
      '(all admitted: one fixed-window rule of an hour, a limit never reached), the PostgreSQL subjects on the same server ' +
      `(started by test/support/postgres.ts: fsync off, shared_buffers 64MB), each with a pg Pool of its own of ${POOL} connections; ` +
      `ours calls \`limiter.consume(rule, key)\`, rate-limiter-flexible \`consume(key)\` (its table made by its constructor); ` +
      'PostgresStore takes sql/check-batch.sql for that rule (requests waiting share a statement, statementsInFlight 4), ' +
      'and sql/check.sql (one PL/pgSQL call per request, in statements of sql/check-many.sql the requests waiting share) ' +
      'for a sliding window of the same size and limit. ' +
      `Rounds interleaved (A B C D A B C D ...), ${reps} of each, ${seconds} s each after a 1 s warm-up on the same keys; ` +
      'medians, and ratios as medians of the per-round ratios to ours on PostgreSQL (rounds side by side cancel the ' +
      "machine's drift). Server CPU: utime + stime of the postmaster's processes from /proc/<pid>/stat (the backends " +
      'and background workers) over the round, or redis-server from INFO cpu. Client CPU: this process (the library, ' +
      'pg or ioredis, and the load driver). ' +
      `Race: one key, limit ${RACE_LIMIT}, ${RACE_LIMIT * 3} attempts at ${CONCURRENCY} in flight; exact means ${RACE_LIMIT}.`,
    '',
    markdownTable({
      title: 'Decisions at 64 in flight',
      columns: [
        'subject',
        'decisions/s (spread)',
        'x PostgresStore',
        'server CPU / decision',
        'x PostgresStore',
        'client CPU / decision',
        'admitted in the race',
        'errors',
      ],
      rows,
    }),
    '',
    facts.profile,
  ].join('\n');
}
