// PostgresStore on a real PostgreSQL: options, hostile names, tenants, one call per decision, the schema's
// installation and version, the sweep, and resets heard by every process's deny cache (LISTEN/NOTIFY).
import { expect } from 'chai';
import type pg from 'pg';
import {
  createLimiter,
  type Limiter,
  PostgresStore,
  type PostgresStoreOptions,
  RateLimitConfigError,
  type Rule,
  type StoreRule,
} from '../../../src/index.js';
import { postgresNames, SCHEMA_VERSION, schemaSql } from '../../../src/stores/postgres/sql.js';
import { getPostgres, type PostgresServer } from '../../support/postgres.js';
import { PATIENT, until } from '../../support/settle.js';
import { fakeClock } from '../conformance/suite.js';

const api = (limit: number, window: Rule['window'] = { type: 'fixed', size: '1m' }): Rule => ({
  name: 'api',
  key: 'ip',
  limit,
  window,
});
const req = (ip = '10.0.0.1') => ({ method: 'GET', path: '/', ip, headers: {} });
const UNKNOWN = 'ERR_UNKNOWN_FIELD';
/** A sweep interval no test reaches: the test sweeps by hand. */
const MANUAL = 2 ** 31 - 1;
/** What `locked` needs of a rule. */
const ruleNamed = (name: string) => ({ name }) as StoreRule;

/** A pool that counts the queries its clients send. */
function counting(pool: pg.Pool): { pool: pg.Pool; queries: () => number } {
  let queries = 0;
  const wrapped = Object.create(pool) as pg.Pool;
  wrapped.connect = (async () => {
    const client = await pool.connect();
    return new Proxy(client, {
      get(target, prop) {
        if (prop !== 'query') return Reflect.get(target, prop, target);
        return (...args: unknown[]) => {
          queries++;
          return (target.query as (...a: unknown[]) => unknown)(...args);
        };
      },
    });
  }) as pg.Pool['connect'];
  return { pool: wrapped, queries: () => queries };
}

