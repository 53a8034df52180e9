// A server restarted (PostgreSQL fast and immediate, Redis) or a connection killed under traffic: once health() says
// ok the store decides again and the limit holds; a connection a restart killed is retried on a fresh one, not failed.
import { expect } from 'chai';
import type pg from 'pg';
import {
  createLimiter,
  type Decision,
  type DecisionSource,
  type Limiter,
  PostgresStore,
  RedisStore,
  type Rule,
} from '../../src/index.js';
import { RECOMMENDED_REDIS_OPTIONS } from '../fixtures/redis-options.js';
import { type AnyClient, NODE_REDIS_6 } from '../support/clients.js';
import { type PostgresServer, startPostgres } from '../support/postgres.js';
import { type RedisServer, startRedis } from '../support/redis.js';
import { PATIENT, until } from '../support/settle.js';

/** A limit of 3 an hour: one used before the restart, so two are left. */
const LIMIT = 3;
const rule: Rule = { name: 'api', key: 'ip', limit: LIMIT, window: { type: 'fixed', size: '1h' } };

/** A limiter with the default failure policy (insurance, 1 s retry interval), its decisions counted by source. */
function watched(limiter: Limiter) {
  const sources: DecisionSource[] = [];
  const errors: string[] = [];
  limiter.observe({ decision: (_d: Decision, info) => sources.push(info.source) });
  limiter.on('storeError', ({ error }) => errors.push(error.message));
  return { limiter, sources, errors };
}

/**
 * Decisions on other keys, one after another, until stopped: the traffic the restart happens under.
 * Resolves with how many of them were not the store's.
 */
function traffic(limiter: Limiter) {
  let stopped = false;
  let byPolicy = 0;
  let n = 0;
  const done = (async () => {
    while (!stopped) {
      let source: DecisionSource | undefined;
      const off = limiter.observe({ decision: (_d, info) => (source ??= info.source) });
      await limiter.consume('api', `bg-${n++ % 1000}`);
      off();
      if (source !== 'store') byPolicy++;
      await new Promise((resolve) => setImmediate(resolve));
    }
  })();
  return {
    stop: async () => {
      stopped = true;
      await done;
      return byPolicy;
    },
  };
}

/**
 * One key with 1 of 3 used, a restart under traffic, then health() polled until it says ok: the next
 * four decisions on the key are the store's, two admitted (3 in the hour), the store counting 3.
 */
async function restartScenario(limiter: Limiter, sources: DecisionSource[], restart: () => Promise<void>) {
  expect((await limiter.consume('api', 'first')).allowed).to.equal(true);
  const load = traffic(limiter);
  await restart();
  await until('health() says ok', async () => (await limiter.health()).state === 'ok', 60_000);
  const from = sources.length;
  const allowed: boolean[] = [];
  for (let i = 0; i < 4; i++) allowed.push((await limiter.consume('api', 'first')).allowed);
  // A denial the store answered may be repeated by the deny cache, which learned it from the store.
  const after = sources.slice(from, from + 4).map((source) => (source === 'deny_cache' ? 'store' : source));
  const duringOutage = await load.stop();
  expect({ allowed, after }).to.deep.equal({
    allowed: [true, true, false, false],
    after: ['store', 'store', 'store', 'store'],
  });
  expect((await limiter.status('api', 'first')).count).to.equal(LIMIT);
  return duringOutage;
}

describe('Store restarts under traffic: the store decides again once health() says ok', function () {
  this.timeout(180_000);
  const cleanups: Array<() => Promise<unknown>> = [];
  afterEach(async () => {
    for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
  });

  describe('PostgreSQL', () => {
    let server: PostgresServer;
    let schemas = 0;
    before(async () => {
      server = await startPostgres();
    });
    after(() => server?.stop());

    function open(poolOptions: pg.PoolConfig = {}, limiterOptions = {}) {
      const pool = server.pool(poolOptions);
      const schema = `restarts${schemas++}`;
      const w = watched(
        createLimiter({ store: new PostgresStore({ pool, schema }), rules: [rule], ...limiterOptions }),
      );
      cleanups.push(
        () => pool.end(),
        () => w.limiter.close(),
      );
      return { pool, schema, ...w };
    }

    for (const mode of ['fast', 'immediate'] as const) {
      it(`${mode} restart: the first decisions after health() says ok are the store's, within the limit`, async () => {
        const { limiter, sources } = open();
        const duringOutage = await restartScenario(limiter, sources, () => server.restart(mode));
        expect(duringOutage, 'decisions the policy answered while the server was down').to.be.above(0);
      });
    }

    it('a connection killed in the middle of a decision (pg_terminate_backend, as a failover does) is retried on a fresh one within the decision', async () => {
      const { schema, limiter, sources, errors } = open(
        { application_name: 'rk-killed' },
        { ...PATIENT, storeRetryInterval: '1h' },
      );
      expect((await limiter.consume('api', 'hot')).allowed).to.equal(true);
      const admin = server.pool({ max: 2 });
      cleanups.push(() => admin.end());
      const holder = await admin.connect();
      let decision: Promise<Decision> | undefined;
      try {
        // The decision waits on the key's row, held here, so that its connection is killed mid-statement.
        await holder.query('BEGIN');
        await holder.query(`SELECT 1 FROM "${schema}".rk_keys FOR UPDATE`);
        decision = limiter.consume('api', 'hot');
        let pid = 0;
        await until('the decision waits on the row lock', async () => {
          const { rows } = await admin.query(
            `SELECT pid FROM pg_stat_activity WHERE application_name = 'rk-killed' AND wait_event_type = 'Lock'`,
          );
          pid = rows[0]?.pid ?? 0;
          return pid !== 0;
        });
        await admin.query('SELECT pg_terminate_backend($1)', [pid]);
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
      expect((await limiter.health()).state).to.equal('ok');
      expect((await limiter.status('api', 'hot')).count).to.equal(2);
    });
  });

  describe('Redis', () => {
    let server: RedisServer;
    before(async () => {
      server = await startRedis();
    });
    after(() => server?.stop());

    /** ioredis with the recommended settings, and node-redis with the recommended ones (connect() awaited). */
    const clients: Array<[string, () => Promise<AnyClient>, (client: AnyClient) => Promise<void>]> = [
      [
        'ioredis',
        async () => {
          const client = server.client(RECOMMENDED_REDIS_OPTIONS);
          client.on('error', () => {});
          await until('Redis is ready', () => client.status === 'ready');
          return client;
        },
        async () => {},
      ],
      [NODE_REDIS_6.name, () => NODE_REDIS_6.standalone(server), (client) => NODE_REDIS_6.close(client)],
    ];
    for (const [name, make, close] of clients) {
      it(`${name}, restart (data kept): the first decisions after health() says ok are the store's, within the limit`, async () => {
        const client = await make();
        const { limiter, sources } = watched(
          createLimiter({ store: new RedisStore({ client, prefix: `restarts-${name}` }), rules: [rule] }),
        );
        cleanups.push(
          () => close(client),
          () => limiter.close(),
        );
        const duringOutage = await restartScenario(limiter, sources, () =>
          server.restart({ keepData: true }),
        );
        expect(duringOutage, 'decisions the policy answered while the server was down').to.be.above(0);
      });
    }
  });
});
