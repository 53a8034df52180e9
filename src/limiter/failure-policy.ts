// Failure policy: a shared store's calls under `storeTimeout` and `storeMaxWait` (a slow store is waited for,
// a silent or failed one is not), the window in which a failed store is skipped, and the answer while it
// is: the insurance store (its share of each limit), or 'allow' / 'deny' outright. Keeps the store's health,
// and says how decisions reach the store: a local store that declares `evaluateSync` is called directly.
import { errorCode, StoreTimeoutError } from '../errors.js';
import {
  type EvalMode,
  type EvalResult,
  isSyncStore,
  type OpResult,
  type Store,
  type StoreOp,
  type StoreRule,
  type SyncStore,
} from '../stores/store.js';
import { Deadlines } from './deadlines.js';
import type { DecisionSource, Observers } from './observers.js';
import type { StoreErrorPolicy } from './options.js';

/** Where a store's answer came from (see `DecisionSource`; the deny cache answers before any store). */
export type AnswerSource = Exclude<DecisionSource, 'deny_cache'>;

/** The failure policy's answer for a request: what decided it, on which ops, with which figures. */
export interface FallbackAnswer<O extends StoreOp> {
  store: Store;
  /** The ops as decided: on the insurance store, each limit cut to its share. */
  ops: O[];
  result: EvalResult;
  source: Exclude<AnswerSource, 'store'>;
}

/** The limiter's figures the policy runs on (see `ResolvedLimiterOptions`). */
export interface PolicySettings {
  policy: StoreErrorPolicy;
  storeTimeoutMs: number;
  storeMaxWaitMs: number;
  storeRetryIntervalMs: number;
  /** The share of each limit the insurance store admits in this process, in (0, 1]. */
  insuranceShare: number;
  /** The insurance store, made by the options (`insurance.store` or a memory store); undefined: none. */
  insurance: SyncStore | undefined;
}

/** A decision that waited for the first connection and was given up on: it is never sent. */
const GIVEN_UP = new Error('given up before the first connection was ready');

export class FailurePolicy {
  readonly policy: StoreErrorPolicy;
  /** The store's health, from the outcome of its calls (a local store's: of its decisions). */
  readonly health = new HealthState();
  /**
   * The store when decisions call it synchronously: it is local (nothing to time, nothing stands in for
   * it) and declares `evaluateSync`. Its faults are kept in `health` (`localFailed`) and reach the caller.
   */
  readonly sync: SyncStore | undefined;
  readonly #store: Store;
  readonly #observers: Observers;
  /** `storeTimeout` and `storeMaxWait` for a shared store's calls; undefined for a local store. */
  readonly #deadlines: Deadlines | undefined;
  readonly #retryMs: number;
  readonly #share: number;
  /** Rules with an explicit burst, as the insurance store sees them: the burst cut to the share. */
  readonly #sharedRules = new WeakMap<StoreRule, StoreRule>();
  readonly #insurance: SyncStore | undefined;

  constructor(store: Store, settings: PolicySettings, observers: Observers) {
    this.#store = store;
    this.#observers = observers;
    this.policy = settings.policy;
    this.#retryMs = settings.storeRetryIntervalMs;
    this.#share = settings.insuranceShare;
    this.#insurance = settings.insurance;
    this.sync = store.local && isSyncStore(store) ? store : undefined;
    this.#deadlines = store.local
      ? undefined
      : new Deadlines(settings.storeTimeoutMs, settings.storeMaxWaitMs, store.liveness, {
          silent: (ms) => new StoreTimeoutError(`store did not answer within ${ms} ms`),
          slow: (ms, connecting) =>
            new StoreTimeoutError(
              connecting
                ? `store's first connection was not ready within ${ms} ms`
                : `store answered other calls but not this one within ${ms} ms`,
            ),
        });
  }

  /** The insurance store the options gave (undefined for a local store, or a policy other than 'insurance'). */
  get insurance(): SyncStore | undefined {
    return this.#insurance;
  }

  /** False while decisions skip the store: it failed less than `storeRetryInterval` ago. */
  get storeUsable(): boolean {
    return this.health.usable;
  }

  /**
   * A shared store's call, made by `send`, under the deadlines; the memory store answers in the same turn
   * anyway. While the store's first connection is being made the call waits for it (within
   * `storeMaxWait`) and is sent once it is ready, never after the decision was given up on. The decision
   * path's: it reports the outcome itself (`decisionFailed`, `health.succeeded`).
   */
  timed<T>(send: () => Promise<T>): Promise<T> {
    const deadlines = this.#deadlines;
    if (deadlines === undefined) return send();
    const connecting = this.#store.liveness?.connecting();
    if (connecting === undefined) return deadlines.race(send());
    let givenUp = false;
    const call = deadlines.race(connecting.then(() => (givenUp ? Promise.reject(GIVEN_UP) : send())));
    call.catch(() => {
      givenUp = true;
    });
    return call;
  }

