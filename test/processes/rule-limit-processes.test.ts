// limiter.setLimit across 4 real processes on one store: Redis standalone, a Redis Cluster and PostgreSQL. The
// rule's limit is changed mid-window while the processes race on one key; the admissions their handlers
// count never pass the limit each was decided at, nor the key's count; changes raced by the 4 processes
// leave every process (and every Cluster slot) with one value; a limit set `for` a while outlives the
// process that set it and ends on time.
import { randomBytes } from 'node:crypto';
import { expect } from 'chai';
import { type PostgresServer, startPostgres } from '../support/postgres.js';
import { startLineWorker, type LineWorker as Worker } from '../support/processes.js';
import { type RedisServer, startRedis, useCluster } from '../support/redis.js';
import { until } from '../support/settle.js';

interface Burst {
  limits: number[];
  denied: number;
}

function startWorker(kind: string, address: string, prefix: string): Promise<Worker> {
  return startLineWorker('test/fixtures/rule-limit-worker.ts', [kind, address, prefix]);
}

/** Every process fires `n` concurrent consumes of `key` at once: their answers. */
async function burst(workers: Worker[], key: string, n: number): Promise<Burst[]> {
  return (await Promise.all(workers.map((w) => w.ask(`burst ${key} ${n}`)))) as unknown as Burst[];
}

const admitted = (bursts: Burst[]) => bursts.reduce((sum, b) => sum + b.limits.length, 0);
const limitsSeen = (bursts: Burst[]) => [...new Set(bursts.flatMap((b) => b.limits))].sort((a, b) => a - b);

/** The whole scenario on one store, 4 processes; `address` is what the workers connect to. */
async function scenario(kind: string, address: string): Promise<void> {
  const prefix = `rkl${randomBytes(4).toString('hex')}`;
  const workers = await Promise.all([0, 1, 2, 3].map(() => startWorker(kind, address, prefix)));
  const [first, second, third, fourth] = workers as [Worker, Worker, Worker, Worker];
  try {
    // The configured 10: 4 x 20 attempts admit exactly 10, each decided at 10.
    const configured = await burst(workers, 'k', 20);
    expect(admitted(configured)).to.equal(10);
    expect(limitsSeen(configured)).to.deep.equal([10]);

    // Raised to 25 mid-window by one process: every process's next decisions are at 25, 15 more pass.
    await first.ask('set 25');
    const raised = await burst(workers, 'k', 20);
    expect(limitsSeen(raised)).to.deep.equal([25]);
    expect(admitted(raised)).to.equal(15);

    // Raised to 40 while three processes race: a decision is at 25 (none passes: 25 are counted) or
    // at 40; the key never counts past 40, and what the handlers counted is what the store counted.
    const [during] = await Promise.all([burst([second, third, fourth], 'k', 20), first.ask('set 40')]);
    for (const limit of limitsSeen(during)) expect(limit, 'an admission decided at 25').to.equal(40);
    const after = await burst(workers, 'k', 10);
    expect(limitsSeen(after).every((limit) => limit === 40)).to.equal(true);
    expect(25 + admitted(during) + admitted(after)).to.equal(40);
    expect(await fourth.ask('status k')).to.include({ count: 40, limit: 40, overridden: true });

    // Lowered below the count: every process denies, at 12.
    await second.ask('set 12');
    const lowered = await burst(workers, 'k', 5);
    expect(admitted(lowered)).to.equal(0);
    expect(await first.ask('status k')).to.include({ count: 40, limit: 12, remaining: 0 });

    // Four changes raced by the four processes: one value wins, the same for every process and for
    // keys of every slot (on a Cluster, each slot's copy).
    await Promise.all(workers.map((w, i) => w.ask(`set ${30 + i}`)));
    const listed = await Promise.all(workers.map((w) => w.ask('limits')));
    const winner = (listed[0] as unknown as Array<{ limit: number }>)[0]?.limit;
    expect([30, 31, 32, 33]).to.include(winner);
    for (const l of listed) expect(l).to.deep.equal([{ rule: 'api', limit: winner }]);
    for (let k = 0; k < 24; k++) {
      const worker = workers[k % 4] as Worker;
      expect(await worker.ask(`status spread-${k}`), `key spread-${k}`).to.include({ limit: winner });
    }

    // Set for 3 s by a process that then exits: the others keep obeying it, and it ends on time.
    const heard = await Promise.all([second.ask('heard 8'), first.ask('set 2 3s')]);
    expect(heard[0]).to.deep.equal({ heard: 8 });
    await first.quit();
    const fresh = await burst([second, third, fourth], 'fresh', 3);
    expect(admitted(fresh)).to.equal(2);
    expect(limitsSeen(fresh)).to.deep.equal([2]);
    expect(((await second.ask('limits')) as unknown as Array<{ untilMs?: number }>)[0]?.untilMs).to.be.a(
      'number',
    );
    await until('the limit set for 3 s ended', async () => {
      const listedNow = (await third.ask('limits')) as unknown as unknown[];
      return listedNow.length === 0;
    });
    expect(await fourth.ask('status fresh')).to.include({ limit: 10, overridden: false, count: 2 });
  } finally {
    await Promise.all(workers.map((w) => w.quit()));
  }
}

describe('rule-wide limits across 4 processes', function () {
  this.timeout(240_000);

  describe('on Redis (standalone)', () => {
    let server: RedisServer;
    before(async () => {
      server = await startRedis();
    });
    after(() => server.stop());
    it('a limit changed mid-window is obeyed by every process at its next decision, never passed', async () => {
      await scenario('redis', server.url);
    });
  });

  describe('on a Redis Cluster', () => {
    const cluster = useCluster();
    it('a limit changed mid-window is obeyed by every process at its next decision, never passed', async () => {
      const nodes = cluster.nodes.map((n) => `${n.host}:${n.port}`).join(',');
      await scenario('cluster', nodes);
    });
  });

  describe('on PostgreSQL', () => {
    let server: PostgresServer;
    before(async () => {
      server = await startPostgres();
    });
    after(() => server?.stop());
    it('a limit changed mid-window is obeyed by every process at its next decision, never passed', async () => {
      await scenario('postgres', server.url);
    });
  });
});
