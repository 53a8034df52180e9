// Waiting for a turn (`limiter.acquire`, `wrap` with `maxWait`): per key, first come first served within
// a process; every try is a real decision of the store, so across processes nothing is ever admitted
// that `check` would not admit. A wait on a concurrency rule ends when a slot of its key frees (`freed`).
import { RateLimitExceededError, RateLimitRequestError } from '../errors.js';
import type { Decision } from '../types.js';

/** One try: the rules decided together on the key at this cost (a `check`). */
export type Attempt = (cost: number) => Promise<Decision>;

/** Why a denial can never turn into an admission (a cost above what a rule holds), or undefined. */
export type NeverFits = (decision: Decision, cost: number) => Error | undefined;

/** One call waiting for its turn. */
export interface Turn {
  /** The queue it joins: one per rules and key. */
  readonly id: string;
  /** Who waits, for errors: `acquire on rule "api" for key 'k'`. */
  readonly label: string;
  readonly cost: number;
  readonly maxWaitMs: number;
  readonly signal: AbortSignal | undefined;
  /** Most waiters the queue may hold; this call is refused when it already holds as many. */
  readonly maxQueue: number;
  readonly attempt: Attempt;
  readonly neverFits: NeverFits;
  /** The key the rules are decided on (for `freed`). */
  readonly key: string;
  /**
   * The names of its concurrency rules: a denial by them alone ends whenever a slot frees, at any time,
   * so the wait is woken by `freed` (and bounded by `maxWait`), not refused at once.
   */
  readonly slotRules: readonly string[];
}

/** The clock and timers the queues sleep on (a test gives its own). */
export interface Timers {
  now(): number;
  setTimeout(fn: () => void, ms: number): unknown;
  clearTimeout(timer: unknown): void;
}

/**
 * The longest delay a Node timer takes: a longer one fires after 1 ms (with a
 * TimeoutOverflowWarning), so a sleep until a month-long window frees would spin on the store.
 */
export const MAX_TIMER_MS = 2 ** 31 - 1;

const SYSTEM_TIMERS: Timers = {
  now: Date.now,
  setTimeout: (fn, ms) => setTimeout(fn, ms),
  clearTimeout: (timer) => clearTimeout(timer as ReturnType<typeof setTimeout>),
};

interface Waiter {
  readonly cost: number;
  /** now() after which an admission is too late (Infinity: no bound). */
  readonly deadline: number;
  readonly signal: AbortSignal | undefined;
  readonly resolve: (decision: Decision) => void;
  readonly reject: (error: unknown) => void;
  readonly onAbort: () => void;
  settled: boolean;
  /** Its try is with the store: an abort now waits for the answer. */
  trying: boolean;
  abortLater: boolean;
}

interface Queue {
  /** In arrival order; a waiter leaves as soon as it settles, so an aborted one holds no memory. */
  readonly waiters: Set<Waiter>;
  /** Ends the head's sleep early (it was aborted); undefined while nobody sleeps. */
  wake: (() => void) | undefined;
  /** now() at which the sleeping head tries again; 0 while nobody sleeps. */
  wakeAt: number;
  /** The denial the head sleeps on. */
  denial: Decision | undefined;
  /** The head sleeps on concurrency rules alone: `freed` ends its sleep, and its wait has no known end. */
  wakeable: boolean;
  /** Re-arms the sleeping head's timer for a waiter that joined (its deadline may come first). */
  rearm: (() => void) | undefined;
  /** A slot of its rules and key freed while the head's try was with the store: try again at once if denied. */
  freed: boolean;
  /** Its entries in TurnQueues#watching (`rule\0key` of each concurrency rule). */
  readonly watches: readonly string[];
  readonly slotRules: ReadonlySet<string>;
}

