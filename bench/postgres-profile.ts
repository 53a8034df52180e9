// Where a PostgreSQL decision's time goes: the backends' CPU from /proc, and per statement and per function
// (pg_stat_statements with nested statements, track_functions) for PostgresStore and RateLimiterPostgres.
import { execFileSync } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { RateLimiterPostgres, RateLimiterRes } from 'rate-limiter-flexible';
import { createLimiter, PostgresStore } from '../src/index.js';
import type { PostgresServer } from '../test/support/postgres.js';
import { runLoad } from './load.js';
import { markdownTable } from './report.js';

export type Backend = 'postgres' | 'redis';

const TICKS_PER_SECOND = Number(execFileSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).trim()) || 100;

/** utime, stime, cutime, cstime and the parent of a process, from /proc/<pid>/stat (fields 14-17, 4). */
function stat(pid: number): { ppid: number; own: number; reaped: number } | undefined {
  let text: string;
  try {
    text = readFileSync(`/proc/${pid}/stat`, 'utf8');
  } catch {
    return undefined; // gone since the directory was listed
  }
  // The command name (field 2) may hold spaces and parentheses: the fields that follow its last ')'.
  const f = text.slice(text.lastIndexOf(')') + 2).split(' ');
  const n = (i: number) => Number(f[i - 3]);
  return { ppid: n(4), own: n(14) + n(15), reaped: n(16) + n(17) };
}

/**
 * CPU seconds (user + system) of the PostgreSQL server whose data directory is `dataDir`: the postmaster,
 * every process it started that is still running (backends, background workers), and, through the
 * postmaster's cutime and cstime, those that have ended.
 */
export function backendCpuSeconds(dataDir: string): number {
  const postmaster = Number(readFileSync(join(dataDir, 'postmaster.pid'), 'utf8').split('\n')[0]);
  const main = stat(postmaster);
  if (main === undefined) throw new Error(`no process ${postmaster} (postmaster.pid in ${dataDir})`);
  let ticks = main.own + main.reaped;
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    const child = stat(Number(entry));
    if (child?.ppid === postmaster) ticks += child.own;
  }
  return ticks / TICKS_PER_SECOND;
}

/** rate-limiter-flexible's answer as admitted or not: it denies by rejecting with a RateLimiterRes. */
export async function flexible(consume: () => Promise<unknown>): Promise<boolean> {
  try {
    await consume();
    return true;
  } catch (error) {
    if (error instanceof RateLimiterRes) return false;
    throw error;
  }
}

const PROFILE_DECISIONS = 20_000;

/**
 * Restarts the server with pg_stat_statements (nested statements tracked) and track_functions, runs
 * PROFILE_DECISIONS decisions of each PostgreSQL subject at 64 in flight on fresh keys, and returns
 * Markdown: the statements and functions each decision ran, with their execution time per decision.
 */
