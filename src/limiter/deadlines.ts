// Store-call deadlines: one shared, unref'd ticker instead of a timer per call.
import { performance } from 'node:perf_hooks';

/** How often pending calls are checked: a call fails at most this long (plus event-loop lag) after its deadline. */
export const DEADLINE_TICK_MS = 10;

/** A call in flight, linked into the pending list (oldest first). */
interface TimedCall {
  readonly atMs: number;
  readonly reject: (error: Error) => void;
  prev: TimedCall | undefined;
  next: TimedCall | undefined;
  listed: boolean;
}

/**
 * Races store calls against a fixed time limit. Calls are checked every `DEADLINE_TICK_MS` by one
 * timer, started when the first call is pending and stopped once none is; the timer never holds the
 * process open. Every call has the same limit, so the pending list is in deadline order and a check
 * stops at the first call still in time. A linked list, not a Set: adding and removing a call
 * allocate nothing and hash nothing.
 */
export class Deadlines {
  readonly #limitMs: number;
  readonly #timeout: (limitMs: number) => Error;
  #head: TimedCall | undefined;
  #tail: TimedCall | undefined;
  #timer: NodeJS.Timeout | undefined;

  /** `timeout` builds the error a late call is rejected with. */
  constructor(limitMs: number, timeout: (limitMs: number) => Error) {
    this.#limitMs = limitMs;
    this.#timeout = timeout;
  }

  /** Settles as `promise` does, or rejects once the time limit has passed. */
  race<T>(promise: Promise<T>): Promise<T> {
    return new Promise<T>((resolve, reject) => {
      const call: TimedCall = {
        atMs: performance.now() + this.#limitMs,
        reject,
        prev: this.#tail,
        next: undefined,
        listed: true,
      };
      if (this.#tail === undefined) this.#head = call;
      else this.#tail.next = call;
      this.#tail = call;
      if (this.#timer === undefined) {
        this.#timer = setInterval(() => this.#check(), DEADLINE_TICK_MS);
        this.#timer.unref();
      }
      promise.then(
        (value) => {
          this.#unlink(call);
          resolve(value);
        },
        (error: unknown) => {
          this.#unlink(call);
          reject(error);
        },
      );
    });
  }

  #unlink(call: TimedCall): void {
    if (!call.listed) return;
    call.listed = false;
    if (call.prev === undefined) this.#head = call.next;
    else call.prev.next = call.next;
    if (call.next === undefined) this.#tail = call.prev;
    else call.next.prev = call.prev;
    call.prev = undefined;
    call.next = undefined;
  }

  #check(): void {
    if (this.#head === undefined) {
      clearInterval(this.#timer);
      this.#timer = undefined;
      return;
    }
    const nowMs = performance.now();
    const late: TimedCall[] = [];
    for (let call = this.#head; call !== undefined && call.atMs <= nowMs; call = this.#head) {
      this.#unlink(call);
      late.push(call);
    }
    if (late.length === 0) return;
    // Rejected after the other timers due now: a store's own timeout of the same length (ioredis's
    // commandTimeout) then answers first, with its own error; a call it settled ignores this one.
    setImmediate(() => {
      for (const call of late) call.reject(this.#timeout(this.#limitMs));
    });
  }
}
