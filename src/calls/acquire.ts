// Waiting for a turn (`limiter.acquire`, `wrap` with `wait`): per key, first come first served within a
// process; every try is a real decision of the store, so across processes nothing is ever admitted
// that `check` would not admit.
import { RateLimitConfigError, RateLimitExceededError, RateLimitRequestError } from '../errors.js';
import type { CompiledRule } from '../rules/compile.js';
import type { Decision } from '../types.js';

/** One try: the rules decided together on the key at this cost (a `check`). */
export type Attempt = (cost: number) => Promise<Decision>;

/** Why a denial can never turn into an admission (a cost above what a rule holds), or undefined. */
export type NeverFits = (decision: Decision, cost: number) => Error | undefined;

interface Waiter {
  readonly cost: number;
  /** Date.now() after which an admission is too late (Infinity: no bound). */
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
  readonly waiters: Waiter[];
  /** Ends the head's sleep early (it was aborted); undefined while nobody sleeps. */
  wake: (() => void) | undefined;
  /** Date.now() at which the sleeping head tries again; 0 while nobody sleeps. */
  wakeAt: number;
  /** The denial the head sleeps on. */
  denial: Decision | undefined;
}

/** The waiters of one limiter, one queue per rules and key; a queue and its one timer exist only while someone waits. */
export class TurnQueues {
  readonly #queues = new Map<string, Queue>();
  #closed = false;

  /**
   * Resolves with the admitting decision once a try is admitted. Rejects with `RateLimitExceededError`
   * when the earliest admission is later than `maxWaitMs` (at once, without waiting), with the
   * signal's reason on abort, and with the store's or `neverFits`'s error.
   */
  take(
    id: string,
    cost: number,
    maxWaitMs: number,
    signal: AbortSignal | undefined,
    attempt: Attempt,
    neverFits: NeverFits,
  ): Promise<Decision> {
    return new Promise<Decision>((resolve, reject) => {
      if (this.#closed) return reject(closedError());
      if (signal?.aborted) return reject(signal.reason);
      let queue = this.#queues.get(id);
      const deadline = Date.now() + maxWaitMs;
      // Behind a head that sleeps past this deadline: it cannot be served in time.
      if (queue?.denial !== undefined && queue.wakeAt > deadline)
        return reject(new RateLimitExceededError(queue.denial, queue.wakeAt - Date.now()));
      const fresh = queue === undefined;
      queue ??= { waiters: [], wake: undefined, wakeAt: 0, denial: undefined };
      const q = queue;
      const waiter: Waiter = {
        cost,
        deadline,
        signal,
        resolve,
        reject,
        onAbort: () => this.#abort(q, waiter),
        settled: false,
        trying: false,
        abortLater: false,
      };
      signal?.addEventListener('abort', waiter.onAbort, { once: true });
      q.waiters.push(waiter);
      if (fresh) {
        this.#queues.set(id, q);
        void this.#serve(id, q, attempt, neverFits);
      }
    });
  }

  /** Serves a queue head first until it is empty, then forgets it. */
  async #serve(id: string, q: Queue, attempt: Attempt, neverFits: NeverFits): Promise<void> {
    while (q.waiters.length > 0) {
      const w = q.waiters[0] as Waiter;
      if (w.settled) {
        q.waiters.shift();
        continue;
      }
      w.trying = true;
      let decision: Decision;
      try {
        decision = await attempt(w.cost);
      } catch (error) {
        finish(w, () => w.reject(error));
        continue;
      } finally {
        w.trying = false;
      }
      // An abort during the try gives way to an admission: the turn was taken.
      if (decision.allowed) finish(w, () => w.resolve(decision));
      else if (w.abortLater) finish(w, () => w.reject(w.signal?.reason));
      else {
        const never = neverFits(decision, w.cost);
        const wait = decision.retryAfterMs ?? 1;
        const wakeAt = Date.now() + wait;
        if (never !== undefined) finish(w, () => w.reject(never));
        else if (wakeAt > w.deadline) finish(w, () => w.reject(new RateLimitExceededError(decision)));
        else await this.#sleep(q, decision, wakeAt, wait);
      }
    }
    this.#queues.delete(id);
  }

  /** The head sleeps until its retry time; those behind it whose deadline comes first are refused now. */
  #sleep(q: Queue, denial: Decision, wakeAt: number, wait: number): Promise<void> {
    for (const other of q.waiters.slice(1)) {
      if (!other.settled && wakeAt > other.deadline)
        finish(other, () => other.reject(new RateLimitExceededError(denial, wakeAt - Date.now())));
    }
    q.denial = denial;
    q.wakeAt = wakeAt;
    return new Promise<void>((resume) => {
      const done = () => {
        clearTimeout(timer);
        q.wake = undefined;
        q.wakeAt = 0;
        q.denial = undefined;
        resume();
      };
      const timer = setTimeout(done, wait);
      q.wake = done;
    });
  }

  /** The limiter closes: every waiter rejects, sleeping heads wake (their timers cleared), new calls reject. */
  close(): void {
    this.#closed = true;
    for (const q of this.#queues.values()) {
      for (const w of q.waiters) finish(w, () => w.reject(closedError()));
      q.wake?.();
    }
  }

  #abort(q: Queue, w: Waiter): void {
    if (w.settled) return;
    if (w.trying) {
      w.abortLater = true;
      return;
    }
    finish(w, () => w.reject(w.signal?.reason));
    if (q.waiters[0] === w) q.wake?.();
  }
}

/**
 * Refuses rules with a lockout: a try that is denied would lock the key, so waiting for a turn would
 * turn into waiting out a lock.
 */
export function assertWaitable(rules: readonly CompiledRule[], where: string): void {
  for (const rule of rules) {
    if (rule.store.lockout === undefined) continue;
    throw new RateLimitConfigError(
      'ERR_OPTION',
      `${where}: rule "${rule.name}" has a lockout, and a denied try would lock the key: waiting for a turn takes rules without one`,
    );
  }
}

/** A cost above what a denying rule holds at once (its limit, or its burst) is never admitted: say so at once. */
export function costNeverFits(
  rules: readonly CompiledRule[],
  decision: Decision,
  cost: number,
): Error | undefined {
  for (const r of decision.rules) {
    if (r.allowed || r.locked || r.dryRun) continue;
    const store = rules.find((rule) => rule.name === r.rule)?.store;
    const most = store !== undefined && store.burst > 0 ? store.burst : r.limit;
    if (cost > most) {
      return new RateLimitRequestError(
        'ERR_COST',
        `rule "${r.rule}": a cost of ${cost} never fits, it admits at most ${most} at once; nothing was consumed`,
      );
    }
  }
  return undefined;
}

function closedError(): Error {
  return new Error('ratekeeper: the limiter was closed while this call waited for its turn');
}

/** Settles a waiter once, letting go of its signal. */
function finish(w: Waiter, settle: () => void): void {
  if (w.settled) return;
  w.settled = true;
  w.signal?.removeEventListener('abort', w.onAbort);
  settle();
}
