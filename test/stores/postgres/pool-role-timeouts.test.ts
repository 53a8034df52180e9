// PostgresStore under the timeouts teams put on an application role (lock_timeout, statement_timeout) and on their
// pool (connectionTimeoutMillis): a decision that waits on a hot row or for a busy pool is the store's own, never the policy's.
import { randomBytes } from 'node:crypto';
import { expect } from 'chai';
import type pg from 'pg';
import {
  createLimiter,
  type Decision,
  type DecisionSource,
  type LimiterOptions,
  PostgresStore,
  type Rule,
} from '../../../src/index.js';
import { literal } from '../../../src/stores/postgres/pool.js';
import { type PostgresServer, startPostgres } from '../../support/postgres.js';
import { PATIENT, until } from '../../support/settle.js';
import { identitySuite } from '../conformance/identities.js';
import { overrideSuite } from '../conformance/overrides.js';
import { conformanceSuite, type StoreUnderTest } from '../conformance/suite.js';

const LIMIT = 5;
const rule: Rule = { name: 'api', key: 'ip', limit: LIMIT, window: { type: 'fixed', size: '1h' } };

/** One server for the file: role `app` (lock_timeout 25 ms, statement_timeout 40 ms) and role `cut` (both 1 ms). */
let server: PostgresServer;
let admin: pg.Pool;
before(async function () {
  this.timeout(120_000);
  server = await startPostgres();
  admin = server.pool({ max: 2 });
  for (const [role, lock, statement] of [
    ['app', '25ms', '40ms'],
    ['cut', '1ms', '1ms'],
  ]) {
    await admin.query(`CREATE ROLE ${role} LOGIN`);
    await admin.query(`GRANT CREATE ON DATABASE postgres TO ${role}`);
    await admin.query(`ALTER ROLE ${role} SET lock_timeout = '${lock}'`);
    await admin.query(`ALTER ROLE ${role} SET statement_timeout = '${statement}'`);
  }
});
after(() => server?.stop());

/**
 * Holds the row of `key` (rule 'api') in `schema` while `decide` runs, until the server says the
 * decision's backend (application_name `app`) has waited on it for 300 ms, far past any role timeout
 * here, or the decision was answered (a timeout cut it).
 */
async function decideBehindHeldRow(schema: string, app: string, decide: () => Promise<Decision>) {
  const holder = await admin.connect();
  let decided = false;
  let decision: Promise<Decision> | undefined;
  try {
    await holder.query('BEGIN');
    await holder.query(`SELECT 1 FROM "${schema}".rk_keys FOR UPDATE`);
    decision = decide();
    decision.then(
      () => {
        decided = true;
      },
      () => {
        decided = true;
      },
    );
    await until('the decision waits on the row lock for 300 ms', async () => {
      const { rows } = await admin.query(
        `SELECT count(*)::int AS n FROM pg_stat_activity WHERE application_name = $1
           AND wait_event_type = 'Lock' AND clock_timestamp() - query_start > interval '300 ms'`,
        [app],
      );
      return decided || rows[0].n > 0;
    });
  } finally {
    await holder.query('COMMIT');
    holder.release();
  }
  return decision;
}

describe('PostgresStore under role and pool timeouts', function () {
  this.timeout(120_000);
  let schemas = 0;
  const cleanups: Array<() => Promise<unknown>> = [];

  afterEach(async () => {
    for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
  });

  function open(poolOptions: pg.PoolConfig, options: Partial<LimiterOptions>) {
    const pool = server.pool(poolOptions);
    const schema = `roles${schemas++}`;
    const limiter = createLimiter({ store: new PostgresStore({ pool, schema }), rules: [rule], ...options });
    const sources: DecisionSource[] = [];
    const errors: string[] = [];
    limiter.observe({ decision: (_d: Decision, info) => sources.push(info.source) });
    limiter.on('storeError', ({ error }) => errors.push(error.message));
    cleanups.push(
      () => pool.end(),
      () => limiter.close(),
    );
    return { pool, schema, limiter, sources, errors };
  }

  it('a decision waiting on a row another transaction holds waits past both timeouts and is decided by the store', async () => {
    const { schema, limiter, sources, errors } = open(
      { user: 'app', application_name: 'rk-roles' },
      { ...PATIENT, storeRetryInterval: '1h' },
    );
    expect((await limiter.consume('api', 'hot')).allowed).to.equal(true);
    const decision = decideBehindHeldRow(schema, 'rk-roles', () => limiter.consume('api', 'hot'));
    const d = await decision;
    expect({ allowed: d?.allowed, sources, errors }).to.deep.equal({
      allowed: true,
      sources: ['store', 'store'],
      errors: [],
    });
    expect((await limiter.status('api', 'hot')).count).to.equal(2);
  });

  it('a pool whose connectionTimeoutMillis passes while the app holds every connection: decisions wait for one and the store decides', async () => {
    const { pool, limiter, sources, errors } = open(
      { max: 2, connectionTimeoutMillis: 100 },
      { ...PATIENT, storeRetryInterval: '1h' },
    );
    for (let i = 0; i < 2; i++) expect((await limiter.consume('api', 'k')).allowed).to.equal(true);
    // The app's own work fills the pool for 2 s, far past the pool's 100 ms wait for a connection.
    const held = [await pool.connect(), await pool.connect()];
    const work = held.map((client) => client.query('SELECT pg_sleep(2)').finally(() => client.release()));
    const decisions = await Promise.all(Array.from({ length: 2 * LIMIT }, () => limiter.consume('api', 'k')));
    await Promise.all(work);
    const admitted = decisions.filter((d) => d.allowed).length;
    expect({ admitted, errors }).to.deep.equal({ admitted: LIMIT - 2, errors: [] });
    expect(sources.every((source) => source === 'store')).to.equal(true);
    expect((await limiter.status('api', 'k')).count).to.equal(LIMIT);
  });
});

