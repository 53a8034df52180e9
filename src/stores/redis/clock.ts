// The Redis store's time: the server's clock (scripts read TIME; this process keeps its offset) or an injected one.
import type { RedisConnection } from './connection/connection.js';
import { type ScriptTime, SERVER_TIME } from './op-text.js';

/**
 * Scripts decide on the Redis server's own clock, so every process agrees. This process also needs the
 * time between script calls (calendar periods are computed here): the local clock plus the offset to
 * the server's, read again every `syncIntervalMs`. The offset is the smallest the TIME reply allows
 * (as if the server read its clock just as the reply arrived), so once a TIME has answered this clock
 * is not ahead of the server's: a script runs at or after the time the calendar periods it was sent
 * were computed for, and picks between this period's end and the next one's correctly (a midpoint
 * estimate could be ahead by half a round trip, and a request decided in the last ms of a period was
 * then counted in the next). An injected clock replaces both (tests).
 */
export class RedisClock {
  readonly #connection: RedisConnection;
  readonly #injected: (() => number) | undefined;
  readonly #timer: NodeJS.Timeout | undefined;
  /** Server time minus local time, ms, from the last TIME. */
  #offsetMs = 0;
  /** Last time handed out: the store's clock never runs backwards. */
  #lastNow = 0;

  constructor(connection: RedisConnection, injected: (() => number) | undefined, syncIntervalMs: number) {
    this.#connection = connection;
    this.#injected = injected;
    if (injected === undefined) {
      void this.#sync();
      this.#timer = setInterval(() => void this.#sync(), syncIntervalMs);
      this.#timer.unref();
    }
  }

  /** The store's current time, epoch ms. */
  now(): number {
    const now = this.#injected !== undefined ? this.#injected() : Date.now() + this.#offsetMs;
    if (now > this.#lastNow) this.#lastNow = now;
    return this.#lastNow;
  }

  /** The time a script call decides at: the injected clock's now, or the server's own TIME. */
  scriptTime(): ScriptTime {
    return this.#injected !== undefined ? this.now() : SERVER_TIME;
  }

  stop(): void {
    if (this.#timer !== undefined) clearInterval(this.#timer);
  }

  /** Reads the server's clock. Failures keep the last offset: the next sync tries again. */
  async #sync(): Promise<void> {
    try {
      const reply = await this.#connection.send('TIME', []);
      // The server read its clock before its reply arrived: before the end of this ms (Date.now() rounds
      // down). A request or reply that waited (a stalled server, a busy event loop) only puts this clock
      // further behind the server's, never ahead of it.
      const arrived = Date.now() + 1;
      const [seconds, micros] = reply as [string, string];
      this.#offsetMs = Math.floor(Number(seconds) * 1000 + Number(micros) / 1000 - arrived);
    } catch {
      // Until then the local clock plus the last offset stands in.
    }
  }
}

/** The time a script call decided at: `time` itself when injected, else the server's time it replied. */
export function decidedAt(time: ScriptTime, serverMs: number): number {
  return time === SERVER_TIME ? serverMs : time;
}
