// Function-level parity of the TypeScript and PL/pgSQL twins of every window algorithm: the parity test's random
// (state, op, time) cases fed to the TypeScript step and to the sql/ functions on a real PostgreSQL, compared field by field.
import { expect } from 'chai';
import fc from 'fast-check';
import type pg from 'pg';
import { WINDOW_TYPES } from '../../../src/algorithms/index.js';
import { TYPE_CODES } from '../../../src/stores/postgres/protocol.js';
import { postgresNames, schemaSql } from '../../../src/stores/postgres/sql.js';
import type { WindowType } from '../../../src/types.js';
import { getPostgres } from '../../support/postgres.js';
import { type Case, cases, type Flat, type StepOutcome, stepTs } from '../parity-cases.js';

/** Cases per window type and step: 7 types x (300 decide + 150 refund) = 3,150 in all (PARITY_RUNS: more). */
const DECIDE_RUNS = Number(process.env.PARITY_RUNS ?? 300);
const REFUND_RUNS = Math.ceil(DECIDE_RUNS / 2);
/**
 * The seed of the random cases: a new one each run, printed with a failure; PARITY_SEED=<seed> replays
 * that run (with the same PARITY_RUNS).
 */
const PARITY_SEED =
  process.env.PARITY_SEED === undefined ? Date.now() % 2 ** 31 : Number(process.env.PARITY_SEED);
/**
 * A bound on each property's run, shrinking included: a failure is reported (shrunk as far as this
 * allowed) instead of holding the pool past the suite.
 */
const TIME_LIMIT_MS = 30_000;

/**
 * Cases that once differed, kept. GCRA: a TAT past 2^53 µs (epoch µs plus a backlog of a long window, or
 * a debt) was exact in PL/pgSQL's bigint but rounded to an even number of µs in TypeScript's and Lua's
 * doubles (tat + step), so the twins drifted apart op by op; the TAT now stops at MAX_TAT_US = 2^53 - 1
 * in all three (and GCRA's bound on max(limit, burst) x size is 2^52 µs, so that only a debt reaches
 * it). The first counterexample's state was itself past 2^53, where this test also sent String(state),
 * another integer than the double (exactText now sends the double's own).
 */
const gcraRule = (sizeMs: number) =>
  ({ name: 'r', type: 'gcra', sizeMs, buckets: 0, burst: 0, lockout: undefined, dryRun: false }) as const;
const REGRESSIONS: Array<[string, 'decide' | 'refund', Case]> = [
  [
    'the first counterexample (seed 1473564904): a TAT past 2^53, denied, counted by the op',
    'decide',
    {
      type: 'gcra',
      rule: gcraRule(13_777_236),
      op: { rule: gcraRule(13_777_236), key: 'k', cost: 38, limit: 17 },
      nowMs: 1_767_232_492_834,
      add: false,
      receipt: 0,
      state: [18_048_978_948_610_530],
    },
  ],
  [
    'a TAT below 2^53 that the op takes past it (exact in bigint, rounded in a double: 9007230050914589)',
    'decide',
    {
      type: 'gcra',
      rule: gcraRule(13_777_236),
      op: { rule: gcraRule(13_777_236), key: 'k', cost: 38, limit: 17 },
      nowMs: 1_767_232_492_834,
      add: true,
      receipt: 0,
      state: [9_007_199_254_740_001],
    },
  ],
  [
    'a TAT at the ceiling, refunded',
    'refund',
    {
      type: 'gcra',
      rule: gcraRule(12_404_901),
      op: { rule: gcraRule(12_404_901), key: 'k', cost: 18, limit: 726_100 },
      nowMs: 1_767_235_599_987,
      add: false,
      receipt: 0,
      state: [Number.MAX_SAFE_INTEGER],
    },
  ],
];

const names = postgresNames('rk_parity', '');
const fn = (name: string) => names.qualified(name);
const OP = (cost: string) =>
  `ROW($5::smallint, $6::bigint, $7::bigint, $8::bigint, ${cost}, $9::bigint, $10::bigint, $11::bigint)::${fn('op')}`;

/**
 * decide: evaluate, then apply when the op costs something; refund: refund_state, then evaluate at cost 0
 * (as stepTs does). The state goes in as its columns (amount, time_ms, pairs), NULL when there is none.
 */
const STEP = `
  WITH i AS (
    SELECT CASE WHEN $1 THEN ROW($2::bigint, $3::bigint, $4::bigint[])::${fn('state')} END AS st,
      ${OP('$12::bigint')} AS op
  ), d AS (
    SELECT st, op,
      CASE WHEN $13 = 'decide' THEN CASE WHEN (op).cost > 0 THEN ${fn('apply')}(st, op, $14) ELSE st END
        WHEN $1 THEN ${fn('refund_state')}(st, op, $14, $16) END AS after,
      CASE WHEN $1 THEN ${fn('expires_at')}(st, op) END AS expires
    FROM i
  )
  SELECT (v).allowed, (v).remaining, (v).reset_ms, (v).retry_ms, (v).count, (v).receipt,
    (after).amount, (after).time_ms, (after).pairs, expires
  FROM (
    SELECT after, expires, CASE WHEN $13 = 'decide' THEN ${fn('evaluate')}(st, op, $14, $15)
      ELSE ${fn('evaluate')}(after, ${OP('0::bigint')}, $14, false) END AS v
    FROM d
  ) AS x`;

/**
 * A number as the exact integer it is: String() writes the shortest decimal that reads back as the same
 * double, which past 2^53 is another integer (String(18048978948610532) is "18048978948610530").
 */
const exactText = (n: number | undefined) => (n === undefined ? null : BigInt(n).toString());

