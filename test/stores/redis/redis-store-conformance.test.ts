// The conformance suite, unchanged, on RedisStore: a standalone server and a real 3-master Cluster, each
// through ioredis and through node-redis (the `redis` package), and through ioredis with every rule
// grouped (the string windows' states in their identity's record); and its leased cases with leasing at
// its lowest thresholds through ioredis (test/stores/conformance/leasing.ts).
import { randomBytes } from 'node:crypto';
import type { Cluster, Redis } from 'ioredis';
import { RedisStore } from '../../../src/index.js';
import { type AnyClient, NODE_REDIS_6 } from '../../support/clients.js';
import { groupingEveryRule } from '../../support/grouped-store.js';
import { getRedis, useCluster } from '../../support/redis.js';
import { identitySuite } from '../conformance/identities.js';
import { type LeasedStoreUnderTest, leasingSuite } from '../conformance/leasing.js';
import { overrideWindowSuite } from '../conformance/override-window.js';
import { overrideSuite } from '../conformance/overrides.js';
import { ruleLimitSuite } from '../conformance/rule-limits.js';
import { conformanceSuite, LEASING_AT_ONCE, type StoreUnderTest } from '../conformance/suite.js';
import { windowFunctionSuite } from '../conformance/window-function.js';

const prefix = () => `rkc${randomBytes(4).toString('hex')}`;

/** RedisStore with leasing at its lowest thresholds, on `client`: each store a prefix of its own, or two on one. */
function leased(name: string, client: () => AnyClient | Redis | Cluster): LeasedStoreUnderTest {
  const store = (clock: () => number, on: string) =>
    new RedisStore({ client: client(), prefix: on, clock, leasing: LEASING_AT_ONCE });
  return {
    name,
    leasing: LEASING_AT_ONCE,
    makeStore: (clock) => store(clock, prefix()),
    makeShared: async (clock) => {
      const on = prefix();
      return [store(clock, on), store(clock, on)];
    },
  };
}

/** The suites a leasing store runs: the leased cases of each, and leasing's own. */
function leasedSuites(target: LeasedStoreUnderTest): void {
  conformanceSuite(target);
  overrideSuite(target);
  ruleLimitSuite(target);
  leasingSuite(target);
}

describe('RedisStore (standalone)', () => {
  let client: Redis;
  let nodeRedis: AnyClient;
  before(async () => {
    const server = await getRedis();
    client = server.client();
    nodeRedis = await NODE_REDIS_6.standalone(server);
  });
  after(async () => {
    client.disconnect();
    await NODE_REDIS_6.close(nodeRedis);
  });
  const targets: StoreUnderTest[] = [
    {
      name: 'RedisStore on a standalone server',
      makeStore: (clock) => new RedisStore({ client, prefix: prefix(), clock }),
    },
    {
      name: 'RedisStore on a standalone server through node-redis',
      makeStore: (clock) => new RedisStore({ client: nodeRedis, prefix: prefix(), clock }),
    },
    {
      name: 'RedisStore on a standalone server, every rule grouped (its state in the identity record)',
      makeStore: (clock) => groupingEveryRule(new RedisStore({ client, prefix: prefix(), clock })),
    },
  ];
  for (const target of targets) {
    conformanceSuite(target);
    overrideSuite(target);
    ruleLimitSuite(target);
    windowFunctionSuite(target);
    overrideWindowSuite(target);
    identitySuite(target);
  }
  leasedSuites(leased('RedisStore on a standalone server, leasing', () => client));
});

describe('RedisStore (Cluster)', () => {
  const cluster = useCluster();
  let nodeRedis: AnyClient;
  before(async () => {
    nodeRedis = await NODE_REDIS_6.cluster(cluster.nodes);
  });
  after(() => NODE_REDIS_6.close(nodeRedis));
  const targets: StoreUnderTest[] = [
    {
      name: 'RedisStore on a 3-master Cluster',
      makeStore: (clock) => new RedisStore({ client: cluster.ioredis, prefix: prefix(), clock }),
    },
    {
      name: 'RedisStore on a 3-master Cluster through node-redis',
      makeStore: (clock) => new RedisStore({ client: nodeRedis, prefix: prefix(), clock }),
    },
    {
      name: 'RedisStore on a 3-master Cluster, every rule grouped',
      makeStore: (clock) =>
        groupingEveryRule(new RedisStore({ client: cluster.ioredis, prefix: prefix(), clock })),
    },
  ];
  for (const target of targets) {
    conformanceSuite(target);
    overrideSuite(target);
    ruleLimitSuite(target);
    windowFunctionSuite(target);
    // The rule-wide case without the Cluster's 16,384 copies per setLimit (seconds each): the scripts read a
    // window-only override after the rule-wide limit alike on both (standalone above).
    overrideWindowSuite(target, false);
    identitySuite(target);
  }
  leasedSuites(leased('RedisStore on a 3-master Cluster, leasing', () => cluster.ioredis));
});