/** The waiters of one limiter, one queue per rules and key; a queue and its one timer exist only while someone waits. */
export class TurnQueues {
  readonly #queues = new Map<string, Queue>();
  /** The queues waiting on each concurrency rule and key (`rule\0key`). */
  readonly #watching = new Map<string, Set<Queue>>();
  readonly #timers: Timers;
  /** Called once, when a head first sleeps on a concurrency rule: frees from other processes are wanted. */
  #onSlotWait: (() => void) | undefined;
  /** Where other processes' frees go unheard (`StoreLiveness.staleAfterMs`): the longest a head sleeps on a slot. */
  readonly #slotPollMs: number;
  #closed = false;

  constructor(timers: Timers = SYSTEM_TIMERS, onSlotWait?: () => void, slotPollMs?: number) {
    this.#timers = timers;
    this.#onSlotWait = onSlotWait;
    this.#slotPollMs = slotPollMs ?? Number.POSITIVE_INFINITY;
  }

  /**
   * Slots of `rule` for `key` were freed (a release, a lapse, a reset): every queue waiting on them tries
   * again now (its head only: one try per queue, whatever the number of waiters). `('', '')`: frees may
   * have been missed, every queue waiting on a concurrency rule tries again.
   */
  freed(rule: string, key: string): void {
    // No call waits for a slot (the usual case, told on every release): no id to build and look up.
    if (this.#watching.size === 0) return;
    if (rule === '') {
      for (const queues of this.#watching.values()) for (const q of queues) wakeFreed(q);
      return;
    }
    const queues = this.#watching.get(watchId(rule, key));
    if (queues !== undefined) for (const q of queues) wakeFreed(q);
  }

  /**
   * Resolves with the admitting decision once a try is admitted. Rejects with `RateLimitExceededError`
   * when the earliest admission is later than `maxWaitMs` (at once, without waiting), with the
   * signal's reason on abort, with `RateLimitRequestError` (`ERR_QUEUE_FULL`) when `maxQueue` calls
   * already wait, and with the store's or `neverFits`'s error.
   */
  take(turn: Turn): Promise<Decision> {
    return new Promise<Decision>((resolve, reject) => {
      const { signal } = turn;
      if (this.#closed) return reject(closedError());
      if (signal?.aborted) return reject(signal.reason);
      let queue = this.#queues.get(turn.id);
      const deadline = this.#timers.now() + turn.maxWaitMs;
      // Behind a head that sleeps past this deadline: it cannot be served in time (unless a free may wake it).
      if (queue?.denial !== undefined && !queue.wakeable && queue.wakeAt > deadline)
        return reject(new RateLimitExceededError(queue.denial, queue.wakeAt - this.#timers.now()));
      if (queue !== undefined && queue.waiters.size >= turn.maxQueue) return reject(queueFull(turn, queue));
      const fresh = queue === undefined;
      queue ??= {
        waiters: new Set(),
        wake: undefined,
        wakeAt: 0,
        denial: undefined,
        wakeable: false,
        rearm: undefined,
        freed: false,
        watches: turn.slotRules.map((rule) => watchId(rule, turn.key)),
        slotRules: new Set(turn.slotRules),
      };
      const q = queue;
      const waiter: Waiter = {
        cost: turn.cost,
        deadline,
        signal,
        resolve,
        reject,
        onAbort: () => this.#abort(q, waiter),
        settled: false,
        trying: false,
        abortLater: false,
      };
      if (signal !== undefined) listenAbort(signal, waiter.onAbort);
      q.waiters.add(waiter);
      if (q.wakeable) q.rearm?.();
      if (fresh) {
        this.#queues.set(turn.id, q);
        for (const id of q.watches) {
          const queues = this.#watching.get(id);
          if (queues === undefined) this.#watching.set(id, new Set([q]));
          else queues.add(q);
        }
        void this.#serve(turn.id, q, turn.attempt, turn.neverFits);
      }
    });
  }

  /** Serves a queue head first until it is empty, then forgets it. */
  async #serve(id: string, q: Queue, attempt: Attempt, neverFits: NeverFits): Promise<void> {
    for (let w = first(q); w !== undefined; w = first(q)) {
      w.trying = true;
      q.freed = false;
      let decision: Decision;
      try {
        decision = await attempt(w.cost);
      } catch (error) {
        w.trying = false;
        finish(q, w, () => w.reject(error));
        continue;
      }
      w.trying = false;
      // Settled while its try was out (the limiter closed): nothing to sleep for.
      if (w.settled) continue;
      // An abort during the try gives way to an admission: the turn was taken.
      if (decision.allowed) finish(q, w, () => w.resolve(decision));
      else if (w.abortLater) finish(q, w, () => w.reject(w.signal?.reason));
      else {
        const never = neverFits(decision, w.cost);
        const now = this.#timers.now();
        const windowMs = windowWait(decision, q.slotRules);
        if (never !== undefined) finish(q, w, () => w.reject(never));
        else if (windowMs === undefined) {
          // Only concurrency rules deny: a slot may free at any time (a release), and at the latest when
          // the soonest lease ends (its holder stopped renewing). A free heard during the try: try again.
          if (q.freed) continue;
          if (now >= w.deadline) finish(q, w, () => w.reject(new RateLimitExceededError(decision)));
          else {
            this.#slotWait();
            const sleepMs = Math.min(decision.retryAfterMs ?? 1, this.#slotPollMs);
            await this.#sleep(q, decision, now + sleepMs, true);
          }
        } else if (now + windowMs > w.deadline)
          finish(q, w, () => w.reject(new RateLimitExceededError(decision, windowMs)));
        else await this.#sleep(q, decision, now + windowMs, false);
      }
    }
    this.#queues.delete(id);
    for (const watch of q.watches) {
      const queues = this.#watching.get(watch);
      queues?.delete(q);
      if (queues?.size === 0) this.#watching.delete(watch);
    }
  }

  #slotWait(): void {
    const listen = this.#onSlotWait;
    this.#onSlotWait = undefined;
    listen?.();
  }

  /**
   * The head sleeps until `wakeAt` (a retry time), or, `wakeable`, until `freed` wakes it or its own
   * deadline comes. Those behind it whose deadline comes first are refused: at once when the head's
   * wait has a known end (`wakeAt`), else as each deadline passes.
   */
  #sleep(q: Queue, denial: Decision, wakeAt: number, wakeable: boolean): Promise<void> {
    const timers = this.#timers;
    const head = first(q) as Waiter;
    const refuse = (other: Waiter) =>
      finish(q, other, () =>
        other.reject(new RateLimitExceededError(denial, Math.max(1, wakeAt - timers.now()))),
      );
    if (!wakeable)
      for (const other of q.waiters) if (other !== head && wakeAt > other.deadline) refuse(other);
    // A wakeable head retries at its deadline at the latest (one last try, refused if denied).
    const until = wakeable ? Math.min(wakeAt, head.deadline) : wakeAt;
    q.denial = denial;
    q.wakeAt = wakeAt;
    q.wakeable = wakeable;
    return new Promise<void>((resume) => {
      let timer: unknown;
      let over = false;
      const done = () => {
        if (over) return;
        over = true;
        timers.clearTimeout(timer);
        q.wake = undefined;
        q.rearm = undefined;
        q.wakeAt = 0;
        q.denial = undefined;
        q.wakeable = false;
        resume();
      };
      // Armed for the next of: the retry time, the earliest deadline behind the head (refused then); a
      // time beyond the longest timer is reached in steps, each re-armed for what is left.
      const arm = () => {
        if (over) return;
        timers.clearTimeout(timer);
        const now = timers.now();
        let next = until;
        for (const other of q.waiters) {
          if (other === head) continue;
          if (other.deadline <= now) refuse(other);
          else if (other.deadline < next) next = other.deadline;
        }
        if (now >= until) return done();
        timer = timers.setTimeout(arm, Math.min(next - now, MAX_TIMER_MS));
      };
      q.wake = done;
      if (wakeable) q.rearm = arm;
      arm();
    });
  }

  /** The limiter closes: every waiter rejects, sleeping heads wake (their timers cleared), new calls reject. */
  close(): void {
    this.#closed = true;
    for (const q of this.#queues.values()) {
      for (const w of q.waiters) finish(q, w, () => w.reject(closedError()));
      q.wake?.();
    }
  }

  #abort(q: Queue, w: Waiter): void {
    if (w.settled) return;
    if (w.trying) {
      w.abortLater = true;
      return;
    }
    const head = first(q) === w;
    finish(q, w, () => w.reject(w.signal?.reason));
    if (head) q.wake?.();
  }
}

function closedError(): Error {
  return new Error('ratekeeper: the limiter was closed while this call waited for its turn');
}

function queueFull(turn: Turn, q: Queue): Error {
  return new RateLimitRequestError(
    'ERR_QUEUE_FULL',
    `${turn.label}: ${q.waiters.size} calls already wait for their turn, the most maxQueue allows; nothing was consumed`,
  );
}

function watchId(rule: string, key: string): string {
  return `${rule}\u0000${key}`;
}

/** A free for the queue: a sleeping head on concurrency rules tries again now, a trying one once it is denied. */
function wakeFreed(q: Queue): void {
  q.freed = true;
  if (q.wakeable) q.wake?.();
}

/**
 * How long the rules other than `slotRules` (windows) keep denying: the longest retry time among them
 * (at least 1 ms); undefined when only concurrency rules deny, whose slots may free at any time.
 */
function windowWait(decision: Decision, slotRules: ReadonlySet<string>): number | undefined {
  let wait: number | undefined;
  for (const r of decision.rules) {
    if (r.allowed || r.dryRun || slotRules.has(r.rule)) continue;
    wait = Math.max(wait ?? 1, r.retryAfterMs ?? 1);
  }
  // A decision that denies through no rule result (none matched, an error policy): its own retry time.
  if (wait === undefined && !decision.rules.some((r) => !r.allowed && !r.dryRun))
    return decision.retryAfterMs ?? 1;
  return wait;
}

/**
 * The waiters' abort handlers of each signal, behind one listener per signal: one signal shared by many
 * waiting calls (a shutdown signal given to `wrap`) would otherwise hold one listener per call, and Node
 * warns (MaxListenersExceededWarning) past 10.
 */
const onAborts = new WeakMap<AbortSignal, { handlers: Set<() => void>; listener: () => void }>();

function listenAbort(signal: AbortSignal, handler: () => void): void {
  let entry = onAborts.get(signal);
  if (entry === undefined) {
    const handlers = new Set<() => void>();
    const listener = () => {
      onAborts.delete(signal);
      for (const h of [...handlers]) h();
    };
    entry = { handlers, listener };
    onAborts.set(signal, entry);
    signal.addEventListener('abort', listener, { once: true });
  }
  entry.handlers.add(handler);
}

function unlistenAbort(signal: AbortSignal, handler: () => void): void {
  const entry = onAborts.get(signal);
  if (entry === undefined || !entry.handlers.delete(handler) || entry.handlers.size > 0) return;
  onAborts.delete(signal);
  signal.removeEventListener('abort', entry.listener);
}

/** The waiter whose turn it is. */
function first(q: Queue): Waiter | undefined {
  return q.waiters.values().next().value;
}

/** Settles a waiter once, letting go of its signal and of its place in the queue. */
function finish(q: Queue, w: Waiter, settle: () => void): void {
  if (w.settled) return;
  w.settled = true;
  q.waiters.delete(w);
  if (w.signal !== undefined) unlistenAbort(w.signal, w.onAbort);
  settle();
}
