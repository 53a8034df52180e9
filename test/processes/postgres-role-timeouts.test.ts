// A database role with lock_timeout or statement_timeout: 4 processes racing on one hot key through PostgreSQL admit
// exactly the limit, none decided by the policy (a cut statement is the role's setting, not a failed store).
import { expect } from 'chai';
import pg from 'pg';
import type { RaceAnswer } from '../fixtures/pressure-worker.js';
import { type PostgresServer, startPostgres } from '../support/postgres.js';
import { Racers } from '../support/pressure.js';
import { PATIENT } from '../support/settle.js';

const PROCESSES = 4;
const LIMIT = 150;
/** Each process alone asks for the whole limit: 600 in all on one key. */
const ATTEMPTS = 150;

/** What the role is given, as `ALTER ROLE app SET ...` would (a team's usual guard on an application role). */
const SETTINGS: Record<string, Record<string, string>> = {
  'lock_timeout 25ms': { lock_timeout: '25ms' },
  'statement_timeout 15ms': { statement_timeout: '15ms' },
  'both: lock_timeout 25ms, statement_timeout 15ms': { lock_timeout: '25ms', statement_timeout: '15ms' },
};

describe("PostgreSQL role timeouts: a role's lock_timeout and statement_timeout never admit over the limit", function () {
  this.timeout(300_000);
  let server: PostgresServer;
  let admin: pg.Pool;
  let racers: Racers;
  let schemas = 0;

  before(async () => {
    server = await startPostgres();
    admin = server.pool({ max: 1 });
    await admin.query('CREATE ROLE app LOGIN');
    await admin.query('GRANT CREATE ON DATABASE postgres TO app');
    racers = new Racers(PROCESSES);
    await racers.up();
  });
  after(async () => {
    await racers?.stop();
    await server?.stop();
  });

  for (const [label, settings] of Object.entries(SETTINGS)) {
    it(`${label}: ${PROCESSES} processes x ${ATTEMPTS} on one key admit exactly ${LIMIT}`, async () => {
      await admin.query('ALTER ROLE app RESET ALL');
      for (const [name, value] of Object.entries(settings)) {
        await admin.query(`ALTER ROLE app SET ${name} = '${value}'`);
      }
      // The role's settings reach every session it opens: the racers' pools are made after this.
      const probe = new pg.Client({ connectionString: server.url.replace('postgres@', 'app@') });
      await probe.connect();
      for (const [name, value] of Object.entries(settings)) {
        expect((await probe.query(`SHOW ${name}`)).rows[0][name]).to.equal(value);
      }
      await probe.end();
      const answers: RaceAnswer[] = await racers.race({
        start: 'warm',
        client: 'postgres',
        url: server.url.replace('postgres@', 'app@'),
        prefix: `roles${schemas++}`,
        window: { type: 'fixed', size: '1d' },
        limit: LIMIT,
        attempts: ATTEMPTS,
        options: PATIENT,
      });
      const admitted = answers.reduce((sum, a) => sum + a.admitted, 0);
      const byPolicy = answers.reduce((sum, a) => sum + a.byPolicy, 0);
      const why = answers.find((a) => a.firstStoreError !== null)?.firstStoreError ?? 'none';
      expect({ admitted, byPolicy }, `first store error: ${why}`).to.deep.equal({
        admitted: LIMIT,
        byPolicy: 0,
      });
      const counted = await admin.query(
        `SELECT amount FROM "roles${schemas - 1}".rk_keys WHERE rule = 'race' AND key = convert_to('hot', 'UTF8')`,
      );
      expect(Number(counted.rows[0].amount)).to.equal(LIMIT);
    });
  }
});
