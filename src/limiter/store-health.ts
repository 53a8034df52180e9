// The shared store's health as the limiter has seen it: 'ok' or 'down', since when, and the last fault's cause.
import { errorCode } from '../errors.js';

/** What `limiter.health()` answers. */
export interface StoreHealth {
  /** `'down'` from a failed store call until one succeeds again; the memory store is `'ok'` unless its last decision threw. */
  state: 'ok' | 'down';
  /** Epoch ms the state began (the limiter's creation for a store never seen failing). */
  sinceMs: number;
  /** The last store fault, whatever the state now; absent when none was seen. */
  lastError?: {
    message: string;
    /** The underlying code: a Node error's (`ECONNREFUSED`, `ENOTFOUND`), else a Redis reply's first word (`WRONGPASS`, `NOAUTH`, `OOM`). */
    code?: string;
    atMs: number;
  };
}

/** Tracks the store's state from the outcome of each call. */
export class HealthState {
  #down = false;
  #sinceMs = Date.now();
  #lastError: StoreHealth['lastError'];

  /** A store call failed: 'down' from now on (if it was not already), with this cause. */
  failed(error: unknown): void {
    const atMs = Date.now();
    const message = error instanceof Error ? error.message : String(error);
    const code = errorCode(error);
    this.#lastError = code === undefined ? { message, atMs } : { message, code, atMs };
    if (!this.#down) {
      this.#down = true;
      this.#sinceMs = atMs;
    }
  }

  /** A store call succeeded: 'ok' again. Cheap enough for every decision. */
  succeeded(): void {
    if (!this.#down) return;
    this.#down = false;
    this.#sinceMs = Date.now();
  }

  snapshot(): StoreHealth {
    const health: StoreHealth = { state: this.#down ? 'down' : 'ok', sinceMs: this.#sinceMs };
    if (this.#lastError !== undefined) health.lastError = { ...this.#lastError };
    return health;
  }
}
