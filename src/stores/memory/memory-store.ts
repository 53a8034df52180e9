// The embedded store: one process, bounded, the default. Mirrors lua/check.lua step for step.

import { concurrency, type HolderState, renewSlots } from '../../algorithms/concurrency.js';
import { algorithms, verdict } from '../../algorithms/index.js';
import { assertKnownFields, fieldsOf } from '../../config/known-fields.js';
import { refuse } from '../../config/refuse.js';
import { MEMORY_STORE_DEFAULTS } from '../../defaults.js';
import { unrefTimer } from '../../timers.js';
import type { LockInfo, RuleLimit } from '../../types.js';
import type {
  EvalMode,
  EvalResult,
  HeldSlot,
  OpResult,
  Refund,
  Store,
  StoreChangeListener,
  StoreOp,
  StoreRule,
} from '../store.js';
import type { Entry } from './eviction.js';
import { KeyTable } from './key-table.js';
import { OverrideTable } from './overrides.js';

export interface MemoryStoreOptions {
  /**
   * Most keys held at once (a key is one rule for one identity). When full, a key that counted the fewest
   * units is evicted (a single hit before two, two before ten; among equals the least recently written).
   * A key whose state denies (a lock, an escalation level, an exhausted count) never is: while only such
   * keys are held the store grows past `maxKeys`, and a one-time warning `RATEKEEPER_MEMORY_STORE_FULL`
   * says so.
   * @default 100000
   */
  maxKeys?: number;
  /** Replaces real time (epoch ms), for tests. @default Date.now */
  clock?: () => number;
  /** How often expired keys are swept, on an unref'd timer. @default 30000 */
  sweepIntervalMs?: number;
}

/** Duration of the lock at `level` (1 for the first): duration × escalate^(level-1), capped. */
export function lockDurationMs(lockout: NonNullable<StoreRule['lockout']>, level: number): number {
  const ms = lockout.durationMs * lockout.escalate ** (level - 1);
  const capped = lockout.maxDurationMs > 0 ? Math.min(ms, lockout.maxDurationMs) : ms;
  return Math.ceil(Math.min(capped, 1e13));
}

const MEMORY_STORE_FIELDS = fieldsOf<MemoryStoreOptions>({
  maxKeys: true,
  clock: true,
  sweepIntervalMs: true,
});

export class MemoryStore implements Store {
  readonly local = true;
  readonly #keys: KeyTable;
  readonly #clock: () => number;
  readonly #sweepIntervalMs: number;
  /** The sweep timer, started by the first call rather than at construction (Workers forbid timers at import). */
  #timer: ReturnType<typeof setInterval> | undefined;
  #closed = false;
  /** Last time handed out: the store's clock never runs backwards. */
  #lastNow = 0;
  /** `onChange` listeners: limiters sharing this store whose calls wait for a slot. */
  readonly #changeListeners = new Set<StoreChangeListener>();
  /** The entries of the evaluation under way, reused: evaluateSync never re-enters. */
  readonly #scratch: Array<Entry | undefined> = [];
  /** The ops of the evaluation under way as decided (with the override in force), reused likewise. */
  readonly #decided: Array<StoreOp | undefined> = [];
  readonly #overrides = new OverrideTable();

  constructor(options: MemoryStoreOptions = {}) {
    assertKnownFields(options, MEMORY_STORE_FIELDS, 'MemoryStore');
    const maxKeys = options.maxKeys ?? MEMORY_STORE_DEFAULTS.maxKeys;
    if (!Number.isSafeInteger(maxKeys) || maxKeys < 1) {
      refuse('ERR_OPTION', 'MemoryStore', `maxKeys must be a positive integer, got ${maxKeys}`);
    }
    this.#keys = new KeyTable(maxKeys, (entry) => this.#scratch.includes(entry));
    this.#clock = options.clock ?? Date.now;
    this.#sweepIntervalMs = options.sweepIntervalMs ?? MEMORY_STORE_DEFAULTS.sweepIntervalMs;
  }

  /** Keys held now (for tests and metrics). */
  get size(): number {
    return this.#keys.size;
  }