export async function profileCheck(server: PostgresServer, log: (line: string) => void): Promise<string> {
  const admin = server.pool({ max: 1 });
  await admin.query("ALTER SYSTEM SET shared_preload_libraries = 'pg_stat_statements'");
  await admin.query("ALTER SYSTEM SET track_functions = 'all'");
  await admin.end();
  await server.restart('fast');
  const pool = server.pool({ max: 16 });
  await pool.query('CREATE EXTENSION IF NOT EXISTS pg_stat_statements');
  // Known only once the library is loaded; read by every connection made after the reload.
  await pool.query("ALTER SYSTEM SET pg_stat_statements.track = 'all'");
  await pool.query('SELECT pg_reload_conf()');
  // The pool's connections made before the reload read it at their next statement; none is kept idle here.
  await Promise.all(
    Array.from({ length: 16 }, () => pool.query("SELECT current_setting('pg_stat_statements.track')")),
  );
  const sections: string[] = [];
  const subjects: Array<[string, () => Promise<(key: string) => Promise<boolean>>, () => Promise<void>]> = [];
  const store = new PostgresStore({ pool, schema: 'profile' });
  const limiter = createLimiter({
    store,
    rules: [{ name: 'p', key: 'ip', limit: 1e9, window: { type: 'fixed', size: '1h' } }],
    storeTimeout: '60s',
  });
  subjects.push([
    'ratekeeper PostgresStore',
    async () => async (key) => (await limiter.consume('p', key)).allowed,
    () => limiter.close(),
  ]);
  const sliding = createLimiter({
    store: new PostgresStore({ pool, schema: 'profile' }),
    rules: [
      {
        name: 'pl',
        key: 'ip',
        limit: 1e9,
        window: { type: 'sliding', size: '1h' },
      },
    ],
    storeTimeout: '60s',
  });
  subjects.push([
    'ratekeeper PostgresStore, sliding window (check.sql)',
    async () => async (key) => (await sliding.consume('pl', key)).allowed,
    () => sliding.close(),
  ]);
  subjects.push([
    'rate-limiter-flexible RateLimiterPostgres',
    async () => {
      const limiter = await new Promise<RateLimiterPostgres>((resolve, reject) => {
        const made: RateLimiterPostgres = new RateLimiterPostgres(
          { storeClient: pool, storeType: 'pool', tableName: 'rlflx_profile', points: 1e9, duration: 3600 },
          (error?: Error) => (error ? reject(error) : resolve(made)),
        );
      });
      return (key) => flexible(() => limiter.consume(key));
    },
    async () => {},
  ]);
  try {
    for (const [name, make, close] of subjects) {
      const decide = await make();
      const keys = Array.from({ length: PROFILE_DECISIONS }, (_, i) => `profile.${i}`);
      // Warm-up on other keys: plans cached, tables made.
      await runLoad(decide, {
        concurrency: 64,
        keys: keys.map((k) => `w${k}`),
        maxOps: 2000,
        maxMs: 60_000,
        stallTimeoutMs: 60_000,
      });
      await pool.query('SELECT pg_stat_statements_reset(), pg_stat_reset()');
      await runLoad(decide, {
        concurrency: 64,
        keys,
        maxOps: PROFILE_DECISIONS,
        maxMs: 600_000,
        stallTimeoutMs: 60_000,
      });
      await close();
      // Function statistics reach the views when a backend's transaction ends, within a second.
      await new Promise((resolve) => setTimeout(resolve, 1500));
      sections.push(await profileTables(pool, name));
      log(`  profiled ${name}`);
    }
    sections.push(await timePieces(pool));
  } finally {
    await pool.end();
  }
  return [
    '### Where the time goes (pg_stat_statements, track_functions)',
    '',
    `After the rounds, the server restarted with pg_stat_statements (pg_stat_statements.track = all: the statements a ` +
      `function runs are counted too) and track_functions = all; ${PROFILE_DECISIONS.toLocaleString('en-US')} decisions of each ` +
      'PostgreSQL subject at 64 in flight on fresh keys (every one a new row), after a warm-up. Times are execution times ' +
      'inside the server per decision (µs): a top-level statement includes what it runs; "self" time of a function ' +
      'excludes the functions it calls. Planning and the protocol (parse, bind, sending rows) are not in them.',
    '',
    ...sections,
  ].join('\n');
}

async function profileTables(pool: import('pg').Pool, name: string): Promise<string> {
  const statements = await pool.query(
    `SELECT toplevel, calls::float8, total_exec_time::float8 AS ms, query FROM pg_stat_statements
       WHERE query NOT ILIKE '%pg_stat%' AND calls >= $1 ORDER BY toplevel DESC, total_exec_time DESC LIMIT 12`,
    // A batched statement serves many decisions per call: listed from a call per 200 decisions.
    [PROFILE_DECISIONS / 200],
  );
  const functions = await pool.query(
    `SELECT funcname, calls::float8, total_time::float8 AS total_ms, self_time::float8 AS self_ms
       FROM pg_stat_user_functions WHERE calls > 0 AND funcname NOT LIKE 'pg_stat%' ORDER BY self_time DESC LIMIT 12`,
  );
  const per = (value: number) => (value / PROFILE_DECISIONS).toFixed(2);
  const perUs = (ms: number) => ((ms * 1000) / PROFILE_DECISIONS).toFixed(1);
  const parts = [
    markdownTable({
      title: `${name}: statements`,
      columns: ['level', 'calls / decision', 'µs / decision', 'statement'],
      rows: (statements.rows as Array<{ toplevel: boolean; calls: number; ms: number; query: string }>).map(
        (r) => [
          r.toplevel ? 'top' : 'nested',
          per(r.calls),
          perUs(r.ms),
          `\`${r.query.replace(/\s+/g, ' ').slice(0, 110)}\``,
        ],
      ),
    }),
  ];
  if (functions.rows.length > 0) {
    parts.push(
      '',
      markdownTable({
        title: `${name}: functions`,
        columns: ['function', 'calls / decision', 'total µs / decision', 'self µs / decision'],
        rows: (
          functions.rows as Array<{ funcname: string; calls: number; total_ms: number; self_ms: number }>
        ).map((r) => [r.funcname, per(r.calls), perUs(r.total_ms), perUs(r.self_ms)]),
      }),
    );
  }
  return `${parts.join('\n')}\n`;
}

