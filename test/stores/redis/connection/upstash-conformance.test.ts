// The conformance suite, unchanged, on RedisStore over HTTP: an @upstash/redis client talking to a loopback
// server that speaks Upstash's REST protocol (test/support/upstash-rest.ts) in front of a real redis-server.
import { randomBytes } from 'node:crypto';
import { Redis } from '@upstash/redis';
import { RedisStore } from '../../../../src/index.js';
import { getRedis } from '../../../support/redis.js';
import { startUpstashRest, type UpstashRest } from '../../../support/upstash-rest.js';
import { identitySuite } from '../../conformance/identities.js';
import { overrideSuite } from '../../conformance/overrides.js';
import { conformanceSuite } from '../../conformance/suite.js';

const prefix = () => `rku${randomBytes(4).toString('hex')}`;

describe('RedisStore over HTTP (@upstash/redis, REST protocol)', () => {
  let rest: UpstashRest;
  let client: Redis;
  before(async () => {
    const server = await getRedis();
    rest = await startUpstashRest({ redisPort: server.port, redisHost: server.host });
    client = new Redis({ url: rest.url, token: rest.token, enableTelemetry: false });
  });
  after(() => rest.close());
  const target = {
    name: 'RedisStore through @upstash/redis',
    makeStore: (clock: () => number) => new RedisStore({ client, prefix: prefix(), clock }),
  };
  conformanceSuite(target);
  overrideSuite(target);
  identitySuite(target);
});
