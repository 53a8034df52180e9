// Exactness under pressure: app processes racing on one key through one Redis admit exactly the limit while
// CPU-bound processes oversubscribe the cores, with the burst already waiting as the connection is made,
// on a connection whose scripts are not loaded yet, and on a warm one, for every window type.
import { availableParallelism } from 'node:os';
import { expect } from 'chai';
import type { Redis } from 'ioredis';
import type { Rule } from '../../src/index.js';
import type { RaceAnswer, RaceClient, RaceStart } from '../fixtures/pressure-worker.js';
import { Burners, Racers } from '../support/pressure.js';
import { type RedisServer, startRedis } from '../support/redis.js';

/** CPU-bound processes: 4 per core (8 on a 2-core machine), on top of the racers and Redis. */
const BURNERS = 4 * availableParallelism();
const PROCESSES = 4;
const LIMIT = 500;
/** Each process alone asks for the whole limit: a per-process answer would admit PROCESSES x LIMIT. */
const ATTEMPTS = 500;
const STARTS: readonly RaceStart[] = ['at-start', 'cold', 'warm'];

/** A day: nothing refills or expires during a round (token bucket and GCRA refill continuously). */
const WINDOWS: Record<string, Rule['window']> = {
  fixed: { type: 'fixed', size: '1d' },
  calendar: { type: 'calendar', unit: 'month' },
  'sliding-log': { type: 'sliding-log', size: '1d' },
  sliding: { type: 'sliding', size: '1d' },
  'token-bucket': { type: 'token-bucket', size: '1d' },
  gcra: { type: 'gcra', size: '1d' },
};

describe('Exactness under pressure: racing processes on busy cores admit exactly the limit', function () {
  this.timeout(120_000);
  let server: RedisServer;
  let control: Redis;
  let racers: Racers;
  let burners: Burners | undefined;
  let prefixes = 0;

  before(async () => {
    server = await startRedis();
    control = server.client();
    racers = new Racers(PROCESSES);
    await racers.up();
    burners = new Burners(BURNERS);
  });
  after(async () => {
    await burners?.stop();
    await racers?.stop();
    await server?.stop();
  });

  /** The admissions of one round, with what the failure policy decided, for the failure message. */
  async function race(start: RaceStart, client: RaceClient, window: Rule['window']) {
    const answers: RaceAnswer[] = await racers.race(
      {
        start,
        client,
        url: server.url,
        prefix: `pressure${prefixes++}`,
        window,
        limit: LIMIT,
        attempts: ATTEMPTS,
      },
      // At start and cold, the burst meets an empty script cache: the first calls answer NOSCRIPT.
      async () => {
        if (start !== 'warm') await control.script('FLUSH');
      },
    );
    const admitted = answers.reduce((sum, a) => sum + a.admitted, 0);
    const byPolicy = answers.reduce((sum, a) => sum + a.byPolicy, 0);
    const why = answers.find((a) => a.firstStoreError !== null)?.firstStoreError ?? 'none';
    return {
      admitted,
      byPolicy,
      note: `${start}: ${byPolicy} decided by the policy, first store error: ${why}`,
    };
  }

  for (const [type, window] of Object.entries(WINDOWS)) {
    it(`${type}: ${PROCESSES} processes x ${ATTEMPTS} at once admit exactly ${LIMIT}, at start, cold and warm (ioredis, default options)`, async () => {
      for (const start of STARTS) {
        const { admitted, byPolicy, note } = await race(start, 'ioredis', window);
        expect({ admitted, byPolicy }, note).to.deep.equal({ admitted: LIMIT, byPolicy: 0 });
      }
    });
  }

  it(`ioredis with the recommended settings (no offline queue, commandTimeout): ${PROCESSES} processes x ${ATTEMPTS} admit exactly ${LIMIT}, at start, cold and warm`, async () => {
    for (const start of STARTS) {
      const { admitted, byPolicy, note } = await race(start, 'ioredis-recommended', {
        type: 'fixed',
        size: '1d',
      });
      expect({ admitted, byPolicy }, note).to.deep.equal({ admitted: LIMIT, byPolicy: 0 });
    }
  });

  it(`node-redis, connect() not awaited: ${PROCESSES} processes x ${ATTEMPTS} admit exactly ${LIMIT}, at start and cold`, async () => {
    for (const start of ['at-start', 'cold'] as const) {
      const { admitted, byPolicy, note } = await race(start, 'node-redis', { type: 'fixed', size: '1d' });
      expect({ admitted, byPolicy }, note).to.deep.equal({ admitted: LIMIT, byPolicy: 0 });
    }
  });
});
