// The batched statement of the common request (sql/check-batch.sql) against check.sql, on a real PostgreSQL: the same
// answers and the same rows from random states, overrides and locks; decisions batched under load, exact, and no
// deadlock against check.sql's requests of several rules sharing the keys.
import { expect } from 'chai';
import fc from 'fast-check';
import type pg from 'pg';
import { createLimiter, type Limiter, PostgresStore, type Rule } from '../../../src/index.js';
import { postgresNames, schemaSql, statementSql } from '../../../src/stores/postgres/sql.js';
import { getPostgres } from '../../support/postgres.js';
import { PATIENT } from '../../support/settle.js';

/** A time far from 0, so that rows before and after it are plain numbers. */
const NOW = 1_800_000_000_000;
const SEED = 20261128;
const RUNS = 200;

const names = postgresNames('rk_batch_parity', 'p_');
const q = (name: string) => names.qualified(name);

interface Row {
  amount: number | null;
  timeMs: number | null;
  expires: number | null;
  lockUntil: number | null;
  level: number | null;
  forget: number | null;
}
interface KeyCase {
  row: Row | undefined;
  override: { lim: number; until: number | null } | undefined;
}
interface BatchCase {
  type: 1 | 2;
  sizeMs: number;
  cost: number;
  lim: number;
  periodEnd: number;
  /** check.sql's lockout numbers: duration (0: none), escalate, max duration, forget after; and dry run. */
  lockout: [number, number, number, number];
  dryRun: boolean;
  keys: KeyCase[];
}

const offset = fc.integer({ min: -6000, max: 6000 });
const rowArb: fc.Arbitrary<Row> = fc
  .record({
    state: fc.option(fc.record({ a: fc.integer({ min: 1, max: 12 }), b: offset }), { nil: undefined }),
    lock: fc.option(
      fc.record({
        until: offset,
        level: fc.integer({ min: 1, max: 3 }),
        forget: fc.integer({ min: -3000, max: 6000 }),
      }),
      { nil: undefined },
    ),
  })
  .map(({ state, lock }) => ({
    amount: state ? state.a : null,
    timeMs: state ? NOW + state.b : null,
    expires: state ? NOW + state.b : null,
    lockUntil: lock ? NOW + lock.until : null,
    level: lock ? lock.level : null,
    forget: lock ? NOW + lock.until + lock.forget : null,
  }));
const caseArb: fc.Arbitrary<BatchCase> = fc.record({
  type: fc.constantFrom(1 as const, 2 as const),
  sizeMs: fc.integer({ min: 1000, max: 6000 }),
  cost: fc.integer({ min: 1, max: 4 }),
  lim: fc.integer({ min: 0, max: 10 }),
  periodEnd: fc.integer({ min: -3000, max: 3000 }),
  lockout: fc.oneof(
    fc.constant<[number, number, number, number]>([0, 1, 0, 0]),
    fc.tuple(
      fc.integer({ min: 1000, max: 5000 }),
      fc.constantFrom(1, 2),
      fc.constantFrom(0, 8000),
      fc.integer({ min: 0, max: 5000 }),
    ),
  ),
  dryRun: fc.boolean(),
  keys: fc.array(
    fc.record({
      row: fc.option(rowArb, { nil: undefined }),
      override: fc.option(
        fc.record({
          lim: fc.integer({ min: 0, max: 10 }),
          until: fc.option(
            offset.map((d) => NOW + d),
            { nil: null },
          ),
        }),
        { nil: undefined },
      ),
    }),
    { minLength: 1, maxLength: 4 },
  ),
});

/** check.sql's 13 numbers of the case's op (postgres/protocol.ts opArrays). */
function numsOf(c: BatchCase): number[] {
  const periodEnd = c.type === 2 ? NOW + c.periodEnd : 0;
  const next = c.type === 2 ? periodEnd + c.sizeMs : 0;
  return [c.type, c.sizeMs, 0, 0, c.cost, c.lim, periodEnd, next, ...c.lockout, c.dryRun ? 1 : 0];
}

