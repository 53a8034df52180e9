// Store factories for suites that run on every store: the memory store and RedisStore on the shared server.
import { randomBytes } from 'node:crypto';
import type { Redis } from 'ioredis';
import { MemoryStore, RedisStore, type Store } from '../../src/index.js';
import { getRedis } from './redis.js';

export interface StoreFactory {
  name: string;
  makeStore(clock: () => number): Store | Promise<Store>;
}

export const memoryStores: StoreFactory = {
  name: 'memory',
  makeStore: (clock) => new MemoryStore({ clock }),
};

let shared: Promise<Redis> | undefined;

/** RedisStore on the shared test server, each store under its own prefix so runs never share keys. */
export const redisStores: StoreFactory = {
  name: 'redis',
  async makeStore(clock) {
    shared ??= getRedis().then((server) => server.client());
    return new RedisStore({ client: await shared, prefix: `rkt${randomBytes(5).toString('hex')}`, clock });
  },
};
