// The raw floors: the least a fixed-window limiter can cost, in Redis (one EVALSHA) and in memory (one Map).

import type { Redis } from 'ioredis';
import { type Contender, type ContenderContext, closeRedis, type LimitSpec, openRedis } from './contender.js';

/**
 * Fixed window counter.
 * KEYS[1]  counter key
 * ARGV[1]  limit (admissions per window)
 * ARGV[2]  window (ms)
 * returns  1 admitted, 0 denied
 */
const fixedWindowLua = `
if redis.call('SET', KEYS[1], 1, 'NX', 'PX', ARGV[2]) then return 1 end
if redis.call('INCR', KEYS[1]) <= tonumber(ARGV[1]) then return 1 end
return 0
`;

async function createRawRedis(spec: LimitSpec, ctx: ContenderContext, enableAutoPipelining: boolean) {
  const client: Redis = openRedis(ctx.redisPort, { enableAutoPipelining });
  const prefix = ctx.prefix ?? 'rl:';
  const limit = String(spec.limit);
  const windowMs = String(spec.windowMs);
  let sha = (await client.script('LOAD', fixedWindowLua)) as string;
  return {
    async decide(key: string): Promise<boolean> {
      const redisKey = prefix + key;
      try {
        return (await client.evalsha(sha, 1, redisKey, limit, windowMs)) === 1;
      } catch (error) {
        if (!(error instanceof Error) || !error.message.startsWith('NOSCRIPT')) throw error;
        sha = (await client.script('LOAD', fixedWindowLua)) as string;
        return (await client.evalsha(sha, 1, redisKey, limit, windowMs)) === 1;
      }
    },
    close: () => closeRedis(client),
  };
}

/** Raw floor: hand-written EVALSHA fixed window through ioredis; the denominator of every Redis ratio. */
export const rawRedis: Contender = {
  name: 'raw floor (EVALSHA)',
  store: 'redis',
  group: 'floor',
  note: 'SET NX PX / INCR script, one EVALSHA per decision',
  create: (spec, ctx) => createRawRedis(spec, ctx, false),
};

/** The same floor with ioredis auto-pipelining: what batching alone buys. */
export const rawRedisPipelined: Contender = {
  name: 'raw floor (EVALSHA, auto-pipelined)',
  store: 'redis',
  group: 'floor',
  note: 'same script, ioredis enableAutoPipelining',
  create: (spec, ctx) => createRawRedis(spec, ctx, true),
};

/** Raw memory floor: one Map entry per key, fixed window; the denominator of the memory ratios. */
export const rawMemory: Contender = {
  name: 'raw floor (Map)',
  store: 'memory',
  group: 'floor',
  note: 'Map of { count, resetAt }, async like a store',
  async create(spec) {
    const counters = new Map<string, { count: number; resetAt: number }>();
    return {
      async decide(key: string): Promise<boolean> {
        const now = Date.now();
        const counter = counters.get(key);
        if (counter === undefined || counter.resetAt <= now) {
          counters.set(key, { count: 1, resetAt: now + spec.windowMs });
          return true;
        }
        counter.count++;
        return counter.count <= spec.limit;
      },
      async close() {
        counters.clear();
      },
    };
  },
};

/**
 * Promise floor: no limiting at all, only a settled Promise handed through the same async wrapper a
 * store's answer goes through. The most any Promise-returning API (ours, or a peer's store) can reach
 * in the memory scenarios: the driver and two awaits cost this much before a limiter does anything.
 */
export const promiseFloor: Contender = {
  name: 'promise floor (no work)',
  store: 'memory',
  group: 'floor',
  note: 'a settled Promise, no limiting: what any Promise-returning API costs here',
  async create() {
    const answer = { allowed: true };
    const settled = (_key: string): Promise<{ allowed: boolean }> => Promise.resolve(answer);
    return {
      decide: async (key: string) => (await settled(key)).allowed,
      close: async () => {},
    };
  },
};