/** A bigint PL/pgSQL answered, as a number: refused when no double holds it (no TypeScript state could). */
function exact(text: string): number {
  const n = Number(text);
  if (BigInt(text) !== BigInt(n)) throw new Error(`PL/pgSQL answered ${text}, which no double holds exactly`);
  return n;
}

/** The state's columns from its flat numbers (see parity-cases.ts toFlat), and back. */
function columns(type: WindowType, flat: Flat): [boolean, string | null, string | null, number[] | null] {
  if (flat.length === 0) return [false, null, null, null];
  // Sliding and sliding-log: time_ms = the size its buckets (entries) count in (0 in the flat: NULL, a row of
  // an earlier release).
  if (type === 'sliding' || type === 'sliding-log')
    return [true, null, flat[0] === 0 ? null : exactText(flat[0]), flat.slice(1)];
  // Concurrency: amount = the last id handed out, pairs = the holders' pairs.
  if (type === 'concurrency') return [true, exactText(flat[0]), null, flat.slice(1)];
  // Token bucket: pairs = ARRAY[the size its tokens are counted in] (0 in the flat: NULL).
  if (type === 'token-bucket')
    return [true, exactText(flat[0]), exactText(flat[1]), flat[2] === 0 ? null : [flat[2] as number]];
  return [true, exactText(flat[0]), type === 'gcra' ? null : exactText(flat[1]), null];
}

function flatOf(
  type: WindowType,
  amount: string | null,
  timeMs: string | null,
  pairs: string[] | null,
): Flat {
  if (type === 'sliding' || type === 'sliding-log')
    return (pairs ?? []).length === 0
      ? []
      : [timeMs === null ? 0 : exact(timeMs), ...(pairs ?? []).map(exact)];
  if (amount === null) return [];
  if (type === 'concurrency') return [exact(amount), ...(pairs ?? []).map(exact)];
  if (type === 'token-bucket')
    return [exact(amount), exact(timeMs as string), pairs === null ? 0 : exact(pairs[0] as string)];
  return type === 'gcra' ? [exact(amount)] : [exact(amount), exact(timeMs as string)];
}

async function stepSql(pool: pg.Pool, c: Case, step: 'decide' | 'refund'): Promise<StepOutcome> {
  const { rule, op } = c;
  const values = [
    ...columns(c.type, c.state),
    TYPE_CODES[c.type],
    rule.sizeMs,
    rule.buckets,
    rule.burst,
    op.limit,
    op.periodEndMs ?? 0,
    op.nextPeriodEndMs ?? 0,
    op.cost,
    step,
    c.nowMs,
    c.add,
    c.receipt,
  ];
  const { rows } = await pool.query(STEP, values);
  const r = rows[0] as Record<string, string | boolean | string[] | null>;
  return {
    expiresAt: r.expires === null ? undefined : exact(r.expires as string),
    verdict: {
      allowed: r.allowed as boolean,
      remaining: exact(r.remaining as string),
      resetMs: exact(r.reset_ms as string),
      retryAfterMs: exact(r.retry_ms as string),
      count: exact(r.count as string),
      receipt: exact(r.receipt as string),
    },
    after: flatOf(c.type, r.amount as string | null, r.time_ms as string | null, r.pairs as string[] | null),
  };
}

/** TypeScript's ceilDiv and Math.ceil answer -0 where the result is 0; PostgreSQL's integers have one zero. */
function positiveZeros(outcome: StepOutcome): StepOutcome {
  const verdict = { ...outcome.verdict };
  for (const field of ['remaining', 'resetMs', 'retryAfterMs', 'count', 'receipt'] as const)
    verdict[field] = verdict[field] + 0;
  const expiresAt = outcome.expiresAt === undefined ? undefined : outcome.expiresAt + 0;
  return { expiresAt, verdict, after: outcome.after.map((n) => n + 0) };
}

describe('TypeScript and PL/pgSQL algorithms step for step (function-level parity)', function () {
  // Each property stops at TIME_LIMIT_MS; the rest is the server's start.
  this.timeout(120_000);
  let pool: pg.Pool;
  let compared = 0;

  before(async () => {
    pool = (await getPostgres()).pool({ max: 2 });
    await pool.query(schemaSql(names));
  });
  after(async () => {
    console.log(`      ${compared} cases compared field by field`);
    await pool.end();
  });

  for (const type of WINDOW_TYPES) {
    const steps: Array<['decide' | 'refund', number, string]> = [
      ['decide', DECIDE_RUNS, 'evaluate then apply'],
      ['refund', REFUND_RUNS, 'refund'],
    ];
    for (const [step, numRuns, what] of steps) {
      it(`${type}: ${what} gives the same verdict and the same state, ${numRuns} random cases`, async () => {
        try {
          await fc.assert(
            fc.asyncProperty(cases(type), async (c) => {
              compared++;
              expect(await stepSql(pool, c, step)).to.deep.equal(positiveZeros(stepTs(c, step)));
            }),
            // Past the time limit (a long shrink included) the run stops and fails with what it has.
            {
              numRuns,
              seed: PARITY_SEED,
              interruptAfterTimeLimit: TIME_LIMIT_MS,
              markInterruptAsFailure: true,
            },
          );
        } catch (error) {
          const replay = `replay with PARITY_SEED=${PARITY_SEED} PARITY_RUNS=${DECIDE_RUNS}`;
          throw new Error(`${type} ${step}: ${replay}\n${(error as Error).message}`, { cause: error });
        }
      });
    }
  }

  for (const [what, step, c] of REGRESSIONS) {
    it(`${c.type} ${step}: ${what}`, async () => {
      compared++;
      expect(await stepSql(pool, c, step)).to.deep.equal(positiveZeros(stepTs(c, step)));
    });
  }
});
