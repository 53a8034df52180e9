// The PostgreSQL store's time: the server's clock (the functions read clock_timestamp(); this process keeps its offset) or an injected one.
import type { PoolCalls } from './pool.js';

/**
 * Decisions are made on the database server's own clock, so every process agrees. This process also
 * needs the time between calls (the limiter computes calendar periods on it): the local clock plus the
 * offset to the server's, read again every `syncIntervalMs`, taken as small as the reply allows (as if
 * the server read its clock just as the reply arrived), so this clock is never ahead of the server's and
 * a decision runs at or after the time its calendar periods were computed for. An injected clock
 * replaces both (tests), and is sent with every call.
 */
export class PostgresClock {
  readonly #calls: PoolCalls;
  readonly #injected: (() => number) | undefined;
  readonly #timer: NodeJS.Timeout | undefined;
  #offsetMs = 0;
  /** Last time handed out: the store's clock never runs backwards. */
  #lastNow = 0;

  constructor(calls: PoolCalls, injected: (() => number) | undefined, syncIntervalMs: number) {
    this.#calls = calls;
    this.#injected = injected;
    if (injected === undefined) {
      this.#timer = setInterval(() => void this.sync(), syncIntervalMs);
      this.#timer.unref();
    }
  }

  now(): number {
    const now = this.#injected !== undefined ? this.#injected() : Date.now() + this.#offsetMs;
    if (now > this.#lastNow) this.#lastNow = now;
    return this.#lastNow;
  }

  /** The time a call decides at: the injected clock's now, or null for the server's clock_timestamp(). */
  callTime(): number | null {
    return this.#injected !== undefined ? this.now() : null;
  }

  /** Reads the server's clock (once at the store's first use, then on the timer). Failures keep the last offset. */
  async sync(): Promise<void> {
    if (this.#injected !== undefined) return;
    try {
      const rows = await this.#calls.query({
        text: 'SELECT floor(extract(epoch FROM clock_timestamp()) * 1000)::float8',
        rowMode: 'array',
      });
      const arrived = Date.now() + 1;
      const serverMs = (rows[0] as [number])[0];
      this.#offsetMs = Math.floor(serverMs - arrived);
    } catch {
      // Until then the local clock plus the last offset stands in.
    }
  }

  stop(): void {
    if (this.#timer !== undefined) clearInterval(this.#timer);
  }
}
