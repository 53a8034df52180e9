// Failure policy: a shared store's calls under `storeTimeout`, the window in which a failed store is skipped,
// and the answer while it is: the insurance store, or 'allow' / 'deny' outright. Keeps the store's health.
import { performance } from 'node:perf_hooks';
import { StoreTimeoutError } from '../errors.js';
import { MemoryStore } from '../stores/memory-store.js';
import type { EvalMode, EvalResult, OpResult, Store, StoreOp } from '../stores/store.js';
import { Deadlines } from './deadlines.js';
import type { DecisionSource, Observers } from './observers.js';
import type { StoreErrorPolicy } from './options.js';
import { HealthState, type StoreHealth } from './store-health.js';

/** Where a store's answer came from (see `DecisionSource`; the deny cache answers before any store). */
export type AnswerSource = Exclude<DecisionSource, 'deny_cache'>;

/** The failure policy's answer for a request: what decided it and with which figures. */
export interface FallbackAnswer {
  store: Store;
  result: EvalResult;
  source: Exclude<AnswerSource, 'store'>;
}

export class FailurePolicy {
  readonly policy: StoreErrorPolicy;
  /** The shared store's health, from the outcome of its calls. */
  readonly health = new HealthState();
  readonly #store: Store;
  readonly #observers: Observers;
  /** `storeTimeout` for a shared store's calls; undefined for a local store. */
  readonly #deadlines: Deadlines | undefined;
  readonly #retryMs: number;
  #insurance: MemoryStore | undefined;
  /** Date.now() before which decisions skip the store (it failed less than `storeRetryInterval` ago). */
  #skipUntil = 0;

  constructor(
    store: Store,
    policy: StoreErrorPolicy,
    timeoutMs: number,
    retryMs: number,
    observers: Observers,
  ) {
    this.#store = store;
    this.#observers = observers;
    this.policy = policy;
    this.#retryMs = retryMs;
    this.#deadlines = store.local
      ? undefined
      : new Deadlines(timeoutMs, (ms) => new StoreTimeoutError(`store did not answer within ${ms} ms`));
  }

  /** The insurance store, once the policy has started one. */
  get insurance(): MemoryStore | undefined {
    return this.#insurance;
  }

  /** False while decisions skip the store: it failed less than `storeRetryInterval` ago. */
  get storeUsable(): boolean {
    return Date.now() >= this.#skipUntil;
  }

  /**
   * A shared store's call under `storeTimeout`; the memory store answers in the same turn anyway. The
   * decision path's: it reports the outcome itself (`decisionFailed`, `health.succeeded`).
   */
  timed<T>(promise: Promise<T>): Promise<T> {
    return this.#deadlines === undefined ? promise : this.#deadlines.race(promise);
  }

  /** Any other store call (`report`, `reset`, `status` ...): timed, its outcome kept in `health` and told to observers. */
  async call<T>(operation: string, promise: Promise<T>): Promise<T> {
    if (this.#deadlines === undefined) return promise;
    const startedMs = this.#observers.storeCalls ? performance.now() : -1;
    try {
      const value = await this.#deadlines.race(promise);
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
   * The store's health (see `limiter.health()`): a shared store that can be pinged is asked first,
   * under `storeTimeout`; the memory store is always ok.
   */
  async checkHealth(): Promise<StoreHealth> {
    const store = this.#store;
    if (store.local) return { state: 'ok', sinceMs: this.health.snapshot().sinceMs };
    if (store.ping !== undefined) {
      try {
        await this.call('ping', store.ping());
      } catch {
        // Kept in the health state, which is the answer.
      }
    }
    return this.health.snapshot();
  }

  /** A decision's store call failed: the next decisions skip the store for `storeRetryInterval`. */
  decisionFailed(error: unknown): void {
    this.#skipUntil = Date.now() + this.#retryMs;
    this.health.failed(error);
  }

  /** The answer while the shared store is failing. */
  fallback(ops: readonly StoreOp[], mode: EvalMode): FallbackAnswer {
    if (this.policy === 'insurance') {
      this.#insurance ??= new MemoryStore();
      return { store: this.#insurance, result: this.#insurance.evaluateSync(ops, mode), source: 'insurance' };
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
    return { store: this.#store, result: { nowMs: Date.now(), results }, source: 'policy' };
  }

  async close(): Promise<void> {
    await this.#insurance?.close();
  }
}