describe('PostgresStore', function () {
  this.timeout(120_000);
  let server: PostgresServer;
  let pool: pg.Pool;
  let schemas = 0;
  const limiters: Limiter[] = [];
  const schema = () => `rks_${process.pid}_${schemas++}`;

  function limiter(rules: Rule[], options: Partial<PostgresStoreOptions> = {}, extra = {}): Limiter {
    const store = new PostgresStore({ pool, schema: schema(), ...options });
    const l = createLimiter({ store, rules, ...PATIENT, ...extra });
    limiters.push(l);
    return l;
  }

  before(async () => {
    server = await getPostgres();
    pool = server.pool({ max: 10 });
  });
  afterEach(async () => {
    await Promise.all(limiters.splice(0).map((l) => l.close()));
  });
  after(() => pool.end());

  describe('options', () => {
    const refused = (options: unknown, message: RegExp, code = 'ERR_OPTION') => {
      expect(() => new PostgresStore(options as PostgresStoreOptions))
        .to.throw(RateLimitConfigError, message)
        .with.property('code', code);
    };

    it('refuses a misspelt field, naming the field meant', () => {
      refused(
        { pool, tableprefix: 'x_' },
        /unknown field 'tableprefix'.*did you mean 'tablePrefix'/,
        UNKNOWN,
      );
      refused({ pool, Schema: 'x' }, /unknown field 'Schema'.*did you mean 'schema'/, UNKNOWN);
    });

    it('refuses a pool that is not a pg Pool, an empty schema, NUL, names PostgreSQL would cut, a bad interval', () => {
      refused({ pool: 'postgres://localhost' }, /pool must be a pg Pool/);
      refused({}, /pool must be a pg Pool/);
      refused({ pool, schema: '' }, /schema must be a non-empty string/);
      refused({ pool, schema: 'a\0b' }, /without NUL/);
      refused({ pool, schema: 'x'.repeat(64) }, /at most 63 bytes/);
      refused({ pool, tablePrefix: 'é'.repeat(21) }, /tablePrefix must be a string of at most 40 bytes/);
      refused({ pool, tablePrefix: 7 }, /tablePrefix must be a string/);
      refused({ pool, sweepIntervalMs: 0 }, /sweepIntervalMs must be an integer from 1 to 2147483647/);
      refused({ pool, clock: 5 }, /clock must be a function/);
      refused({ pool, statementsInFlight: 0 }, /statementsInFlight must be an integer from 1/);
    });
  });

  describe('names', () => {
    it('a hostile schema and prefix are names, never SQL: the store works and nothing else is touched', async () => {
      await pool.query('CREATE TABLE IF NOT EXISTS public.sentinel (x int)');
      const hostileSchema = `x"; DROP TABLE public.sentinel; --\nDROP TABLE sentinel; $$`;
      const hostilePrefix = `p$rk$'; DROP TABLE public.sentinel; --\n`;
      const l = limiter([api(3)], { schema: hostileSchema, tablePrefix: hostilePrefix });
      const allowed = [];
      for (let i = 0; i < 4; i++) allowed.push((await l.check(req())).allowed);
      expect(allowed).to.deep.equal([true, true, true, false]);
      const { rows: found } = await pool.query(
        'SELECT c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = $1 AND c.relkind = $2 ORDER BY 1',
        [hostileSchema, 'r'],
      );
      expect(found.map((r) => r.relname)).to.deep.equal(
        ['keys', 'overrides', 'schema_version'].map((name) => hostilePrefix + name),
      );
      expect((await pool.query('SELECT count(*)::int AS n FROM public.sentinel')).rows[0].n).to.equal(0);
    });

    it('the SQL for a hostile name runs as it is printed, making only that schema', async () => {
      const names = postgresNames(`y\n"; DROP TABLE public.sentinel; --`, 't_');
      await pool.query(schemaSql(names));
      await pool.query(schemaSql(names));
      expect((await pool.query('SELECT count(*)::int AS n FROM public.sentinel')).rows[0].n).to.equal(0);
      const { rows } = await pool.query(`SELECT version FROM ${names.qualified('schema_version')}`);
      expect(rows).to.deep.equal([{ version: SCHEMA_VERSION }]);
    });

    it('tenants of one database keep their own counts: another prefix or schema shares nothing', async () => {
      const shared = schema();
      const a = limiter([api(2)], { schema: shared, tablePrefix: 'a_' });
      const b = limiter([api(2)], { schema: shared, tablePrefix: 'b_' });
      const c = limiter([api(2)]);
      for (let i = 0; i < 3; i++) await a.check(req());
      expect((await a.check(req())).allowed).to.equal(false);
      expect((await b.check(req())).allowed).to.equal(true);
      expect((await c.check(req())).allowed).to.equal(true);
      await b.reset('api', '10.0.0.1');
      expect((await a.check(req())).allowed).to.equal(false);
    });
  });

  it('decides a request of three rules (a lockout among them) in one query, and a denial in one', async () => {
    const counted = counting(pool);
    const store = new PostgresStore({ pool: counted.pool, schema: schema() });
    const l = createLimiter({
      store,
      ...PATIENT,
      rules: [
        api(100),
        { name: 'burst', key: 'ip', limit: 50, window: { type: 'gcra', size: '1s' } },
        {
          name: 'login',
          key: 'ip',
          limit: 5,
          window: { type: 'sliding-log', size: '5m' },
          lockout: { duration: '15m', escalate: 2 },
        },
      ],
    });
    limiters.push(l);
    await l.check(req('10.9.9.9'));
    const before = counted.queries();
    const decisions = [];
    for (let i = 0; i < 6; i++) decisions.push(await l.check(req()));
    expect(decisions.map((d) => d.allowed)).to.deep.equal([true, true, true, true, true, false]);
    expect(decisions[5]?.locked).to.equal(true);
    expect(counted.queries() - before).to.equal(6);
  });

  describe('schema', () => {
    it('processes starting together on an empty database install it once and all decide', async () => {
      const shared = schema();
      const ls = Array.from({ length: 5 }, () => limiter([api(10)], { schema: shared }));
      const decisions = await Promise.all(ls.flatMap((l) => [l.check(req()), l.check(req())]));
      expect(decisions.filter((d) => d.allowed)).to.have.length(10);
      expect((await ls[0]?.check(req()))?.allowed).to.equal(false);
    });

    it('refuses to run on a newer schema version, saying to upgrade', async () => {
      const shared = schema();
      await limiter([api(1)], { schema: shared }).check(req());
      await pool.query(`UPDATE ${postgresNames(shared, 'rk_').qualified('schema_version')} SET version = 99`);
      const store = new PostgresStore({ pool, schema: shared });
      let error: unknown;
      await store.locked(ruleNamed('api'), 10).catch((e: unknown) => {
        error = e;
      });
      await store.close();
      expect((error as Error).message).to.include(
        `version 99, newer than this release's ${SCHEMA_VERSION}: upgrade ratekeeper`,
      );
    });

    it('upgrades an older version on first use: a schema at version 1 (no concurrency functions) gets them', async () => {
      const shared = schema();
      const names = postgresNames(shared, 'rk_');
      await limiter([api(1)], { schema: shared }).check(req());
      await pool.query(
        `DROP FUNCTION ${names.qualified('renew')}; DROP FUNCTION ${names.qualified('holders')}`,
      );
      await pool.query(`UPDATE ${names.qualified('schema_version')} SET version = 1`);
      const exports: Rule = { name: 'exports', key: 'ip', limit: 1, window: { type: 'concurrency' } };
      const l = limiter([exports], { schema: shared });
      expect((await l.check(req())).allowed).to.equal(true);
      expect((await l.status('exports', '10.0.0.1')).holders).to.have.length(1);
      const { rows } = await pool.query(`SELECT version FROM ${names.qualified('schema_version')}`);
      expect(rows).to.deep.equal([{ version: SCHEMA_VERSION }]);
    });

    it('upgrades a version-2 schema: its columns a, b, xs, kh get their names, and its counts go on', async () => {
      const shared = schema();
      const names = postgresNames(shared, 'rk_');
      const first = limiter([api(3)], { schema: shared });
      await first.check(req());
      await first.check(req());
      await first.close();
      // The schema as version 2 left it: the state and key hash columns under their old names.
      await pool.query(
        `ALTER TABLE ${names.qualified('keys')} RENAME COLUMN key_hash TO kh;
         ALTER TABLE ${names.qualified('keys')} RENAME COLUMN amount TO a;
         ALTER TABLE ${names.qualified('keys')} RENAME COLUMN time_ms TO b;
         ALTER TABLE ${names.qualified('keys')} RENAME COLUMN pairs TO xs;
         ALTER TABLE ${names.qualified('overrides')} RENAME COLUMN key_hash TO kh;
         ALTER TYPE ${names.qualified('state')} RENAME ATTRIBUTE amount TO a;
         ALTER TYPE ${names.qualified('state')} RENAME ATTRIBUTE time_ms TO b;
         ALTER TYPE ${names.qualified('state')} RENAME ATTRIBUTE pairs TO xs;
         UPDATE ${names.qualified('schema_version')} SET version = 2`,
      );
      const upgraded = limiter([api(3)], { schema: shared });
      const decisions = [await upgraded.check(req()), await upgraded.check(req())];
      expect(decisions.map((d) => [d.allowed, d.remaining])).to.deep.equal([
        [true, 0],
        [false, 0],
      ]);
      const { rows } = await pool.query(
        `SELECT a.attname FROM pg_attribute a WHERE a.attrelid = $1::regclass AND a.attnum > 0 AND NOT a.attisdropped
           ORDER BY a.attnum`,
        [names.qualified('keys')],
      );
      expect(rows.map((r: { attname: string }) => r.attname)).to.include.members([
        'key_hash',
        'amount',
        'time_ms',
        'pairs',
      ]);
      const version = await pool.query(`SELECT version FROM ${names.qualified('schema_version')}`);
      expect(version.rows).to.deep.equal([{ version: SCHEMA_VERSION }]);
    });

    it('a role that may not create it is told to apply `npx ratekeeper sql`; applied and granted, it decides', async () => {
      const shared = schema();
      await pool.query('DROP ROLE IF EXISTS rk_app; CREATE ROLE rk_app LOGIN');
      const appPool = server.pool({ user: 'rk_app', max: 2 });
      try {
        const store = new PostgresStore({ pool: appPool, schema: shared });
        let error: unknown;
        await store.locked(ruleNamed('api'), 10).catch((e: unknown) => {
          error = e;
        });
        expect((error as Error).message).to.match(/may not create the rate limit tables/);
        expect((error as Error).message).to.include(
          `npx ratekeeper sql --schema "${shared}" --table-prefix "rk_"`,
        );
        await store.close();
        const names = postgresNames(shared, 'rk_');
        await pool.query(schemaSql(names));
        await pool.query(
          `GRANT USAGE ON SCHEMA "${shared}" TO rk_app; GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA "${shared}" TO rk_app`,
        );
        const l = createLimiter({
          store: new PostgresStore({ pool: appPool, schema: shared }),
          rules: [api(1)],
          ...PATIENT,
        });
        limiters.push(l);
        expect((await l.check(req())).allowed).to.equal(true);
        expect((await l.check(req())).allowed).to.equal(false);
        await l.close();
      } finally {
        await appPool.end();
      }
    });
  });

  it('expired rows never count and the sweep deletes them, a batch at a time, keeping locks until forgotten', async () => {
    const clock = fakeClock();
    const shared = schema();
    const store = new PostgresStore({
      pool,
      schema: shared,
      clock: clock.read,
      sweepBatch: 30,
      sweepIntervalMs: MANUAL,
    });
    const l = createLimiter({
      store,
      ...PATIENT,
      rules: [
        api(1, { type: 'fixed', size: '10s' }),
        {
          ...api(1, { type: 'fixed', size: '10s' }),
          name: 'login',
          lockout: { duration: '1m', forgetAfter: '1h' },
        },
      ],
    });
    limiters.push(l);
    for (let i = 0; i < 50; i++) await l.consume('api', `k${i}`);
    for (let i = 0; i < 2; i++) await l.consume('login', 'bob');
    const table = postgresNames(shared, 'rk_').qualified('keys');
    const rows = async () =>
      (await pool.query(`SELECT count(*)::int AS n FROM ${table}`)).rows[0].n as number;
    expect(await rows()).to.equal(51);
    clock.advance(10_000);
    expect((await l.consume('api', 'k0')).remaining, 'an ended window counts nothing').to.equal(0);
    const swept: number[] = [];
    for (let i = 0; i < 3; i++) swept.push(await store.sweep());
    // 49 ended windows (k0 counts again), in batches of 30; the lock stays.
    expect(swept.reduce((a, b) => a + b, 0)).to.equal(49);
    expect(await rows()).to.equal(2);
    clock.advance(3600_000 + 60_000);
    for (let i = 0; i < 2; i++) await store.sweep();
    expect(await rows()).to.equal(0);
  });

  describe('resets heard by every process (LISTEN/NOTIFY)', () => {
    it('a reset in one process clears the deny cache of another, and a lost LISTEN connection forgets everything', async () => {
      const shared = schema();
      const otherPool = server.pool({ max: 2 });
      try {
        const counted = counting(otherPool);
        const storeA = new PostgresStore({ pool: counted.pool, schema: shared });
        const a = createLimiter({
          store: storeA,
          rules: [api(1, { type: 'fixed', size: '1h' })],
          ...PATIENT,
        });
        const b = limiter([api(1, { type: 'fixed', size: '1h' })], { schema: shared });
        limiters.push(a);
        const heard: string[] = [];
        void storeA.onChange((change, _rule, key) => {
          if (change === 'reset') heard.push(key);
        });
        // Heard once B's announcements reach A: A's LISTEN connection is up.
        const hears = (key: string, times: number) =>
          until(`process A hears the reset of ${key}`, async () => {
            if (heard.filter((k) => k === key).length < times) await b.reset('api', key);
            return heard.filter((k) => k === key).length >= times;
          });
        await hears('probe', 1);
        await a.check(req());
        expect((await a.check(req())).allowed).to.equal(false);
        const queries = counted.queries();
        expect((await a.check(req())).allowed, 'from the deny cache').to.equal(false);
        expect(counted.queries()).to.equal(queries);
        await b.reset('api', '10.0.0.1');
        await until('process A hears the reset', () => heard.includes('10.0.0.1'));
        expect((await a.check(req())).allowed).to.equal(true);
        expect((await a.check(req())).allowed).to.equal(false);
        await pool.query(
          "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE query LIKE 'LISTEN %'",
        );
        await until('process A forgets everything', () => heard.includes(''));
        await hears('probe', 2);
        await a.check(req());
        expect((await a.check(req())).allowed).to.equal(false);
        await b.reset('api', '10.0.0.1');
        await until(
          'process A hears the next reset',
          () => heard.filter((k) => k === '10.0.0.1').length === 2,
        );
        expect((await a.check(req())).allowed).to.equal(true);
      } finally {
        await Promise.all(limiters.splice(0).map((l) => l.close()));
        await otherPool.end();
      }
    });
  });
});
