// The conformance suite, unchanged, on RedisStore: a standalone server and a real 3-master Cluster.
import { randomBytes } from 'node:crypto';
import type { Cluster, Redis } from 'ioredis';
import { RedisStore } from '../src/index.js';
import { conformanceSuite } from './conformance/suite.js';
import { getRedis, type RedisCluster, startCluster } from './support/redis.js';

const prefix = () => `rkc${randomBytes(4).toString('hex')}`;

describe('RedisStore (standalone)', () => {
  let client: Redis;
  before(async () => {
    client = (await getRedis()).client();
  });
  after(() => client.disconnect());
  conformanceSuite({
    name: 'RedisStore on a standalone server',
    makeStore: (clock) => new RedisStore({ client, prefix: prefix(), clock }),
  });
});

describe('RedisStore (Cluster)', () => {
  let cluster: RedisCluster;
  let client: Cluster;
  before(async function () {
    this.timeout(60_000);
    cluster = await startCluster();
    client = cluster.client();
  });
  after(async () => {
    client.disconnect();
    await cluster.stop();
  });
  conformanceSuite({
    name: 'RedisStore on a 3-master Cluster',
    makeStore: (clock) => new RedisStore({ client, prefix: prefix(), clock }),
  });
});
