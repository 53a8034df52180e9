// A concurrency key's pool of slots on RedisStore, in one process on a real Redis: counted in the store as held,
// handed out and taken back without a script call, and ended by another process's rule-wide limit (the store's
// announcement), its free slots back in the store.
import { expect } from 'chai';
import type { Redis } from 'ioredis';
import { createLimiter, type Limiter, RedisStore, type Rule } from '../../../src/index.js';
import { commandCalls, type RedisServer, startRedis } from '../../support/redis.js';
import { until } from '../../support/settle.js';

const RULE: Rule = { name: 'pooled', key: 'user', limit: 40, window: { type: 'concurrency', lease: '1m' } };
const request = { method: 'POST', path: '/work', headers: {}, user: 'shared' };

describe('RedisStore leasing: a pool of concurrency slots', function () {
  this.timeout(60_000);
  let redis: RedisServer;
  let client: Redis;
  const opened: Limiter[] = [];

  before(async () => {
    redis = await startRedis();
    client = redis.client();
  });
  after(async () => {
    for (const limiter of opened) await limiter.close();
    client?.disconnect();
    await redis?.stop();
  });

  it('takes a pool counted in the store, hands out and takes back its slots without a call, and a rule-wide limit set elsewhere ends it', async () => {
    const leasing = { hotAfter: 1, maxBlock: 4, share: 2, blockMs: 10_000, idleMs: 60_000 };
    const leased = createLimiter({ store: new RedisStore({ client, prefix: 'sp', leasing }), rules: [RULE] });
    const plain = createLimiter({ store: new RedisStore({ client, prefix: 'sp' }), rules: [RULE] });
    opened.push(leased, plain);
    // The first decision learns what the store has left; the second takes its slot and a pool of 4.
    for (let i = 0; i < 2; i++) await leased.release(await leased.check(request));
    const held = (await plain.status('pooled', 'shared')).count;
    expect(held, 'the pool, held in the store').to.equal(4);
    const calls = async () => (await commandCalls(redis, 'fcall')) + (await commandCalls(redis, 'evalsha'));
    const before = await calls();
    for (let i = 0; i < 50; i++) await leased.release(await leased.check(request));
    expect((await calls()) - before, 'script calls for 50 decisions and releases').to.equal(0);
    await plain.setLimit('pooled', 30);
    await until(
      'the pool is back in the store',
      async () => (await plain.status('pooled', 'shared')).count === 0,
      20_000,
    );
    const decision = await leased.check(request);
    expect({ allowed: decision.allowed, limit: decision.limit }).to.deep.equal({ allowed: true, limit: 30 });
    await leased.release(decision);
  });
});