  /** Any other store call (`report`, `reset`, `status` ...): timed, its outcome kept in `health` and told to observers. */
  call<T>(operation: string, promise: Promise<T>): Promise<T> {
    // A local store (no deadlines): its own promise, not one more wrapped around it (a release per request).
    const deadlines = this.#deadlines;
    if (deadlines === undefined) return promise;
    return this.#timedCall(deadlines, operation, promise);
  }

  async #timedCall<T>(deadlines: Deadlines, operation: string, promise: Promise<T>): Promise<T> {
    const startedMs = this.#observers.storeCalls ? performance.now() : -1;
    try {
      const value = await deadlines.race(promise);
      this.health.succeeded();
      if (startedMs >= 0) this.#observers.storeCall(operation, startedMs);
      return value;
    } catch (error) {
      this.health.failed(error);
      if (startedMs >= 0) this.#observers.storeCall(operation, startedMs, error);
      throw error;
    }
  }

  /**
   * A local store's decision failed (it threw): kept in `health` until one succeeds, and the caller gets
   * the fault as a rejection. No retry window and no fallback: nothing stands in for a store in this
   * process.
   */
  localFailed(error: unknown): Promise<never> {
    this.health.failed(error);
    return Promise.reject(error);
  }

  /**
   * The store's health (see `limiter.health()`): a shared store that can be pinged is asked first,
   * under `storeTimeout`, and its answer ends the retry interval (decisions go to it again at once, so
   * 'ok' is never said while they skip it); a local store is 'ok' unless its last decision threw.
   */
  async checkHealth(): Promise<StoreHealth> {
    const store = this.#store;
    const liveness = store.liveness;
    if (liveness !== undefined && !store.local) {
      try {
        await this.call('ping', liveness.ping());
        this.health.recovered();
      } catch {
        // Kept in the health state, which is the answer.
      }
    }
    return this.health.snapshot();
  }

  /** A decision's store call failed: the next decisions skip the store for `storeRetryInterval`. */
  decisionFailed(error: unknown): void {
    this.health.skipFor(error, this.#retryMs);
  }

  /** The answer while the shared store is failing. */
  fallback<O extends StoreOp>(ops: readonly O[], mode: EvalMode): FallbackAnswer<O> {
    const insurance = this.#insurance;
    if (this.policy === 'insurance' && insurance !== undefined) {
      const shared = this.#share === 1 ? (ops as O[]) : ops.map((op) => this.#shareOf(op));
      const result = insurance.evaluateSync(shared, mode);
      return { store: insurance, ops: shared, result, source: 'insurance' };
    }
    const allowed = this.policy === 'allow';
    const results = ops.map(
      (op): OpResult => ({
        allowed,
        limit: op.limit,
        overridden: false,
        remaining: allowed ? op.limit : 0,
        resetMs: 0,
        retryAfterMs: allowed ? 0 : this.#retryMs,
        locked: false,
        count: 0,
        receipt: 0,
        level: 0,
        lockedUntil: 0,
        lockedNow: false,
      }),
    );
    return { store: this.#store, ops: ops as O[], result: { nowMs: Date.now(), results }, source: 'policy' };
  }

  /** An op as the insurance store decides it: its limit, and an explicit burst, cut to the share (at least 1). */
  #shareOf<O extends StoreOp>(op: O): O {
    let rule = op.rule;
    if (rule.burst > 0) {
      let cut = this.#sharedRules.get(rule);
      if (cut === undefined) {
        cut = { ...rule, burst: shareOf(rule.burst, this.#share) };
        this.#sharedRules.set(rule, cut);
      }
      rule = cut;
    }
    return { ...op, rule, limit: shareOf(op.limit, this.#share) };
  }

  async close(): Promise<void> {
    await this.#insurance?.close();
  }
}

/** `share` of `limit`, rounded down, at least 1: N processes then admit at most N x that during an outage. */
export function shareOf(limit: number, share: number): number {
  // The epsilon keeps 100 x 0.29 at 29, not 28.999999999999996 rounded down.
  return Math.max(1, Math.floor(limit * share + 1e-9));
}

// The shared store's health as the limiter has seen it: 'ok' or 'down', since when, and the last fault's cause.

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