  now(): number {
    if (this.#timer === undefined && !this.#closed) {
      this.#timer = setInterval(() => this.sweep(), this.#sweepIntervalMs);
      unrefTimer(this.#timer);
    }
    const now = this.#clock();
    if (now > this.#lastNow) this.#lastNow = now;
    return this.#lastNow;
  }

  async evaluate(ops: readonly StoreOp[], mode: EvalMode): Promise<EvalResult> {
    return this.evaluateSync(ops, mode);
  }

  /** The whole evaluation happens in one turn of the event loop, which is what makes it atomic. */
  evaluateSync(ops: readonly StoreOp[], mode: EvalMode): EvalResult {
    const nowMs = this.now();
    const n = ops.length;
    const entries = this.#scratch;
    // The ops as decided: an override in force replaces an op's limit.
    const decided = this.#decided;
    for (let i = 0; i < n; i++) {
      const op = this.#overrides.apply(ops[i] as StoreOp, nowMs);
      decided[i] = op;
      entries[i] = this.#keys.find(op.rule.name, op.key, nowMs);
    }
    const results: OpResult[] = [];
    let denied = false;
    // Phase 1: decide every op, writing nothing.
    for (let i = 0; i < n; i++) {
      const op = decided[i] as StoreOp;
      const entry = entries[i];
      const lock = entry?.lock;
      const level = lock !== undefined && nowMs < lock.forgetAtMs ? lock.level : 0;
      let result: OpResult;
      if (lock !== undefined && nowMs < lock.untilMs) {
        const left = lock.untilMs - nowMs;
        result = lockedResult(left, level, lock.untilMs, false);
      } else {
        // A fresh object of ours, not locked: only the remembered level is missing.
        result = algorithms[op.rule.type].evaluate(entry?.state, op, nowMs, mode === 'record');
        if (level !== 0) result.level = level;
      }
      if (!result.allowed && !op.rule.dryRun) denied = true;
      results.push(result);
    }
    if (mode === 'peek') {
      for (let i = 0; i < n; i++)
        this.#lockIfExceeded(decided[i] as StoreOp, results, i, nowMs, false, undefined);
      this.#release(ops, results);
      return { nowMs, results };
    }
    // Phase 2: all consume, or none does; exceeded lockout rules lock.
    for (let i = 0; i < n; i++) {
      const op = decided[i] as StoreOp;
      const result = results[i] as OpResult;
      if (result.locked) continue;
      const consume = mode === 'record' || (!denied && result.allowed);
      if (consume && op.cost > 0) {
        let entry = entries[i];
        const again = entry !== undefined;
        if (entry === undefined) {
          entry = this.#keys.create(op.rule.name, op.key, nowMs);
          entries[i] = entry;
        }
        const algorithm = algorithms[op.rule.type];
        entry.state = algorithm.apply(entry.state, op, nowMs);
        entry.stateExpiresAt = algorithm.expiresAt(entry.state, op);
        entry.count = result.count;
        entry.exhausted = result.remaining === 0;
        this.#keys.place(entry, nowMs, again);
      } else if (result.allowed) {
        // Admitted by its own rule but not consumed (another rule denied): report the state as it is.
        const now = algorithms[op.rule.type].evaluate(entries[i]?.state, withoutCost(op), nowMs, false);
        result.remaining = now.remaining;
        result.resetMs = now.resetMs;
        result.count = now.count;
        result.receipt = 0;
      } else result.receipt = 0;
      this.#lockIfExceeded(op, results, i, nowMs, true, entries[i]);
    }
    this.#release(ops, results);
    return { nowMs, results };
  }

  /**
   * Ends an evaluation: each result gets the limit it was decided on, entries it found empty and did
   * not write are dropped, the scratch arrays are cleared.
   */
  #release(ops: readonly StoreOp[], results: OpResult[]): void {
    const entries = this.#scratch;
    const decided = this.#decided;
    for (let i = 0; i < ops.length; i++) {
      const op = decided[i] as StoreOp;
      const result = results[i] as OpResult;
      result.limit = op.limit;
      result.overridden = op !== ops[i];
      if (op.rule !== (ops[i] as StoreOp).rule) result.windowMs = op.rule.sizeMs;
      const entry = entries[i];
      entries[i] = undefined;
      decided[i] = undefined;
      if (entry !== undefined) this.#keys.dropIfEmpty(entry);
    }
  }

  /** An enforced lockout rule whose own verdict is a denial locks its key (and forgets its count). */
  #lockIfExceeded(
    op: StoreOp,
    results: OpResult[],
    i: number,
    nowMs: number,
    write: boolean,
    existing: Entry | undefined,
  ): void {
    const result = results[i] as OpResult;
    const lockout = op.rule.lockout;
    if (lockout === undefined || op.rule.dryRun || result.allowed || result.locked) return;
    const level = result.level + 1;
    const durationMs = lockDurationMs(lockout, level);
    const untilMs = nowMs + durationMs;
    results[i] = lockedResult(durationMs, level, untilMs, write);
    if (!write) return;
    let entry = existing;
    if (entry === undefined) entry = this.#keys.create(op.rule.name, op.key, nowMs);
    entry.state = undefined;
    entry.stateExpiresAt = 0;
    entry.count = 0;
    entry.exhausted = false;
    entry.lock = { untilMs, level, forgetAtMs: untilMs + lockout.forgetAfterMs };
    this.#keys.place(entry, nowMs);
    this.#keys.locked(entry);
  }

