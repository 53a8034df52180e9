// The store contract: what every store (memory, Redis, PostgreSQL, or one of your own) implements.

import type { LockInfo, RuleLimit } from '../types.js';
import type { OpResult, StoreOp, StoreRule } from './store-ops.js';

export type { OpResult, StoreLockout, StoreOp, StoreRule } from './store-ops.js';

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
 * What a shared store's connection tells the failure policy, so that a store that is slow (or still
 * connecting) is waited for and only one that failed is given up on.
 */
export interface ConnectionLiveness {
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

/** A shared store's `liveness`: its connection's, and a round trip to ask the store itself. */
export interface StoreLiveness extends ConnectionLiveness {
  /**
   * One round trip: resolves when the store answers, rejects with the cause when it cannot.
   * `limiter.health()` calls it, under `storeTimeout`.
   */
  ping(): Promise<void>;
  /**
   * For a store whose `onChange` cannot hear other processes (Redis over HTTP has no subscription): how
   * long, in ms, the limiter may rely on what the store answered. A denial stays in the deny cache at most
   * this long, and a call waiting for a slot asks the store again at least this often, so another
   * process's reset, override or free reaches this one within that time. Undefined: changes are heard.
   */
  readonly staleAfterMs?: number;
}

/**
 * What another process (or another limiter on the same store) changed: `'reset'` for a key reset or
 * its override changed (a deny cache forgets the key), `'free'` for concurrency slots freed (a call
 * waiting for one tries again). A rule with an empty key: the rule's rule-wide limit changed (forget
 * every key of the rule; no identity is empty). An empty rule and key: changes may have been missed
 * (the subscriber reconnected), forget or retry everything.
 */
export type StoreChange = 'reset' | 'free';

export type StoreChangeListener = (change: StoreChange, rule: string, key: string) => void;

/**
 * The store contract. Every store decides (`evaluate`), gives back (`refund`), answers the operator
 * calls (`reset`, `locked`), tells its clock (`now`) and closes. The optional members are capabilities;
 * without one the limiter does without what it gives (each says what). A store passes the conformance
 * suite in test/stores/conformance/ (docs/stores.md, "Writing a store").
 *
 * A concurrency op's `refund` is its release: its receipt names its slots, and releasing slots that are
 * unknown, lapsed or released already does nothing.
 */
export interface Store {
  /** True for stores inside this process (no deny cache, deadlines or insurance needed in front of them). */
  readonly local: boolean;
  /** The store's current time in epoch ms: the clock calendar periods are computed on. */
  now(): number;
  /**
   * Decide all ops together (all consume or none does):
   * - `check`: decide every op; if none (that is enforced) denies, consume all that allow; else consume
   *   nothing, but lock each enforced lockout rule that was exceeded.
   * - `peek`: the same answer as `check`, nothing written.
   * - `record`: always add the cost, even past the limit; lock (if configured) once the total exceeds it.
   */
  evaluate(ops: readonly StoreOp[], mode: EvalMode): Promise<EvalResult>;
  /**
   * Capability, deciding synchronously: `evaluate` answered in the same call, no promise. The same
   * answer and atomicity; it throws what `evaluate` would reject with. A local store (the memory store)
   * answers every call, its decisions go through it, and an insurance store must be one (its answer
   * stands in for a failed call at once). A shared store answers only what it can without a round trip
   * (a hot key's leased units: RedisStore and PostgresStore with `leasing`) and returns undefined for
   * the rest, which the limiter then sends to `evaluate`, as without it.
   */
  evaluateSync?(ops: readonly StoreOp[], mode: EvalMode): EvalResult | undefined;
  /**
   * Give reservations back (an outcome that does not count). Never goes below empty. Resolves, per refund,
   * whether what it gave back was still held: false for a concurrency slot some unit of which was no
   * longer held (released already, lapsed, or reset), whose release the limiter then counts `lapsed`, as
   * `renew` answers; true for any other refund. A store that resolves nothing has every release counted
   * `released`.
   */
  refund(refunds: readonly Refund[]): Promise<boolean[]> | Promise<void>;
  /**
   * Capability, holding concurrency slots: renews held slots (each an op of a concurrency rule and the
   * receipt its check returned, the first of its `cost` slots): their leases end `op.rule.sizeMs` from
   * now, store clock. Resolves, per slot, whether every unit of it was still held; one released, lapsed
   * or reset is not taken again. Without it `createLimiter` refuses concurrency rules.
   */
  renew?(slots: readonly Refund[]): Promise<boolean[]>;
  /**
   * Capability, listing slot holders (operators' `status`): the live slots of a concurrency rule's key,
   * each one's id (whose high part is the ms it was taken, `SLOT_IDS_PER_MS`) and the epoch ms its lease
   * ends, store clock; at most `limit` of them, oldest first. Without it `status` lists no holders.
   */
  holders?(rule: StoreRule, key: string, limit: number): Promise<HeldSlot[]>;
  /**
   * Clear count, lock and level of a rule for a key. Resolves true when the key was locked. With
   * `keepLock` only the counted state is cleared (`resetOnSuccess`): the lock and level stay, nobody is
   * told, and it resolves false.
   */
  reset(rule: StoreRule, key: string, options?: { keepLock?: boolean }): Promise<boolean>;
  /**
   * Capability, run-time limits: sets the limit of one key of one rule (`null` clears it), for every
   * process sharing the store, from the next decision on: it wins over the ops' `limit`, a burst of 0
   * follows it, and results decided on it say `overridden`. `forMs`: it expires then (store clock);
   * undefined: never. `reset` leaves it. Stores shared between processes tell `onChange` listeners
   * `'reset'`, so deny caches forget a key whose limit changed. Without it `limiter.override` throws.
   *
   * `key` null: the rule-wide limit, for every key of the rule that has no override of its own (the
   * order: the key's override, the rule-wide limit, the op's `limit`), read inside each decision's own
   * store call; listeners hear `'reset'` with the rule and an empty key. Without the rule-wide form
   * (a store written before it, which throws or ignores a null key) `limiter.setLimit` is refused:
   * a store has it when it has `limits`.
   *
   * `windowMs`: a key's override carrying a window gives the key's ops `windowMs` as their size (from the
   * key's next window on, as a `window` function's size) over the op's, and results decided on it say
   * `windowMs`; with `limit` null the override sets the window only (the limit is the rule-wide one, else
   * the op's). A store that cannot keep a window throws when it is given one.
   */
  override?(
    rule: StoreRule,
    key: string | null,
    limit: number | null,
    forMs?: number,
    windowMs?: number,
  ): Promise<void>;
  /**
   * Capability, listing rule-wide limits: those in force now among `rules` (set with `override(rule,
   * null, ...)`), each with the epoch ms it ends (store clock) when it has an end. A member of its own
   * rather than a form of `override`: reading and writing stay apart. Without it `limiter.setLimit` and
   * `limiter.limits` throw.
   */
  limits?(rules: readonly StoreRule[]): Promise<RuleLimit[]>;
  /** Keys of a rule locked now, soonest unlock first, at most `limit`. */
  locked(rule: StoreRule, limit: number): Promise<LockInfo[]>;
  /**
   * Capability, hearing other processes' changes (see `StoreChange`): calls `listener` after any process
   * (or limiter sharing the store) reset a key, changed its override, or, with `frees`, freed slots.
   * `frees` is asked for only once a call waits for a slot (a store may announce frees to a process that
   * listens for them only). Resolves once no change asked for, announced from then on, can be missed.
   * Without it deny caches keep a reset key's denial until it expires, and a call waiting for a slot
   * freed in another process tries again when the soonest lease ends.
   */
  onChange?(listener: StoreChangeListener, options?: { frees?: boolean }): Promise<void>;
  /**
   * Capability, for shared stores: their connection's liveness and a round trip. Without it a call counts
   * as failed `storeTimeout` after it was made, however busy the store or this process, and
   * `limiter.health()` reports the outcome of the last calls only.
   */
  readonly liveness?: StoreLiveness;
  /** Ends the store's own work (timers, subscriptions), after what it was asked to write is written. */
  close(): Promise<void>;
}

/** A local store that declares the synchronous capability, `evaluateSync`: it answers every call. */
export type SyncStore = Omit<Store, 'evaluateSync'> & {
  evaluateSync(ops: readonly StoreOp[], mode: EvalMode): EvalResult;
};

/**
 * Whether a store decides every call synchronously: it is local and declares `evaluateSync` (whatever
 * its class or module format). A shared store's `evaluateSync` may decline, so it is not one.
 */
export function isSyncStore(store: Store): store is SyncStore {
  return store.local === true && typeof store.evaluateSync === 'function';
}
