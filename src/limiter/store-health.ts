// The shared store's health as the limiter has seen it: 'ok' or 'down', since when, and the last fault's cause.
import { errorCode } from '../errors.js';

/** What `limiter.health()` answers. */
export interface StoreHealth {
  /**
   * `'down'` from a failed store call until one succeeds again, and while decisions skip the store after
   * a failed decision (`storeRetryInterval`); the memory store is `'ok'` unless its last decision threw.
   */
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

/**
 * Tracks the store's state from the outcome of each call, and the retry interval: after a decision's call
 * failed, decisions skip the store (the policy answers them) until `storeRetryInterval` has passed or
 * the store answered a probe. It is 'down' for all of that time: an answer to some other call (one sent
 * before the failure, a renewal) does not make it 'ok' while decisions still skip it, so 'ok' always
 * means decisions go to the store.
 */
export class HealthState {
  #down = false;
  #sinceMs = Date.now();
  #lastError: StoreHealth['lastError'];
  /** Date.now() before which decisions skip the store; 0 when they do not (no clock is read then). */
  #skipUntil = 0;

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

  /** A decision's store call failed: 'down', and decisions skip the store for `retryMs`. */
  skipFor(error: unknown, retryMs: number): void {
    this.failed(error);
    this.#skipUntil = Date.now() + retryMs;
  }

  /** False while decisions skip the store (a decision's call failed less than the retry interval ago). */
  get usable(): boolean {
    return this.#skipUntil === 0 || Date.now() >= this.#skipUntil;
  }

  /** A store call succeeded: 'ok' again, unless decisions still skip the store. Cheap enough for every decision. */
  succeeded(): void {
    if (!this.#down || !this.usable) return;
    this.#down = false;
    this.#skipUntil = 0;
    this.#sinceMs = Date.now();
  }

  /** The store answered a probe made now (`health()`'s ping): decisions go to it again at once, and it is 'ok'. */
  recovered(): void {
    this.#skipUntil = 0;
    this.succeeded();
  }

  snapshot(): StoreHealth {
    const health: StoreHealth = { state: this.#down ? 'down' : 'ok', sinceMs: this.#sinceMs };
    if (this.#lastError !== undefined) health.lastError = { ...this.#lastError };
    return health;
  }
}
