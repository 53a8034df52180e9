// The shared store's health for operator views (contract 4: `limiter.health()`), where the limiter has it.
import type { Limiter } from '../limiter/limiter.js';

/** What `limiter.health()` answers. */
export interface StoreHealthView {
  state: 'ok' | 'down';
  sinceMs: number;
  lastError?: { message: string; code?: string; atMs: number };
}

/** The limiter's store health, or undefined when this limiter cannot tell (no `health()`). */
export async function storeHealth(limiter: Limiter): Promise<StoreHealthView | undefined> {
  const withHealth = limiter as Limiter & { health?: () => Promise<StoreHealthView> };
  if (typeof withHealth.health !== 'function') return undefined;
  return withHealth.health();
}
