// Store factories for suites that run on every store: the memory store, RedisStore and PostgresStore on the shared servers.
import { randomBytes } from 'node:crypto';
import type { Redis } from 'ioredis';
import type pg from 'pg';
import { MemoryStore, PostgresStore, RedisStore, type Store } from '../../src/index.js';
import { getPostgres } from './postgres.js';
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

let sharedPool: Promise<pg.Pool> | undefined;

/** PostgresStore on the shared test server, each store in a schema of its own so runs never share rows. */
export const postgresStores: StoreFactory = {
  name: 'postgres',
  async makeStore(clock) {
    sharedPool ??= getPostgres().then((server) => server.pool({ max: 20 }));
    return new PostgresStore({
      pool: await sharedPool,
      schema: `rkt${randomBytes(5).toString('hex')}`,
      clock,
    });
  },
};
