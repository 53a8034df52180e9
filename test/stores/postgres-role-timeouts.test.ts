// PostgresStore under the timeouts teams put on an application role (lock_timeout, statement_timeout) and on their
// pool (connectionTimeoutMillis): a decision that waits on a hot row or for a busy pool is the store's own, never the policy's.
import { expect } from 'chai';
import type pg from 'pg';
import {
  createLimiter,
  type Decision,
  type DecisionSource,
  type LimiterOptions,
  PostgresStore,
  type Rule,
} from '../../src/index.js';
import { type PostgresServer, startPostgres } from '../support/postgres.js';
import { PATIENT, until } from '../support/settle.js';

const LIMIT = 5;
const rule: Rule = { name: 'api', key: 'ip', limit: LIMIT, window: { type: 'fixed', size: '1h' } };

describe('PostgresStore under role and pool timeouts', function () {
  this.timeout(120_000);
  let server: PostgresServer;
  let admin: pg.Pool;
  let schemas = 0;
  const cleanups: Array<() => Promise<unknown>> = [];

  before(async () => {
    server = await startPostgres();
    admin = server.pool({ max: 2 });
    await admin.query('CREATE ROLE app LOGIN');
    await admin.query('GRANT CREATE ON DATABASE postgres TO app');
    await admin.query(`ALTER ROLE app SET lock_timeout = '25ms'`);
    await admin.query(`ALTER ROLE app SET statement_timeout = '40ms'`);
  });
  afterEach(async () => {
    for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
  });
  after(() => server?.stop());

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
    const holder = await admin.connect();
    let decided = false;
    let decision: Promise<Decision> | undefined;
    try {
      await holder.query('BEGIN');
      await holder.query(`SELECT 1 FROM "${schema}".rk_keys FOR UPDATE`);
      decision = limiter.consume('api', 'hot');
      decision.then(() => {
        decided = true;
      });
      // The server's own clock says the decision has waited on the lock far beyond 25 ms and 40 ms
      // (or, where a timeout cut it, the decision is already answered).
      await until('the decision waits on the row lock for 300 ms', async () => {
        const { rows } = await admin.query(
          `SELECT count(*)::int AS n FROM pg_stat_activity WHERE application_name = 'rk-roles'
             AND wait_event_type = 'Lock' AND clock_timestamp() - query_start > interval '300 ms'`,
        );
        return decided || rows[0].n > 0;
      });
    } finally {
      await holder.query('COMMIT');
      holder.release();
    }
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
