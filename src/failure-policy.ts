// Failure policy: a shared store's calls under `storeTimeout`, the window in which a failed store is skipped,
// and the answer while it is: the insurance store, or 'allow' / 'deny' outright.
import { Deadlines } from './deadlines.js';
import { StoreTimeoutError } from './errors.js';
import type { StoreErrorPolicy } from './limiter-options.js';
import { MemoryStore } from './stores/memory-store.js';
import type { EvalMode, EvalResult, OpResult, Store, StoreOp } from './stores/store.js';

/**
 * Where a decision's figures came from: the configured store, the per-process insurance store, or
 * `'policy'` when `onStoreError` 'allow' or 'deny' answered and nothing was stored anywhere.
 */
export type AnswerSource = 'store' | 'insurance' | 'policy';

/** The failure policy's answer for a request: what decided it and with which figures. */
export interface FallbackAnswer {
  store: Store;
  result: EvalResult;
  source: Exclude<AnswerSource, 'store'>;
}

export class FailurePolicy {
  readonly policy: StoreErrorPolicy;
  readonly #store: Store;
  /** `storeTimeout` for a shared store's calls; undefined for a local store. */
  readonly #deadlines: Deadlines | undefined;
  readonly #retryMs: number;
  #insurance: MemoryStore | undefined;
  /** Date.now() before which decisions skip the store (it failed less than `storeRetryInterval` ago). */
  #skipUntil = 0;

  constructor(store: Store, policy: StoreErrorPolicy, timeoutMs: number, retryMs: number) {
    this.#store = store;
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

  /** A shared store's call under `storeTimeout`; the memory store answers in the same turn anyway. */
  timed<T>(promise: Promise<T>): Promise<T> {
    return this.#deadlines === undefined ? promise : this.#deadlines.race(promise);
  }

  /** A decision's store call failed: the next decisions skip the store for `storeRetryInterval`. */
  decisionFailed(): void {
    this.#skipUntil = Date.now() + this.#retryMs;
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