/** Parts of a one-rule fixed-window check, each run alone N times in a server-side loop (DO), µs each. */
const PIECES: Array<[string, string, string]> = [
  [
    '9 array_fill (the per-op arrays)',
    'a boolean[]; b bigint[];',
    `${'a := array_fill(false, ARRAY[1]); '.repeat(6)}${'b := array_fill(0::bigint, ARRAY[1]); '.repeat(3)}`,
  ],
  ['sha256 of the key', 'h bytea;', `h := sha256(convert_to('k' || i, 'UTF8'));`],
  [
    'op_at: the op read into its composite type',
    'o "profile"."rk_op";',
    'o := "profile"."rk_op_at"(nums, 1);',
  ],
  [
    'the overrides look-up (no override)',
    "l bigint; h bytea := sha256('k');",
    `SELECT x.lim INTO l FROM "profile"."rk_overrides" x WHERE x.rule = 'p' AND x.key_hash = h AND (x.until_ms IS NULL OR x.until_ms > 5);`,
  ],
  [
    'the lock-order query (unnest ... ORDER BY), one op (check.sql runs it for 2+ ops only)',
    "r text[] := ARRAY['p']; hs bytea[] := ARRAY['\\x00'::bytea]; j integer;",
    'FOR j IN SELECT u.ord::integer FROM unnest(r, hs) WITH ORDINALITY AS u(rule, kh, ord) ORDER BY u.rule COLLATE "C", u.kh LOOP NULL; END LOOP;',
  ],
  [
    'evaluate (fixed): 3 nested PL/pgSQL calls',
    'o "profile"."rk_op"; v "profile"."rk_verdict"; st "profile"."rk_state";',
    'o := "profile"."rk_op_at"(nums, 1); v := "profile"."rk_evaluate"(st, o, 1000, false);',
  ],
  [
    'apply + expires_at: 3 nested PL/pgSQL calls',
    'o "profile"."rk_op"; st "profile"."rk_state"; e bigint;',
    'o := "profile"."rk_op_at"(nums, 1); st := "profile"."rk_apply"(st, o, 1000); e := "profile"."rk_expires_at"(st, o);',
  ],
  [
    'the whole check, a new key each time',
    '',
    `PERFORM "profile"."rk_check"('check', NULL, ARRAY['p'], ARRAY[convert_to('piece' || i, 'UTF8')], nums);`,
  ],
  [
    'the whole check, the same keys again',
    '',
    `PERFORM "profile"."rk_check"('check', NULL, ARRAY['p'], ARRAY[convert_to('piece' || i, 'UTF8')], nums);`,
  ],
  [
    "rate-limiter-flexible's upsert, a new key each time",
    '',
    `INSERT INTO "rlflx_profile" VALUES ('piece' || i, 1, 5) ON CONFLICT(key) DO UPDATE SET points = CASE WHEN "rlflx_profile".expire <= 3 THEN 1 ELSE "rlflx_profile".points + 1 END, expire = CASE WHEN "rlflx_profile".expire <= 3 THEN 5 ELSE "rlflx_profile".expire END;`,
  ],
];
const PIECE_RUNS = 3000;

async function timePieces(pool: import('pg').Pool): Promise<string> {
  const rows: string[][] = [];
  const client = await pool.connect();
  try {
    for (const [label, declare, body] of PIECES) {
      let heard = '';
      const hear = (message: { message?: string | undefined }) => {
        heard = message.message ?? '';
      };
      client.on('notice', hear);
      await client.query(`DO $$ DECLARE nums float8[] := '{1,3600000,0,0,1,1000000000,0,0,0,0,0,0,0}'; t0 timestamptz; ${declare}
        BEGIN t0 := clock_timestamp();
        FOR i IN 1..${PIECE_RUNS} LOOP ${body} END LOOP;
        RAISE NOTICE '%', round((extract(epoch FROM clock_timestamp() - t0) * 1e6 / ${PIECE_RUNS})::numeric, 1); END $$`);
      client.removeListener('notice', hear);
      rows.push([label, heard]);
    }
  } finally {
    client.release();
  }
  return markdownTable({
    title: `The check function's parts, each alone in a server-side loop of ${PIECE_RUNS.toLocaleString('en-US')} (DO block, one transaction)`,
    columns: ['part (one rule, fixed window)', 'µs each (wall clock)'],
    rows,
  });
}
