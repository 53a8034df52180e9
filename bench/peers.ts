// The peers' limiters in core form: each called the way its own middleware calls it, once per decision.

import { createRequire } from 'node:module';
import { type Options as ExpressRateLimitOptions, MemoryStore } from 'express-rate-limit';
import type { Redis } from 'ioredis';
import { type RedisReply, RedisStore } from 'rate-limit-redis';
import { RateLimiterMemory, RateLimiterRedis, RateLimiterRes } from 'rate-limiter-flexible';
import { type Contender, closeRedis, namespace, openRedis } from './contender.js';

const require = createRequire(import.meta.url);

/** koa-ratelimit's drivers (CommonJS, no types): the middleware builds one per request and calls get(). */
interface KoaLimiterOptions {
  id: string;
  db: Redis | Map<string, unknown>;
  max: number;
  duration: number;
  namespace: string;
}
type KoaLimiterClass = new (
  options: KoaLimiterOptions,
) => { get(): Promise<{ remaining: number; reset: number; total: number }> };
export const KoaRedisLimiter = require('koa-ratelimit/limiter/redis') as KoaLimiterClass;
export const KoaMemoryLimiter = require('koa-ratelimit/limiter/memory') as KoaLimiterClass;

/** rate-limiter-flexible signals a denial by rejecting with a RateLimiterRes. */
async function consumeFlexible(limiter: RateLimiterRedis | RateLimiterMemory, key: string): Promise<boolean> {
  try {
    await limiter.consume(key);
    return true;
  } catch (error) {
    if (error instanceof RateLimiterRes) return false;
    throw error;
  }
}

/** express-rate-limit stores only need windowMs from the middleware's options. */
function storeOptions(windowMs: number): ExpressRateLimitOptions {
  return { windowMs } as ExpressRateLimitOptions;
}

export const flexibleRedis: Contender = {
  name: 'rate-limiter-flexible RateLimiterRedis',
  store: 'redis',
  group: 'peer',
  note: 'consume(key)',
  async create(spec, ctx) {
    const client = openRedis(ctx.redisPort);
    const limiter = new RateLimiterRedis({
      storeClient: client,
      points: spec.limit,
      duration: Math.max(1, Math.round(spec.windowMs / 1000)),
      keyPrefix: namespace(ctx.prefix ?? 'rlflx:'),
    });
    return { decide: (key) => consumeFlexible(limiter, key), close: () => closeRedis(client) };
  },
};

export const flexibleMemory: Contender = {
  name: 'rate-limiter-flexible RateLimiterMemory',
  store: 'memory',
  group: 'peer',
  note: 'consume(key)',
  async create(spec, ctx) {
    const limiter = new RateLimiterMemory({
      points: spec.limit,
      duration: Math.max(1, Math.round(spec.windowMs / 1000)),
      keyPrefix: namespace(ctx.prefix ?? 'rlflx:'),
    });
    return { decide: (key) => consumeFlexible(limiter, key), close: async () => {} };
  },
};

export const expressRedis: Contender = {
  name: 'express-rate-limit + rate-limit-redis',
  store: 'redis',
  group: 'peer',
  note: 'store.increment(key)',
  async create(spec, ctx) {
    const client = openRedis(ctx.redisPort);
    const store = new RedisStore({
      sendCommand: (command: string, ...args: string[]) =>
        client.call(command, ...args) as Promise<RedisReply>,
      prefix: ctx.prefix ?? 'rl:',
    });
    await store.init(storeOptions(spec.windowMs));
    return {
      decide: async (key) => (await store.increment(key)).totalHits <= spec.limit,
      close: () => closeRedis(client),
    };
  },
};

export const expressMemory: Contender = {
  name: 'express-rate-limit MemoryStore',
  store: 'memory',
  group: 'peer',
  note: 'store.increment(key)',
  async create(spec) {
    const store = new MemoryStore();
    store.init(storeOptions(spec.windowMs));
    return {
      decide: async (key) => (await store.increment(key)).totalHits <= spec.limit,
      close: async () => store.shutdown(),
    };
  },
};

export const koaRedis: Contender = {
  name: 'koa-ratelimit (redis driver)',
  store: 'redis',
  group: 'peer',
  note: 'new limiter + get() per request, as its middleware',
  async create(spec, ctx) {
    const client = openRedis(ctx.redisPort);
    const options = {
      db: client,
      max: spec.limit,
      duration: spec.windowMs,
      namespace: namespace(ctx.prefix ?? 'limit:'),
    };
    return {
      decide: async (id) => (await new KoaRedisLimiter({ ...options, id }).get()).remaining > 0,
      close: () => closeRedis(client),
    };
  },
};

export const koaMemory: Contender = {
  name: 'koa-ratelimit (memory driver)',
  store: 'memory',
  group: 'peer',
  note: 'new limiter + get() per request, as its middleware',
  async create(spec, ctx) {
    const db = new Map<string, unknown>();
    const options = {
      db,
      max: spec.limit,
      duration: spec.windowMs,
      namespace: namespace(ctx.prefix ?? 'limit:'),
    };
    return {
      decide: async (id) => (await new KoaMemoryLimiter({ ...options, id }).get()).remaining > 0,
      close: async () => db.clear(),
    };
  },
};
