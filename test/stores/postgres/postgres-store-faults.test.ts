// PostgresStore when PostgreSQL fails: a restart mid-run admits nothing over the limit once it answers again, a
// paused server is silent and goes to the failure policy, a pool the app holds makes decisions wait, then fall to it.
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
import { type PostgresServer, startPostgres } from '../../support/postgres.js';
import { until } from '../../support/settle.js';

const LIMIT = 300;
const rule: Rule = { name: 'api', key: 'ip', limit: LIMIT, window: { type: 'fixed', size: '1h' } };

/** A limiter whose decisions are counted by source. */
function watched(store: PostgresStore, options: Partial<LimiterOptions>) {
  const limiter = createLimiter({ store, rules: [rule], ...options });
  const sources: DecisionSource[] = [];
  let storeDenied = 0;
  const errors: string[] = [];
  limiter.observe({
    decision: (d: Decision, info) => {
      sources.push(info.source);
      if (info.source === 'store' && !d.allowed) storeDenied++;
    },
  });
  limiter.on('storeError', ({ error }) => errors.push(error.message));
  return { limiter, sources, errors, storeDenied: () => storeDenied };
}

describe('PostgresStore when PostgreSQL fails', function () {
  this.timeout(180_000);
  let server: PostgresServer;
  let schemas = 0;
  const cleanups: Array<() => Promise<unknown>> = [];

  before(async () => {
    server = await startPostgres();
  });
  afterEach(async () => {
    for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
  });
  after(() => server?.stop());

  function open(poolOptions: pg.PoolConfig, options: Partial<LimiterOptions>) {
    const pool = server.pool(poolOptions);
    const store = new PostgresStore({ pool, schema: `faults${schemas++}` });
    const w = watched(store, options);
    cleanups.push(
      () => pool.end(),
      () => w.limiter.close(),
    );
    return { pool, ...w };
  }

  for (const mode of ['fast', 'immediate'] as const) {
    it(`${mode === 'fast' ? 'a fast' : 'an immediate (crash)'} restart while a burst is in flight: nothing is admitted over the limit once it answers again`, async () => {
      const { limiter, storeDenied } = open({ max: 10 }, { onStoreError: 'deny', storeTimeout: '60s' });
      let admitted = 0;
      const consume = async () => {
        if ((await limiter.consume('api', 'hot')).allowed) admitted++;
      };
      await Promise.all(Array.from({ length: 100 }, consume));
      expect(admitted).to.equal(100);
      // A burst in flight while the server stops (an immediate stop is a crash: committed work survives in its WAL).
      const burst = Promise.all(Array.from({ length: 150 }, consume));
      await server.restart(mode);
      await burst;
      // Until the store itself denies: every decision after the restart is decided by PostgreSQL again.
      await until(
        'the store denies the key',
        async () => {
          await consume();
          return storeDenied() > 0;
        },
        120_000,
      );
      expect(admitted).to.be.at.most(LIMIT);
      expect((await limiter.status('api', 'hot')).count).to.equal(LIMIT);
    });
  }

  it('a paused server is silent: decisions go to the policy after storeTimeout, and back to it once it answers', async () => {
    const { limiter, sources, errors } = open({ max: 4 }, { storeTimeout: '1s', storeRetryInterval: '1s' });
    expect((await limiter.consume('api', 'k')).allowed).to.equal(true);
    expect(sources).to.deep.equal(['store']);
    server.pause();
    let paused: Decision;
    try {
      paused = await limiter.consume('api', 'k');
    } finally {
      server.resume();
    }
    expect(paused.allowed).to.equal(true);
    expect(sources.at(-1)).to.equal('insurance');
    expect(errors[0]).to.match(/store did not answer within 1000 ms/);
    await until(
      "a decision is the store's again",
      async () => {
        await limiter.consume('api', 'k');
        return sources.at(-1) === 'store';
      },
      60_000,
    );
  });

  it('a pool the app holds: a decision waits for a connection, falls to the policy after storeMaxWait, and the store decides once one is free', async () => {
    const { pool, limiter, sources, errors } = open(
      { max: 2 },
      { storeTimeout: '1s', storeMaxWait: '2s', storeRetryInterval: '1s' },
    );
    expect((await limiter.consume('api', 'k')).allowed).to.equal(true);
    const held = [await pool.connect(), await pool.connect()];
    let waited: Decision;
    try {
      waited = await limiter.consume('api', 'k');
    } finally {
      for (const client of held) client.release();
    }
    expect(waited.allowed).to.equal(true);
    expect(sources.at(-1)).to.equal('insurance');
    expect(errors[0]).to.match(/not this one within 2000 ms/);
    await until(
      "a decision is the store's again",
      async () => {
        await limiter.consume('api', 'k');
        return sources.at(-1) === 'store';
      },
      60_000,
    );
  });
});
