// Leasing on across real processes: 4 app processes hitting one hot key with demand above its limit admit
// exactly the limit on Redis (standalone and Cluster) and PostgreSQL, for every leased window type, with
// one process killed holding its block, and with the processes' wall clocks apart.
import { expect } from 'chai';
import type { Rule } from '../../src/index.js';
import { type HotKeyRun, runHotKey, totals } from '../support/hot-key.js';
import { type PostgresServer, startPostgres } from '../support/postgres.js';
import { commandCalls, type RedisServer, startRedis, useCluster } from '../support/redis.js';

const PROCESSES = 4;
const LIMIT = 5000;
/** Hot at once, blocks of at most 200: many blocks per run, taken and returned concurrently. */
const LEASING = { hotAfter: 1, maxBlock: 200 };
/** LeasingOptions.blockMs's default: a bucket block's life, whose refill it reserves. */
const BLOCK_MS = 250;
const DAY_MS = 86_400_000;

/**
 * A day: nothing of a fixed or calendar window ends during a run, and a bucket refills under one unit
 * (5000 a day is one unit in 17 s), so the limit is what may be admitted.
 */
const WINDOWS = {
  fixed: { type: 'fixed', size: '1d' },
  calendar: { type: 'calendar', unit: 'day' },
  'token-bucket': { type: 'token-bucket', size: '1d' },
  gcra: { type: 'gcra', size: '1d' },
} satisfies Record<string, Rule['window']>;

describe('Leasing across processes: admissions never exceed the limit', function () {
  this.timeout(300_000);
  let redis: RedisServer;
  let postgres: PostgresServer;
  let n = 0;

  before(async () => {
    redis = await startRedis();
    postgres = await startPostgres();
  });
  after(async () => {
    await redis?.stop();
    await postgres?.stop();
  });

  const run = (backend: HotKeyRun['backend'], url: string, window: Rule['window']): HotKeyRun => ({
    backend,
    url,
    prefix: `lease${n++}`,
    window,
    limit: LIMIT,
    keys: ['tenant'],
    leasing: LEASING,
    inFlight: 8,
    // Demand above the limit: each process alone asks for the whole of it.
    runMs: 60_000,
    maxDecisions: LIMIT + 500,
  });

  /**
   * Counted windows admit the limit exactly. A bucket (docs/exactness.md, "the under-admission bound"):
   * never more than the limit (its refill in a run is under one unit), and short by at most the refill
   * each block reserved and did not give back, ceil(limit × blockMs / size) units per block, over the
   * blocks taken, each in a store call of its own (`calls`: every script call or statement of the run).
   */
  function expectAdmitted(type: string, t: ReturnType<typeof totals>, calls: number): void {
    expect(t.storeErrors).to.equal(0);
    if (type === 'fixed' || type === 'calendar') expect(t.admitted).to.equal(LIMIT);
    else {
      const reserved = Math.ceil((LIMIT * BLOCK_MS) / DAY_MS);
      expect(t.admitted).to.be.within(LIMIT - reserved * calls, LIMIT);
    }
  }

  const scriptCalls = async () =>
    (await commandCalls(redis, 'fcall')) +
    (await commandCalls(redis, 'evalsha')) +
    (await commandCalls(redis, 'eval'));

  for (const [type, window] of Object.entries(WINDOWS)) {
    it(`${type} on Redis: ${PROCESSES} processes never admit more than the limit`, async () => {
      let before = 0;
      const tallies = await runHotKey(run('redis', redis.url, window), PROCESSES, undefined, async () => {
        before = await scriptCalls();
      });
      expectAdmitted(type, totals(tallies), (await scriptCalls()) - before);
    });
  }

  for (const type of ['fixed', 'gcra'] as const) {
    it(`${type} on PostgreSQL: ${PROCESSES} processes never admit more than the limit`, async () => {
      const t = totals(await runHotKey(run('postgres', postgres.url, WINDOWS[type]), PROCESSES));
      expectAdmitted(type, t, t.statements);
    });
  }

  it('a process killed holding a block loses its units for the window only: never over the limit', async () => {
    for (const [backend, url] of [
      ['redis', redis.url],
      ['postgres', postgres.url],
    ] as const) {
      // Killed at its 100th admission, not at a time: a fast run can end before any timer.
      const tallies = await runHotKey(run(backend, url, WINDOWS.fixed), PROCESSES, { afterAdmitted: 100 });
      const t = totals(tallies);
      expect(tallies[0]?.killed, backend).to.equal(true);
      expect(t.admitted, backend).to.be.at.most(LIMIT);
      // What the killed process held: one block, at most maxBlock units.
      expect(t.admitted, backend).to.be.at.least(LIMIT - LEASING.maxBlock);
    }
  });

  it('processes whose wall clocks are apart (-5 s, +5 s, +1 h) admit exactly the limit', async () => {
    const skews = [0, -5000, 5000, 3_600_000];
    const base = run('redis', redis.url, WINDOWS.fixed);
    // One run per skew set: the worker shifts Date.now by its own skew.
    const tallies = await Promise.all(
      skews.map((clockSkewMs) => runHotKey({ ...base, clockSkewMs }, 1).then((t) => t[0])),
    );
    const admitted = tallies.reduce((sum, t) => sum + (t?.admitted ?? 0), 0);
    expect(admitted).to.equal(LIMIT);
  });

  describe('on a Cluster', () => {
    const cluster = useCluster();
    it('fixed: 4 processes admit exactly the limit', async () => {
      const node = cluster.nodes[0] as { host: string; port: number };
      const url = `redis://${node.host}:${node.port}`;
      const t = totals(await runHotKey(run('redis-cluster', url, WINDOWS.fixed), PROCESSES));
      expect({ admitted: t.admitted, errors: t.storeErrors }).to.deep.equal({ admitted: LIMIT, errors: 0 });
    });
  });
});
