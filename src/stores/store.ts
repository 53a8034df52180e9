// The store contract: what the memory store and the Redis store both implement, step for step.

import type { LockInfo } from '../types.js';
import type { OpResult, StoreOp, StoreRule } from './store-ops.js';

export type { OpResult, StoreLockout, StoreOp, StoreRule } from './store-ops.js';

/**
 * A concurrency op's `refund` is its release: its receipt names its slots, and releasing slots that are
 * unknown, lapsed or released already does nothing.
 *
 * - `check`: decide every op; if none (that is enforced) denies, consume all that allow; else consume
 *   nothing, but lock each enforced lockout rule that was exceeded.
 * - `peek`: the same answer as `check`, nothing written.
 * - `record`: always add the cost, even past the limit; lock (if configured) once the total exceeds it.
 */
/** A live concurrency slot: its id and when its lease ends (epoch ms, store clock). */
export interface HeldSlot {
  slot: number;
  untilMs: number;
}

export type EvalMode = 'check' | 'peek' | 'record';

export interface EvalResult {
  /** The store's time for this evaluation, epoch ms. */
  nowMs: number;
  results: OpResult[];
}

export interface Refund {
  readonly op: StoreOp;
  readonly receipt: number;
}

/**
 * What a shared store tells the failure policy about its connection, so that a store that is slow (or
 * still connecting) is waited for and only one that failed is given up on.
 */
export interface StoreLiveness {
  /**
   * While the store's first connection is being made and has not failed: a promise that resolves once
   * it is ready and rejects with its fault. Undefined otherwise (connected, or the first attempt failed).
   */
  connecting(): Promise<void> | undefined;
  /**
   * `performance.now()` since which the calls sent to the store have waited without an answer to any of
   * them: the last answer, or the first call sent while none was outstanding. Undefined while no call
   * is outstanding.
   */
  silentSinceMs(): number | undefined;
}

/** What settles a call made for someone else's promise: the first of `resolve` or `reject` wins. */
export interface Settler<T> {
  resolve(value: T): void;
  reject(error: unknown): void;
}

export interface Store {
  /** True for stores inside this process (no deny cache or insurance needed in front of them). */
  readonly local: boolean;
  /** The store's current time in epoch ms: the clock calendar periods are computed on. */
  now(): number;
  /** Decide all ops together (all consume or none does), see `EvalMode`. */
  evaluate(ops: readonly StoreOp[], mode: EvalMode): Promise<EvalResult>;
  /**
   * Optional, a capability: `evaluate` answered in the same call, no promise (the memory store). The
   * same answer and atomicity; it throws what `evaluate` would reject with. The failure policy decides
   * who calls it (see `SyncStore`): a local store's decisions through it, and the insurance store must
   * have it (its answer stands in for a failed call at once).
   */
  evaluateSync?(ops: readonly StoreOp[], mode: EvalMode): EvalResult;
  /**
   * Optional, a capability: `evaluate` settling `into` instead of returning a promise (a shared store
   * that keeps its calls' settle functions anyway: the Redis store's batches). The limiter then makes
   * one promise per decision, the deadlines' own, where it would make a second around the store's.
   * Never throws: a fault is `into.reject`.
   */
  evaluateInto?(ops: readonly StoreOp[], mode: EvalMode, into: Settler<EvalResult>): void;
  /**
   * Give reservations back (an outcome that does not count). Never goes below empty. Resolves, per refund,
   * whether what it gave back was still held: false for a concurrency slot some unit of which was no
   * longer held (released already, lapsed, or reset), whose release the limiter then counts `lapsed`, as
   * `renew` answers; true for any other refund. A store written before this answer, resolving nothing,
   * has every release counted `released`.
   */
  refund(refunds: readonly Refund[]): Promise<boolean[]> | Promise<void>;
  /**
   * Optional, a capability: `refund` settling `into` instead of returning a promise (a store that keeps
   * its callers' settle functions anyway: the Redis store's refunds, batched per turn of the event loop),
   * with the same answer. The releases of concurrency slots in one turn then share one promise and one
   * deadline (holdings.ts ReleaseBatch), each handed over at once. Never throws: a fault is `into.reject`.
   */
  refundInto?(refunds: readonly Refund[], into: Settler<boolean[]> | Settler<void>): void;
  /**
   * Renews held concurrency slots (each an op of a concurrency rule and the receipt its check returned,
   * the first of its `cost` slots): their leases end `op.rule.sizeMs` from now, store clock. Resolves, per
   * slot, whether every unit of it was still held; one released, lapsed or reset is not taken again.
   * Optional: a store without it cannot hold concurrency rules (`createLimiter` refuses them).
   */
  renew?(slots: readonly Refund[]): Promise<boolean[]>;
  /**
   * The live slots of a concurrency rule's key (operators' `status`): each one's id (whose high part is
   * the ms it was taken, `SLOT_IDS_PER_MS`) and the epoch ms its lease ends, store clock; at most
   * `limit` of them, oldest first. Optional: without it `status` lists no holders.
   */
  holders?(rule: StoreRule, key: string, limit: number): Promise<HeldSlot[]>;
  /** Clear the counted state of a rule for a key (resetOnSuccess); the lock and level stay. */
  clear(rule: StoreRule, key: string): Promise<void>;
  /** Clear count, lock and level. Resolves true when the key was locked. */
  reset(rule: StoreRule, key: string): Promise<boolean>;
  /**
   * Sets the limit of one key of one rule (`null` clears it), for every process sharing the store,
   * from the next decision on: it wins over the ops' `limit`, a burst of 0 follows it, and results
   * decided on it say `overridden`. `forMs`: it expires then (store clock); undefined: never. `reset`
   * and `clear` leave it. Stores shared between processes tell `onReset` listeners (rule, key), so
   * deny caches forget a key whose limit changed. Optional: without it `limiter.override` throws.
   */
  override?(rule: StoreRule, key: string, limit: number | null, forMs?: number): Promise<void>;
  /** Keys of a rule locked now, soonest unlock first, at most `limit`. */
  locked(rule: StoreRule, limit: number): Promise<LockInfo[]>;
  /**
   * Stores shared between processes call `listener` when any process resets a key, so local caches
   * (the deny cache) can forget it; `('', '')` means resets may have been missed (the subscriber
   * reconnected): forget everything.
   */
  onReset?(listener: (rule: string, key: string) => void): void;
  /**
   * Shared stores that hold concurrency slots: calls `listener` with the rule and key after any process
   * freed slots of that key (a release, a reset), so that calls waiting for a slot try again at once;
   * `('', '')`: frees may have been missed (the subscriber reconnected), every waiter tries again.
   * Resolves once no free announced from then on can be missed. Optional: without it a waiter in
   * another process tries again when the soonest lease ends.
   */
  onFree?(listener: (rule: string, key: string) => void): Promise<void>;
  /**
   * Shared stores: resolves when the store answers (a round trip), rejects with the cause when it
   * cannot. `limiter.health()` calls it, under `storeTimeout`.
   */
  ping?(): Promise<void>;
  /**
   * Shared stores: their connection's liveness. Without it a call counts as failed `storeTimeout` after
   * it was made, however busy the store or this process.
   */
  readonly liveness?: StoreLiveness;
  close(): Promise<void>;
}

/** A store that declares the synchronous capability, `evaluateSync`. */
export type SyncStore = Store & Pick<Required<Store>, 'evaluateSync'>;

/** Whether a store decides synchronously: it declares `evaluateSync` (whatever its class or module format). */
export function isSyncStore(store: Store): store is SyncStore {
  return typeof store.evaluateSync === 'function';
}
