// The conformance suite, unchanged, on PostgresStore: each store in a schema of its own on a spawned PostgreSQL;
// and its leased cases with leasing at its lowest thresholds (test/stores/conformance/leasing.ts).
import { randomBytes } from 'node:crypto';
import type pg from 'pg';
import { PostgresStore } from '../../../src/index.js';
import { getPostgres } from '../../support/postgres.js';
import { identitySuite } from '../conformance/identities.js';
import { type LeasedStoreUnderTest, leasingSuite } from '../conformance/leasing.js';
import { overrideWindowSuite } from '../conformance/override-window.js';
import { overrideSuite } from '../conformance/overrides.js';
import { ruleLimitSuite } from '../conformance/rule-limits.js';
import { conformanceSuite, LEASING_AT_ONCE, type StoreUnderTest } from '../conformance/suite.js';
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

  const schema = () => `rkc_${randomBytes(4).toString('hex')}`;
  const store = (clock: () => number, on: string) =>
    new PostgresStore({ pool, schema: on, clock, leasing: LEASING_AT_ONCE });
  const leased: LeasedStoreUnderTest = {
    name: 'PostgresStore, leasing',
    leasing: LEASING_AT_ONCE,
    makeStore: (clock) => store(clock, schema()),
    makeShared: async (clock) => {
      const on = schema();
      return [store(clock, on), store(clock, on)];
    },
  };
  conformanceSuite(leased);
  overrideSuite(leased);
  ruleLimitSuite(leased);
  leasingSuite(leased);
});