  async refund(refunds: readonly Refund[]): Promise<boolean[]> {
    const nowMs = this.now();
    const held: boolean[] = new Array(refunds.length).fill(true);
    for (let i = 0; i < refunds.length; i++) {
      const refund = refunds[i] as Refund;
      const op = this.#overrides.apply(refund.op, nowMs);
      const receipt = refund.receipt;
      const entry = this.#keys.get(op.rule.name, op.key, nowMs);
      if (algorithms[op.rule.type].kind.holdsSlots)
        held[i] = stillHeld(entry?.state as HolderState | undefined, op, nowMs, receipt);
      if (entry?.state === undefined) continue;
      const algorithm = algorithms[op.rule.type];
      entry.state = algorithm.refund(entry.state, op, nowMs, receipt);
      if (entry.state === undefined) entry.stateExpiresAt = 0;
      else {
        entry.stateExpiresAt = algorithm.expiresAt(entry.state, op);
        const now = algorithm.evaluate(entry.state, withoutCost(op), nowMs, false);
        entry.count = now.count;
        entry.exhausted = now.remaining === 0;
      }
      if (!this.#keys.dropIfEmpty(entry)) this.#keys.place(entry, nowMs);
      if (algorithms[op.rule.type].kind.holdsSlots) this.#freed(op.rule.name, op.key);
    }
    return held;
  }

  /**
   * Calls `listener` with `'free'` after slots of a concurrency key were freed (released or reset)
   * through this store, by any limiter sharing it: their calls waiting for a slot try again. Nothing
   * else is announced: no deny cache sits in front of a store in this process.
   */
  async onChange(listener: StoreChangeListener): Promise<void> {
    this.#changeListeners.add(listener);
  }

  #freed(rule: string, key: string): void {
    for (const listener of this.#changeListeners) listener('free', rule, key);
  }

  async renew(slots: readonly Refund[]): Promise<boolean[]> {
    const nowMs = this.now();
    return slots.map(({ op, receipt }) => {
      const entry = this.#keys.get(op.rule.name, op.key, nowMs);
      const state = entry?.state as HolderState | undefined;
      if (entry === undefined || state === undefined) return false;
      const held = renewSlots(state, op, nowMs, receipt);
      entry.stateExpiresAt = concurrency.expiresAt(state, op);
      return held;
    });
  }

  async holders(rule: StoreRule, key: string, limit: number): Promise<HeldSlot[]> {
    const state = this.#keys.raw(rule.name, key)?.state as HolderState | undefined;
    if (!algorithms[rule.type].kind.holdsSlots || state === undefined) return [];
    const nowMs = this.now();
    const held: HeldSlot[] = [];
    for (const [slot, untilMs] of state.holders) if (untilMs > nowMs) held.push({ slot, untilMs });
    return held.sort((a, b) => a.slot - b.slot).slice(0, limit);
  }

  async reset(rule: StoreRule, key: string, options?: { keepLock?: boolean }): Promise<boolean> {
    if (options?.keepLock === true) {
      this.#clearCount(rule, key);
      return false;
    }
    return this.#reset(rule, key);
  }

  /** The counted state of a key goes; its lock and level stay. */
  #clearCount(rule: StoreRule, key: string): void {
    const entry = this.#keys.raw(rule.name, key);
    if (entry === undefined) return;
    entry.state = undefined;
    entry.stateExpiresAt = 0;
    entry.count = 0;
    entry.exhausted = false;
    if (!this.#keys.dropIfEmpty(entry)) this.#keys.place(entry, this.now());
  }

  #reset(rule: StoreRule, key: string): boolean {
    const entry = this.#keys.raw(rule.name, key);
    if (entry === undefined) return false;
    const wasLocked = entry.lock !== undefined && this.now() < entry.lock.untilMs;
    if (algorithms[rule.type].kind.holdsSlots && entry.state !== undefined) {
      // The holders go, the last slot id stays (until the state expires): no id is handed out twice.
      (entry.state as HolderState).holders.clear();
      entry.count = 0;
      entry.exhausted = false;
      this.#freed(rule.name, key);
    } else this.#keys.remove(entry);
    return wasLocked;
  }

