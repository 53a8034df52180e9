// Store-call deadlines: one shared, unref'd ticker instead of a timer per call, and the rule that tells a
// slow store from a failed one.

import type { ConnectionLiveness } from '../stores/store.js';
import { unrefTimer } from '../timers.js';

/** What settles a timed call: the first of `resolve` or `reject` wins. */
interface Settler<T> {
  resolve(value: T): void;
  reject(error: unknown): void;
}

/** How often pending calls are checked: a call fails at most this long (plus event-loop lag) after its deadline. */
export const DEADLINE_TICK_MS = 10;

/**
 * The most a store's silence grows between two checks. Checks come every `DEADLINE_TICK_MS` while this
 * process gets the CPU; when they come later, the cores are oversubscribed (or this process is busy),
 * and a store on the same cores is held up alike: its silence then grows on this process's own pace.
 */
const MAX_SILENCE_STEP_MS = 2 * DEADLINE_TICK_MS;

/**
 * The clock and ticker a `Deadlines` runs on: `performance.now()` and an unref'd interval in production;
 * a test passes its own to step time and run the checks itself.
 */
export interface DeadlineClock {
  /** Milliseconds on a monotonic clock, the one `ConnectionLiveness.silentSinceMs()` reads. */
  now(): number;
  /** Calls `tick` every `DEADLINE_TICK_MS` until the returned function is called; never holds the process open. */
  every(tick: () => void): () => void;
}

const realClock: DeadlineClock = {
  now: () => performance.now(),
  every(tick) {
    const timer = setInterval(tick, DEADLINE_TICK_MS);
    unrefTimer(timer);
    return () => clearInterval(timer);
  },
};

/**
 * A call in flight, linked into the pending list (oldest first), and what settles its promise: settled
 * (by the store, or rejected by a check), it leaves the list. The first settle wins.
 */
interface Pending {
  readonly startMs: number;
  prev: Pending | undefined;
  next: Pending | undefined;
  listed: boolean;
  reject(error: unknown): void;
}

/** Told once how a call ended: `failed` and its error, or not. */
export type AfterCall = (failed: boolean, error: unknown) => void;

class TimedCall<T> implements Settler<T>, Pending {
  readonly startMs: number;
  prev: Pending | undefined;
  next: Pending | undefined = undefined;
  listed = true;
  #settled = false;
  readonly #deadlines: Deadlines;
  readonly #resolve: (value: T) => void;
  readonly #reject: (error: unknown) => void;
  readonly #after: AfterCall | undefined;

  constructor(
    deadlines: Deadlines,
    startMs: number,
    prev: Pending | undefined,
    resolve: (value: T) => void,
    reject: (error: unknown) => void,
    after: AfterCall | undefined,
  ) {
    this.#deadlines = deadlines;
    this.startMs = startMs;
    this.prev = prev;
    this.#resolve = resolve;
    this.#reject = reject;
    this.#after = after;
  }

