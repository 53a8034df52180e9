// The outbound calls recipe (docs/recipes.md): a provider that allows 50 calls at once and 500 a minute from all
// our workers together, through limiter.wrap on a RedisStore they share.
import type { Redis } from 'ioredis';
import { createLimiter, type Limiter, RedisStore } from '../src/index.js';

export interface Charge {
  customer: string;
  amount: number;
}

export interface ProviderOptions {
  /** The workers' shared Redis. */
  redis: Redis;
  /** The provider's own call (its HTTP client). */
  send(charge: Charge): Promise<{ id: string }>;
  /** Ends every wait for a turn (shutdown). */
  signal: AbortSignal;
}

export function providerClient(options: ProviderOptions): {
  charge(charge: Charge): Promise<{ id: string }>;
  limiter: Limiter;
} {
  const limiter = createLimiter({
    store: new RedisStore({ client: options.redis, prefix: 'provider' }),
    rules: [
      // The key is the call's own ('payments'): the rules' key is for HTTP use, which these have none of.
      { name: 'payments-concurrent', key: 'ip', limit: 50, window: { type: 'concurrency', lease: '30s' } },
      // Exact: never more than 500 in any 60 s, however the provider aligns its minute.
      { name: 'payments-minute', key: 'ip', limit: 500, window: { type: 'sliding-log', size: '1m' } },
    ],
  });
  // Both rules decided together (all or nothing); the slot is released when the call settles.
  const charge = limiter.wrap(options.send, {
    rules: ['payments-concurrent', 'payments-minute'],
    key: 'payments',
    maxWait: '30s', // wait up to 30 s for a turn, then throw RateLimitExceededError
    signal: options.signal,
  });
  return { charge, limiter };
}
