// Exactness on PostgreSQL: app processes racing on one key through one PostgreSQL admit exactly the limit, on idle
// cores and while CPU-bound processes oversubscribe them, with the burst waiting as the pool opens its first
// connections (and the schema is installed), and on a warm pool.
import { availableParallelism } from 'node:os';
import { expect } from 'chai';
import type { Rule } from '../../src/index.js';
import type { RaceAnswer, RaceStart } from '../fixtures/pressure-worker.js';
import { type PostgresServer, startPostgres } from '../support/postgres.js';
import { Burners, Racers } from '../support/pressure.js';
import { PATIENT } from '../support/settle.js';

/** CPU-bound processes: 4 per core (8 on a 2-core machine), on top of the racers and PostgreSQL. */
const BURNERS = 4 * availableParallelism();
const PROCESSES = 4;
const LIMIT = 1000;
/** Each process alone asks for the whole limit: a per-process answer would admit PROCESSES x LIMIT. */
const ATTEMPTS = 1000;
const STARTS: readonly RaceStart[] = ['at-start', 'warm'];

/** A day: nothing refills or expires during a round (token bucket and GCRA refill continuously). */
const WINDOWS: Record<string, Rule['window']> = {
  fixed: { type: 'fixed', size: '1d' },
  gcra: { type: 'gcra', size: '1d' },
};

describe('Exactness on PostgreSQL: racing processes admit exactly the limit', function () {
  this.timeout(300_000);
  let server: PostgresServer;
  let racers: Racers;
  let schemas = 0;

  before(async () => {
    server = await startPostgres();
    racers = new Racers(PROCESSES);
    await racers.up();
  });
  after(async () => {
    await racers?.stop();
    await server?.stop();
  });

  /** The admissions of one round, with what the failure policy decided, for the failure message. */
  async function race(start: RaceStart, window: Rule['window']) {
    const answers: RaceAnswer[] = await racers.race({
      start,
      client: 'postgres',
      url: server.url,
      prefix: `exact${schemas++}`,
      window,
      limit: LIMIT,
      attempts: ATTEMPTS,
      // The decisions of a burst queue for the pool's 10 connections: a busy machine may take seconds.
      options: PATIENT,
    });
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
    it(`${type}: ${PROCESSES} processes x ${ATTEMPTS} at once admit exactly ${LIMIT}, at start and warm`, async () => {
      for (const start of STARTS) {
        const { admitted, byPolicy, note } = await race(start, window);
        expect({ admitted, byPolicy }, note).to.deep.equal({ admitted: LIMIT, byPolicy: 0 });
      }
    });
  }

  describe(`with ${BURNERS} CPU burners`, () => {
    let burners: Burners | undefined;
    before(() => {
      burners = new Burners(BURNERS);
    });
    after(() => burners?.stop());

    it(`fixed: ${PROCESSES} processes x ${ATTEMPTS} at once admit exactly ${LIMIT}, at start and warm`, async () => {
      for (const start of STARTS) {
        const { admitted, byPolicy, note } = await race(start, { type: 'fixed', size: '1d' });
        expect({ admitted, byPolicy }, note).to.deep.equal({ admitted: LIMIT, byPolicy: 0 });
      }
    });
  });
});