  resolve(value: T): void {
    if (this.#settled) return;
    this.#settled = true;
    if (this.listed) this.#deadlines.unlink(this);
    this.#after?.(false, undefined);
    this.#resolve(value);
  }

  reject(error: unknown): void {
    if (this.#settled) return;
    this.#settled = true;
    if (this.listed) this.#deadlines.unlink(this);
    this.#after?.(true, error);
    this.#reject(error);
  }
}

/** The errors a late call is rejected with. */
export interface LateErrors {
  /** The store answered nothing for `silentMs` (without liveness: did not answer this call). */
  silent(silentMs: number): Error;
  /** The store kept answering other calls (or was still connecting: `connecting`), but not this one within `maxWaitMs`. */
  slow(maxWaitMs: number, connecting: boolean): Error;
}

/**
 * Races store calls against two limits. A call fails once it has waited `silentMs` while the store has
 * been silent that long too: calls were outstanding and none was answered (a stopped server, a dead
 * connection). A store that keeps answering is working through this process's calls, so a call behind
 * them waits its turn, up to `maxWaitMs`; so does a call waiting for the store's first connection. A
 * call still inside this process (in a batch not yet sent) is never the store's silence. Without
 * liveness every call fails `silentMs` after it was made.
 *
 * Calls are checked every `DEADLINE_TICK_MS` by one timer, started when the first call is pending and
 * stopped once none is; the timer never holds the process open. The check itself runs once the event
 * loop has read the sockets (setImmediate), so that replies that arrived while this process was busy
 * count before any call is given up on. Both limits grow with a call's age, so the pending list is in
 * deadline order and a check stops at the first call still in time. A linked list, not a Set: adding
 * and removing a call allocate nothing and hash nothing.
 */
export class Deadlines {
  readonly #silentMs: number;
  readonly #maxWaitMs: number;
  readonly #liveness: ConnectionLiveness | undefined;
  readonly #errors: LateErrors;
  readonly #clock: DeadlineClock;
  #head: Pending | undefined;
  #tail: Pending | undefined;
  /** Stops the ticker; undefined while it is not running. */
  #stopTicker: (() => void) | undefined;
  #checkQueued = false;
  /** The clock's time at the last check. */
  #checkedMs = 0;
  /** What `liveness.silentSinceMs()` said at the last check: a change starts a new silence. */
  #silenceFrom: number | undefined;
  /** How long the store has been silent, grown check by check by at most MAX_SILENCE_STEP_MS. */
  #silenceMs = 0;

  constructor(
    silentMs: number,
    maxWaitMs: number,
    liveness: ConnectionLiveness | undefined,
    errors: LateErrors,
    clock: DeadlineClock = realClock,
  ) {
    this.#silentMs = silentMs;
    this.#maxWaitMs = Math.max(maxWaitMs, silentMs);
    this.#liveness = liveness;
    this.#errors = errors;
    this.#clock = clock;
  }

  /** Settles as `promise` does, or rejects once the store was silent, or this call waited, too long. */
  race<T>(promise: Promise<T>): Promise<T> {
    return this.start<T>((call) => {
      promise.then(
        (value) => call.resolve(value),
        (error: unknown) => call.reject(error),
      );
    });
  }

  /**
   * A call that `send` makes, settling the settler it is given: settles as `send` settles it, or rejects
   * as `race` does. A throw from `send` rejects it. `after` is told how it ended, once, before the
   * promise settles.
   */
  start<T>(send: (into: Settler<T>) => void, after?: AfterCall): Promise<T> {
    return new Promise<T>((resolve, reject) => {
      const call = new TimedCall<T>(this, this.#clock.now(), this.#tail, resolve, reject, after);
      if (this.#tail === undefined) this.#head = call;
      else this.#tail.next = call;
      this.#tail = call;
      if (this.#stopTicker === undefined) this.#stopTicker = this.#clock.every(this.#queueCheck);
      try {
        send(call);
      } catch (error) {
        call.reject(error);
      }
    });
  }

  /** Takes a settled (or given up) call out of the pending list; TimedCall's own. */
  unlink(call: Pending): void {
    call.listed = false;
    if (call.prev === undefined) this.#head = call.next;
    else call.prev.next = call.next;
    if (call.next === undefined) this.#tail = call.prev;
    else call.next.prev = call.prev;
    call.prev = undefined;
    call.next = undefined;
  }

  /**
   * The check runs after the timers due now and after the sockets were read: a store's own timeout
   * (ioredis's commandTimeout) answers first with its own error, and replies this process had not read
   * yet settle their calls (and show the store alive) before any call is given up on.
   */
  readonly #queueCheck = (): void => {
    if (this.#checkQueued) return;
    this.#checkQueued = true;
    setImmediate(this.#check);
  };

  readonly #check = (): void => {
    this.#checkQueued = false;
    this.check();
  };

  /**
   * One check of the pending calls, as the ticker runs it: rejects those past their limit, and stops the
   * ticker once no call is pending. Public so that a test on its own clock can run the checks itself.
   */
  check(): void {
    if (this.#head === undefined) {
      this.#stopTicker?.();
      this.#stopTicker = undefined;
      return;
    }
    const nowMs = this.#clock.now();
    const liveness = this.#liveness;
    const silent = liveness === undefined || this.#silence(liveness, nowMs) >= this.#silentMs;
    const connecting = liveness?.connecting() !== undefined;
    const late: Array<{ call: Pending; error: Error }> = [];
    for (let call = this.#head; call !== undefined; call = this.#head) {
      const waitedMs = nowMs - call.startMs;
      let error: Error;
      if (silent && waitedMs >= this.#silentMs) error = this.#errors.silent(this.#silentMs);
      else if (waitedMs >= this.#maxWaitMs) error = this.#errors.slow(this.#maxWaitMs, connecting);
      else break;
      this.unlink(call);
      late.push({ call, error });
    }
    for (const { call, error } of late) call.reject(error);
  }

  /**
   * How long the store has been silent as of this check: 0 while it makes its first connection or has
   * nothing outstanding; else the time since its last answer, grown by at most MAX_SILENCE_STEP_MS per
   * check, so that the silence of a store starved of CPU with this process is not read as a failure.
   */
  #silence(liveness: ConnectionLiveness, nowMs: number): number {
    const sinceMs = liveness.connecting() === undefined ? liveness.silentSinceMs() : undefined;
    const stepMs = Math.min(nowMs - this.#checkedMs, MAX_SILENCE_STEP_MS);
    this.#checkedMs = nowMs;
    if (sinceMs === undefined) {
      this.#silenceFrom = undefined;
      this.#silenceMs = 0;
    } else if (sinceMs !== this.#silenceFrom) {
      this.#silenceFrom = sinceMs;
      this.#silenceMs = Math.min(nowMs - sinceMs, stepMs);
    } else {
      this.#silenceMs += stepMs;
    }
    return this.#silenceMs;
  }
}
