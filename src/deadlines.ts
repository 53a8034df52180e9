// Store-call deadlines: one shared, unref'd ticker instead of a timer per call.
import { performance } from 'node:perf_hooks';

/** How often pending calls are checked: a call fails at most this long (plus event-loop lag) after its deadline. */
export const DEADLINE_TICK_MS = 10;

interface Pending {
  readonly atMs: number;
  readonly reject: (error: Error) => void;
}

/**
 * Races store calls against a fixed time limit. Calls are checked every `DEADLINE_TICK_MS` by one
 * timer, started when the first call is pending and stopped once none is; the timer never holds the
 * process open. Every call has the same limit, so calls are pending in deadline order and a check
 * stops at the first one still in time.
 */
export class Deadlines {
  readonly #limitMs: number;
  readonly #timeout: (limitMs: number) => Error;
  readonly #pending = new Set<Pending>();
  #timer: NodeJS.Timeout | undefined;

  /** `timeout` builds the error a late call is rejected with. */
  constructor(limitMs: number, timeout: (limitMs: number) => Error) {
    this.#limitMs = limitMs;
    this.#timeout = timeout;
  }

  /** Settles as `promise` does, or rejects once the time limit has passed. */
  race<T>(promise: Promise<T>): Promise<T> {
    return new Promise<T>((resolve, reject) => {
      const call: Pending = { atMs: performance.now() + this.#limitMs, reject };
      this.#pending.add(call);
      if (this.#timer === undefined) {
        this.#timer = setInterval(() => this.#check(), DEADLINE_TICK_MS);
        this.#timer.unref();
      }
      promise.then(
        (value) => {
          this.#pending.delete(call);
          resolve(value);
        },
        (error: unknown) => {
          this.#pending.delete(call);
          reject(error);
        },
      );
    });
  }

  #check(): void {
    if (this.#pending.size === 0) {
      clearInterval(this.#timer);
      this.#timer = undefined;
      return;
    }
    const nowMs = performance.now();
    for (const call of this.#pending) {
      if (call.atMs > nowMs) return;
      this.#pending.delete(call);
      call.reject(this.#timeout(this.#limitMs));
    }
  }
}