describe('PostgresStore setting its own timeouts: the conformance suite on a role whose lock_timeout and statement_timeout are 1 ms', function () {
  this.timeout(120_000);
  let pool: pg.Pool;
  before(async () => {
    pool = server.pool({ user: 'cut', max: 20, application_name: 'rk-cut' });
    // A decision behind a held row is cut by the role's lock_timeout: from then on every call of every
    // store on this pool sets its own settings, so the suite runs on that path.
    const limiter = createLimiter({
      store: new PostgresStore({ pool, schema: 'cut_first' }),
      rules: [rule],
      ...PATIENT,
    });
    expect((await limiter.consume('api', 'hot')).allowed).to.equal(true);
    const d = await decideBehindHeldRow('cut_first', 'rk-cut', () => limiter.consume('api', 'hot'));
    expect(d?.allowed).to.equal(true);
    await limiter.close();
  });
  after(async () => {
    // The calls ran as the store's own prepared statements (SQL PREPARE): the path under test.
    const client = await pool.connect();
    try {
      // This connection's own session lifts the role's 1 ms timeout (the SET itself may be cut: again).
      for (let cut = true; cut; ) {
        cut = await client.query('SET statement_timeout = 0').then(
          () => false,
          (error: { code?: string }) => {
            if (error.code !== '57014') throw error;
            return true;
          },
        );
      }
      const { rows } = await client.query(
        "SELECT count(*)::int AS n FROM pg_prepared_statements WHERE from_sql AND name LIKE 'rk\\_%'",
      );
      expect(rows[0].n).to.be.above(0);
    } finally {
      client.release();
    }
    await pool.end();
  });
  const target: StoreUnderTest = {
    name: 'PostgresStore (own settings)',
    makeStore: (clock) => new PostgresStore({ pool, schema: `cut_${randomBytes(4).toString('hex')}`, clock }),
  };
  conformanceSuite(target);
  overrideSuite(target);
  identitySuite(target);
});

describe('PostgresStore own settings: values written as literals read back as pg sends them', () => {
  const hostile = [
    "it's",
    'back\\slash',
    'say "hi"',
    '{a,b}',
    'NULL',
    '',
    ' spaced ',
    'ünï €',
    "\\'; DROP TABLE x; --",
  ];

  it('text, text[], bytea[], float8[], bigint and NULL', async () => {
    const bytes = Buffer.from(Array.from({ length: 256 }, (_, i) => i));
    const numbers = [1.5, 0.25, 1e21, 2 ** 53, Number.POSITIVE_INFINITY, -3];
    const { rows } = await admin.query({
      text: `SELECT ${literal(hostile[0])}::text AS one, ${literal(hostile)}::text[] AS texts,
        ${literal([bytes, Buffer.alloc(0)])}::bytea[] AS bytes, ${literal(numbers)}::float8[] AS numbers,
        ${literal(1796653244364)}::bigint AS big, ${literal(null)}::bigint AS none,
        ${literal([hostile[1], null])}::text[] AS with_null`,
    });
    expect(rows[0]).to.deep.equal({
      one: hostile[0],
      texts: hostile,
      bytes: [bytes, Buffer.alloc(0)],
      numbers,
      big: '1796653244364',
      none: null,
      with_null: [hostile[1], null],
    });
  });

  it('text holding NUL is refused before anything is sent', () => {
    expect(() => literal('a\u0000b')).to.throw('cannot hold NUL');
    expect(() => literal(['a\u0000b'])).to.throw('cannot hold NUL');
  });
});