async function seed(pool: pg.Pool, rule: string, c: BatchCase): Promise<void> {
  for (const [i, k] of c.keys.entries()) {
    const key = Buffer.from(`k${i}`);
    if (k.row) {
      const r = k.row;
      await pool.query(
        `INSERT INTO ${q('keys')} (rule, key_hash, key, amount, time_ms, expires_ms, lock_until, lock_level, forget_ms)
           VALUES ($1, sha256($2), $2, $3, $4, $5, $6, $7, $8)`,
        [rule, key, r.amount, r.timeMs, r.expires, r.lockUntil, r.level, r.forget],
      );
    }
    if (k.override) {
      await pool.query(
        `INSERT INTO ${q('overrides')} (rule, key_hash, key, lim, until_ms) VALUES ($1, sha256($2), $2, $3, $4)`,
        [rule, key, k.override.lim, k.override.until],
      );
    }
  }
}

async function rows(pool: pg.Pool, rule: string): Promise<unknown[]> {
  const { rows: found } = await pool.query(
    `SELECT key, amount, time_ms, pairs, expires_ms, lock_until, lock_level, forget_ms FROM ${q('keys')}
       WHERE rule = $1 ORDER BY key`,
    [rule],
  );
  return found;
}

describe('PostgreSQL batched check (sql/check-batch.sql)', function () {
  this.timeout(300_000);
  let pool: pg.Pool;
  before(async () => {
    pool = (await getPostgres()).pool({ max: 4 });
    await pool.query(schemaSql(names));
  });
  after(() => pool.end());

  it(`answers and writes as check.sql does, op by op: ${RUNS} random batches of states, locks, lockouts and overrides`, async () => {
    const batch = statementSql(names, 'check-batch');
    await fc.assert(
      fc.asyncProperty(caseArb, async (c) => {
        await pool.query(`DELETE FROM ${q('keys')}; DELETE FROM ${q('overrides')}`);
        await seed(pool, 'A', c);
        await seed(pool, 'B', c);
        const nums = numsOf(c);
        const keys = c.keys.map((_, i) => Buffer.from(`k${i}`));
        const { rows: out } = await pool.query({
          text: batch,
          values: [NOW, 'A', keys, nums],
          rowMode: 'array',
        });
        const batched = (out[0] as unknown[])[0] as number[][];
        const general: number[][] = [];
        for (const key of keys) {
          const { rows: one } = await pool.query({
            text: `SELECT ${q('check')}('check', $1, ARRAY[$2::text], ARRAY[$3::bytea], $4)`,
            values: [NOW, 'B', key, nums],
            rowMode: 'array',
          });
          general.push((one[0] as unknown[])[0] as number[]);
        }
        expect(batched, JSON.stringify(c)).to.deep.equal(general);
        expect(await rows(pool, 'A'), JSON.stringify(c)).to.deep.equal(await rows(pool, 'B'));
      }),
      // A fixed seed, and a bounded shrink: a failure is reproducible and does not hold the pool for long.
      { numRuns: RUNS, seed: SEED, endOnFailure: true },
    );
  });

  describe('through the store', () => {
    const limiters: Limiter[] = [];
    const pools: pg.Pool[] = [];
    let schemas = 0;
    const schema = `rkb_${process.pid}`;
    function limiterOn(rules: Rule[], max: number, onQuery?: () => void): Limiter {
      const l = createLimiter({
        store: new PostgresStore({ pool: wrap(max, onQuery), schema, tablePrefix: `t${schemas}_` }),
        rules,
        ...PATIENT,
      });
      limiters.push(l);
      return l;
    }
    let server: Awaited<ReturnType<typeof getPostgres>>;
    before(async () => {
      server = await getPostgres();
    });
    function wrap(max: number, onQuery?: () => void): pg.Pool {
      const p = server.pool({ max });
      pools.push(p);
      if (onQuery === undefined) return p;
      const connect = p.connect.bind(p);
      p.connect = (async () => {
        const client = await connect();
        return new Proxy(client, {
          get(target, prop) {
            if (prop !== 'query') return Reflect.get(target, prop, target);
            return (...args: unknown[]) => {
              onQuery();
              return (target.query as (...a: unknown[]) => unknown)(...args);
            };
          },
        });
      }) as pg.Pool['connect'];
      return p;
    }
    afterEach(async () => {
      await Promise.all(limiters.splice(0).map((l) => l.close()));
      await Promise.all(pools.splice(0).map((p) => p.end()));
      schemas++;
    });

    const rule = (name: string, limit: number): Rule => ({
      name,
      key: 'ip',
      limit,
      window: { type: 'fixed', size: '1h' },
    });

    it('a busy pool decides many requests per statement, a key once per statement, exactly', async () => {
      let queries = 0;
      const l = limiterOn([rule('api', 10)], 2, () => queries++);
      await l.consume('api', 'warm');
      queries = 0;
      const distinct = await Promise.all(Array.from({ length: 60 }, (_, i) => l.consume('api', `d${i}`)));
      expect(distinct.every((r) => r.allowed)).to.equal(true);
      expect(queries).to.be.below(60);
      const same = await Promise.all(Array.from({ length: 30 }, () => l.consume('api', 'same')));
      expect(same.filter((r) => r.allowed)).to.have.length(10);
      expect(same.filter((r) => !r.allowed).every((r) => r.remaining === 0)).to.equal(true);
    });

    it('batches and requests of two rules on the same keys, from two processes: exact, no deadlock', async () => {
      const one = rule('one', 10);
      const two = rule('two', 1_000_000);
      const tablePrefix = `t${schemas}_`;
      const make = (max: number) => {
        const l = createLimiter({
          store: new PostgresStore({ pool: wrap(max), schema, tablePrefix }),
          rules: [one, two],
          ...PATIENT,
        });
        limiters.push(l);
        return l;
      };
      const [a, b] = [make(3), make(3)];
      const keys = Array.from({ length: 12 }, (_, i) => `10.0.0.${i}`);
      const calls: Array<Promise<boolean>> = [];
      for (let round = 0; round < 30; round++) {
        for (const [i, ip] of keys.entries()) {
          const limiter = (round + i) % 2 === 0 ? a : b;
          calls.push(
            round % 3 === 0
              ? limiter.check({ method: 'GET', path: '/', ip, headers: {} }).then((r) => r.allowed)
              : limiter.consume('one', ip).then((r) => r.allowed),
          );
        }
      }
      const allowed = await Promise.all(calls);
      expect(allowed.filter(Boolean)).to.have.length(keys.length * 10);
    });

    it('sliding, token bucket and GCRA requests share statements (check-many.sql): exact, no deadlock with requests of several rules', async () => {
      const sliding: Rule = { name: 's', key: 'ip', limit: 10, window: { type: 'sliding', size: '1h' } };
      const bucket: Rule = {
        name: 't',
        key: 'ip',
        limit: 1000,
        window: { type: 'token-bucket', size: '1h' },
      };
      const gcra: Rule = { name: 'g', key: 'ip', limit: 1000, window: { type: 'gcra', size: '1h' } };
      const tablePrefix = `t${schemas}_`;
      let queries = 0;
      const make = () => {
        const l = createLimiter({
          store: new PostgresStore({ pool: wrap(2, () => queries++), schema, tablePrefix }),
          rules: [sliding, bucket, gcra],
          ...PATIENT,
        });
        limiters.push(l);
        return l;
      };
      const [a, b] = [make(), make()];
      await a.consume('s', 'warm');
      await b.consume('s', 'warm');
      queries = 0;
      const keys = Array.from({ length: 12 }, (_, i) => `10.0.1.${i}`);
      const calls: Array<Promise<boolean>> = [];
      const others: Array<Promise<unknown>> = [];
      let singles = 0;
      for (let round = 0; round < 30; round++) {
        for (const [i, ip] of keys.entries()) {
          const limiter = (round + i) % 2 === 0 ? a : b;
          if (round % 3 === 0) {
            calls.push(limiter.check({ method: 'GET', path: '/', ip, headers: {} }).then((r) => r.allowed));
          } else {
            singles += 3;
            calls.push(limiter.consume('s', ip).then((r) => r.allowed));
            others.push(limiter.consume(round % 2 === 0 ? 't' : 'g', ip));
            others.push(limiter.consume(round % 2 === 0 ? 'g' : 't', ip));
          }
        }
      }
      const allowed = await Promise.all(calls);
      await Promise.all(others);
      expect(allowed.filter(Boolean)).to.have.length(keys.length * 10);
      // One statement served several of the one-rule requests.
      expect(queries).to.be.below(singles);
    });
  });
});