  /** `key` null: the rule-wide limit (see Store.override). */
  async override(
    rule: StoreRule,
    key: string | null,
    limit: number | null,
    forMs?: number,
    windowMs?: number,
  ): Promise<void> {
    const untilMs = forMs === undefined ? Number.POSITIVE_INFINITY : this.now() + forMs;
    if (key === null) this.#overrides.setRule(rule.name, limit, untilMs);
    else if (limit === null && windowMs === undefined) this.#overrides.delete(rule.name, key);
    else this.#overrides.set(rule.name, key, limit ?? undefined, untilMs, windowMs);
  }

  async limits(rules: readonly StoreRule[]): Promise<RuleLimit[]> {
    return this.#overrides.ruleLimits(
      rules.map((r) => r.name),
      this.now(),
    );
  }

  async locked(rule: StoreRule, limit: number): Promise<LockInfo[]> {
    return this.#keys.listLocked(rule.name, limit, this.now());
  }

  async close(): Promise<void> {
    this.#closed = true;
    clearInterval(this.#timer);
    this.#keys.clear();
    this.#overrides.clear();
    this.#changeListeners.clear();
  }

  /** Drops every expired key. Runs on the timer; callable directly. */
  sweep(): void {
    const nowMs = this.now();
    this.#overrides.sweep(nowMs);
    this.#keys.sweep(nowMs);
  }
}

/** The op at cost 0: reading a state as it is. */
function withoutCost(op: StoreOp): StoreOp {
  return op.periodEndMs === undefined
    ? { rule: op.rule, key: op.key, cost: 0, limit: op.limit }
    : {
        rule: op.rule,
        key: op.key,
        cost: 0,
        limit: op.limit,
        periodEndMs: op.periodEndMs,
        nextPeriodEndMs: op.nextPeriodEndMs as number,
      };
}

function lockedResult(leftMs: number, level: number, untilMs: number, lockedNow: boolean): OpResult {
  // Made as every other result is (verdict): one layout for the code that reads them.
  const result = verdict(false, 0, leftMs, leftMs, 0, 0);
  result.locked = true;
  result.level = level;
  result.lockedUntil = untilMs;
  result.lockedNow = lockedNow;
  return result;
}

/** Whether every one of the `cost` slots taken from `receipt` on is held now (lease not ended). */
function stillHeld(state: HolderState | undefined, op: StoreOp, nowMs: number, receipt: number): boolean {
  if (state === undefined) return false;
  for (let id = receipt; id < receipt + op.cost; id++) {
    const untilMs = state.holders.get(id);
    if (untilMs === undefined || untilMs <= nowMs) return false;
  }
  return true;
}
