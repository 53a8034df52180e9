// Concurrency leasing across real processes: 4 processes with leasing on, one hot concurrency key, each holding a
// pool of its slots, never run more handlers at once than the limit (counted by the handlers themselves) on Redis
// standalone, a Redis Cluster and PostgreSQL, and give every slot back; a process killed holding its pool loses
// its slots at their lease, and not before: no slot is admitted twice.
import { randomBytes } from 'node:crypto';
import { expect } from 'chai';
import type { Redis } from 'ioredis';
import { createLimiter, type Limiter, RedisStore } from '../../src/index.js';
import { POOL_RULE } from '../fixtures/slot-pool-worker.js';
import { startKillHolder, startWorkers } from '../support/concurrency-workers.js';
import { type PostgresServer, startPostgres } from '../support/postgres.js';
import { exited } from '../support/processes.js';
import { type RedisServer, startRedis, useCluster } from '../support/redis.js';
import { PATIENT } from '../support/settle.js';

const PROCESSES = 4;
const TASKS = 40;
const LIMIT = POOL_RULE.limit as number;
const request = { method: 'POST', path: '/work', headers: {}, user: 'shared' };

describe('Concurrency leasing across processes: pools of slots, never more in use than the limit', function () {
  this.timeout(120_000);
  let redis: RedisServer;
  let postgres: PostgresServer;
  let control: Redis;

  before(async () => {
    redis = await startRedis();
    control = redis.client();
    postgres = await startPostgres();
  });
  after(async () => {
    await redis?.stop();
    await postgres?.stop();
  });

  const prefix = () => `pool${randomBytes(4).toString('hex')}`;
  const workers = (backend: string, url: string, p: string, mode: string, count = PROCESSES) =>
    startWorkers(
      'test/fixtures/slot-pool-worker.ts',
      [backend, url, redis.url, p, mode, String(TASKS)],
      count,
    );

  /** The 4 'hold' workers' reports: every request ran, never more handlers than the limit at once. */
  async function expectHeld(backend: string, url: string, p: string) {
    const { children, next } = await workers(backend, url, p, 'hold');
    const reports = await Promise.all(
      children.map(
        async (_, i) =>
          JSON.parse(await next(i)) as { admitted: number; denied: number; most: number; pooled: number },
      ),
    );
    await Promise.all(children.map(exited));
    const most = Math.max(...reports.map((r) => r.most));
    const decisions = reports.reduce((sum, r) => sum + r.admitted + r.denied, 0);
    const pooled = reports.reduce((sum, r) => sum + r.pooled, 0);
    console.log(
      `      ${backend}: most handlers at once ${most} of ${LIMIT}; ${pooled} of ${decisions} decisions from pools`,
    );
    // Decisions were answered from pools.
    expect(pooled).to.be.above(0);
    expect(reports.map((r) => r.admitted)).to.deep.equal(Array(PROCESSES).fill(TASKS));
    expect(most).to.be.at.most(LIMIT);
    expect(Number(await control.get(`${p}:running`))).to.equal(0);
  }

  it(`Redis: ${PROCESSES} processes x ${TASKS} handlers against ${LIMIT} at once, from pools, every slot given back`, async () => {
    const p = prefix();
    await expectHeld('redis', redis.url, p);
    const limiter = createLimiter({
      store: new RedisStore({ client: control, prefix: p }),
      rules: [POOL_RULE],
    });
    expect((await limiter.status('pooled', 'shared')).count, 'every slot back').to.equal(0);
    await limiter.close();
  });

  it(`PostgreSQL: ${PROCESSES} processes x ${TASKS} handlers against ${LIMIT} at once`, async () => {
    await expectHeld('postgres', postgres.url, prefix());
  });

  describe('on a Cluster', () => {
    const cluster = useCluster();
    it(`${PROCESSES} processes x ${TASKS} handlers against ${LIMIT} at once`, async () => {
      const node = cluster.nodes[0] as { host: string; port: number };
      await expectHeld('redis-cluster', `redis://${node.host}:${node.port}`, prefix());
    });
  });

  it('a process killed holding its pool: each of its slots comes back at its lease and not before, none admitted twice', async () => {
    const p = prefix();
    const { holder } = await startKillHolder(workers('redis', redis.url, p, 'kill', 1));
    const limiter: Limiter = createLimiter({
      store: new RedisStore({ client: control, prefix: p }),
      rules: [POOL_RULE],
      ...PATIENT,
    });
    holder.kill('SIGKILL');
    await exited(holder);
    // What the dead process held: its two slots in use and its pool's free ones, each with its lease's end
    // (the key's sorted set: a member per slot scored by its lease's end, and '#' for the last id).
    const members = await control.zrange(`${p}:{shared}:pooled`, '0', '-1', 'WITHSCORES');
    const ends: number[] = [];
    for (let i = 0; i < members.length; i += 2) if (members[i] !== '#') ends.push(Number(members[i + 1]));
    const dead = ends.length;
    expect(dead, 'a pool beyond the two slots in use').to.be.above(2);
    expect((await limiter.status('pooled', 'shared')).count).to.equal(dead);
    const storeMs = async () => {
      const [seconds, micros] = (await control.time()) as [number, number];
      return Number(seconds) * 1000 + Math.floor(Number(micros) / 1000);
    };
    // Slots taken and kept until the key is full: a dead process's slot only once its own lease has ended
    // (store clock, read after each admission: a slot still live then was live at the admission).
    const admittedAt: number[] = [];
    while (admittedAt.length < LIMIT) {
      const decision = await limiter.check(request);
      if (decision.allowed) admittedAt.push(await storeMs());
      else await new Promise((resolve) => setTimeout(resolve, decision.retryAfterMs));
    }
    const firstEnd = Math.min(...ends);
    console.log(
      `      ${dead} slots held by the dead process; the first back ${(admittedAt[LIMIT - dead] as number) - firstEnd} ms after its lease`,
    );
    admittedAt.forEach((at, j) => {
      const live = ends.filter((end) => end > at).length;
      expect(j + 1 + live, `admission ${j + 1}: slots held then`).to.be.at.most(LIMIT);
    });
    expect((await limiter.check(request)).allowed, 'the limit, and no more').to.equal(false);
    await limiter.close();
  });
});
