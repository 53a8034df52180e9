// The conformance suite, unchanged, on PostgresStore: each store in a schema of its own on a spawned PostgreSQL.
import { randomBytes } from 'node:crypto';
import type pg from 'pg';
import { PostgresStore } from '../../../src/index.js';
import { getPostgres } from '../../support/postgres.js';
import { identitySuite } from '../conformance/identities.js';
import { overrideWindowSuite } from '../conformance/override-window.js';
import { overrideSuite } from '../conformance/overrides.js';
import { ruleLimitSuite } from '../conformance/rule-limits.js';
import { conformanceSuite, type StoreUnderTest } from '../conformance/suite.js';
import { windowFunctionSuite } from '../conformance/window-function.js';

describe('PostgresStore', function () {
  // Starting the server (initdb) takes a few seconds on a busy machine.
  this.timeout(120_000);
  let pool: pg.Pool;
  before(async () => {
    pool = (await getPostgres()).pool({ max: 20 });
  });
  after(() => pool.end());
  const target: StoreUnderTest = {
    name: 'PostgresStore',
    makeStore: (clock) => new PostgresStore({ pool, schema: `rkc_${randomBytes(4).toString('hex')}`, clock }),
  };
  conformanceSuite(target);
  overrideSuite(target);
  ruleLimitSuite(target);
  windowFunctionSuite(target);
  overrideWindowSuite(target);
  identitySuite(target);
});
