// What one RateLimitObject holds (the rules of its identity, their locks and overrides, or a rule's lock
// index) and how it decides: MemoryStore's steps on this object's state, each change noted for storage.
import { concurrency, type HolderState, renewSlots } from '../../algorithms/concurrency.js';
import { algorithms, verdict } from '../../algorithms/index.js';
import type { LockInfo } from '../../types.js';
import { lockDurationMs } from '../memory/memory-store.js';
import type { EvalMode, HeldSlot, OpResult, StoreOp, StoreRule } from '../store.js';
import type { Receipted, RefundAnswer } from './protocol.js';
import { type RuleLimits, ruleLimitAt } from './rule-settings.js';

/** A rule's state for one key, as stored (one storage row). */
export interface Entry {
  state: unknown;
  /** Epoch ms after which the state means nothing (0: no state). */
  expiresAt: number;
  lock: { untilMs: number; level: number; forgetAtMs: number } | undefined;
}

/** An operator's limit for one key of one rule (an override), or a lock listed in a rule's index. */
export interface Timed {
  value: number;
  /** Epoch ms it ends; Infinity: never. */
  untilMs: number;
}

/**
 * Storage rows by kind: `s` a rule's state, `o` an override, `w` the window size (ms) a key's override sets, `l` a
 * listed lock; then `[rule, key]` as JSON.
 */
export type RowKind = 's' | 'o' | 'w' | 'l';

export function rowName(kind: RowKind, rule: string, key: string): string {
  return kind + JSON.stringify([rule, key]);
}

/**
 * The object's rows in memory, read from storage once when the object starts; every change is noted in
 * `changed` (written, or deleted when the row is gone), and the object writes them after each call.
 */
export class IdentityTable {
  readonly rows = new Map<string, Entry | Timed>();
  readonly changed = new Set<string>();

  #entry(rule: string, key: string, nowMs: number): Entry | undefined {
    const name = rowName('s', rule, key);
    const entry = this.rows.get(name) as Entry | undefined;
    if (entry === undefined) return undefined;
    if (entry.state !== undefined && entry.expiresAt <= nowMs) {
      entry.state = undefined;
      entry.expiresAt = 0;
      this.changed.add(name);
    }
    if (entry.lock !== undefined && entry.lock.forgetAtMs <= nowMs) {
      entry.lock = undefined;
      this.changed.add(name);
    }
    return entry;
  }

  #put(rule: string, key: string, entry: Entry): void {
    const name = rowName('s', rule, key);
    if (entry.state === undefined && entry.lock === undefined) this.rows.delete(name);
    else this.rows.set(name, entry);
    this.changed.add(name);
  }

  #timed(kind: RowKind, rule: string, key: string, nowMs: number): Timed | undefined {
    const name = rowName(kind, rule, key);
    const found = this.rows.get(name) as Timed | undefined;
    if (found === undefined || nowMs < found.untilMs) return found;
    this.rows.delete(name);
    this.changed.add(name);
    return undefined;
  }

  /**
   * The op as decided: the override in force for its key wins over its limit, then the rule-wide limit
   * in force now in the schedule the Worker sent (`limits`), then the op's own; the key's window (its
   * override's) over the op's size.
   */
  #decided(op: StoreOp, nowMs: number, limits: RuleLimits | undefined): StoreOp {
    const override = this.#timed('o', op.rule.name, op.key, nowMs);
    const window = this.#timed('w', op.rule.name, op.key, nowMs);
    const ruleWide =
      override === undefined ? limits && ruleLimitAt(limits.rules[op.rule.name], nowMs) : undefined;
    const limit = override?.value ?? (ruleWide?.limit as number | undefined) ?? op.limit;
    if (window !== undefined) return { ...op, limit, rule: { ...op.rule, sizeMs: window.value } };
    return override === undefined && ruleWide === undefined ? op : { ...op, limit };
  }

  /**
   * MemoryStore.evaluateSync's two phases; `quiet`: as `check`, with nothing consumed. `limits`: the
   * rule-wide limits the Worker sent.
   */
  evaluate(
    ops: readonly StoreOp[],
    mode: EvalMode,
    quiet: boolean,
    nowMs: number,
    limits?: RuleLimits,
  ): OpResult[] {
    const decided = ops.map((op) => this.#decided(op, nowMs, limits));
    const entries = decided.map((op) => this.#entry(op.rule.name, op.key, nowMs));
    let denied = quiet;
    // Phase 1: decide every op, writing nothing.
    const results = decided.map((op, i) => {
      const lock = entries[i]?.lock;
      const level = lock !== undefined ? lock.level : 0;
      let result: OpResult;
      if (lock !== undefined && nowMs < lock.untilMs) {
        result = lockedResult(lock.untilMs - nowMs, level, lock.untilMs, false);
      } else {
        result = algorithms[op.rule.type].evaluate(entries[i]?.state, op, nowMs, mode === 'record');
        result.level = level;
      }
      if (!result.allowed && !op.rule.dryRun) denied = true;
      return result;
    });
    // Phase 2 (not for peek): all consume or none does; exceeded lockout rules lock.
    for (let i = 0; i < decided.length; i++) {
      const op = decided[i] as StoreOp;
      const result = results[i] as OpResult;
      if (mode !== 'peek' && !result.locked) {
        const consume = mode === 'record' || (!denied && result.allowed);
        if (consume && op.cost > 0) {
          const entry = entries[i] ?? { state: undefined, expiresAt: 0, lock: undefined };
          const algorithm = algorithms[op.rule.type];
          entry.state = algorithm.apply(entry.state, op, nowMs);
          entry.expiresAt = algorithm.expiresAt(entry.state, op);
          entries[i] = entry;
          this.#put(op.rule.name, op.key, entry);
        } else if (result.allowed) {
          // Admitted by its own rule but not consumed (another rule denied): the state as it is.
          Object.assign(result, figures(entries[i]?.state, op, nowMs));
          result.receipt = 0;
        } else result.receipt = 0;
      }
      results[i] = this.#lockIfExceeded(op, result, nowMs, mode !== 'peek', entries[i]);
      (results[i] as OpResult).limit = op.limit;
      (results[i] as OpResult).overridden = op !== ops[i];
      if (op.rule !== (ops[i] as StoreOp).rule) (results[i] as OpResult).windowMs = op.rule.sizeMs;
    }
    return results;
  }

  /** An enforced lockout rule whose own verdict is a denial locks its key (and forgets its count). */
  #lockIfExceeded(op: StoreOp, result: OpResult, nowMs: number, write: boolean, entry: Entry | undefined) {
    const lockout = op.rule.lockout;
    if (lockout === undefined || op.rule.dryRun || result.allowed || result.locked) return result;
    const level = result.level + 1;
    const durationMs = lockDurationMs(lockout, level);
    const untilMs = nowMs + durationMs;
    if (write) {
      const lock = { untilMs, level, forgetAtMs: untilMs + lockout.forgetAfterMs };
      this.#put(op.rule.name, op.key, { ...(entry ?? {}), state: undefined, expiresAt: 0, lock });
    }
    return lockedResult(durationMs, level, untilMs, write);
  }

  refund(refunds: readonly Receipted[], nowMs: number, limits?: RuleLimits): RefundAnswer[] {
    return refunds.map(({ op: given, receipt }) => {
      const op = this.#decided(given, nowMs, limits);
      const entry = this.#entry(op.rule.name, op.key, nowMs);
      const algorithm = algorithms[op.rule.type];
      const held = algorithm.kind.holdsSlots ? stillHeld(entry?.state, op, nowMs, receipt) : true;
      if (entry?.state !== undefined) {
        entry.state = algorithm.refund(entry.state, op, nowMs, receipt);
        entry.expiresAt = entry.state === undefined ? 0 : algorithm.expiresAt(entry.state, op);
        this.#put(op.rule.name, op.key, entry);
      }
      return { held, ...figures(entry?.state, op, nowMs) };
    });
  }

  renew(slots: readonly Receipted[], nowMs: number): boolean[] {
    return slots.map(({ op, receipt }) => {
      const entry = this.#entry(op.rule.name, op.key, nowMs);
      const state = entry?.state as HolderState | undefined;
      if (entry === undefined || state === undefined) return false;
      const held = renewSlots(state, op, nowMs, receipt);
      entry.expiresAt = concurrency.expiresAt(state, op);
      this.#put(op.rule.name, op.key, entry);
      return held;
    });
  }

  holders(rule: StoreRule, key: string, limit: number, nowMs: number): HeldSlot[] {
    const state = this.#entry(rule.name, key, nowMs)?.state as HolderState | undefined;
    if (!algorithms[rule.type].kind.holdsSlots || state === undefined) return [];
    const held: HeldSlot[] = [];
    for (const [slot, untilMs] of state.holders) if (untilMs > nowMs) held.push({ slot, untilMs });
    return held.sort((a, b) => a.slot - b.slot).slice(0, limit);
  }

  /** Clears count, lock and level (`keepLock`: the count only); true when the key was locked. */
  reset(rule: StoreRule, key: string, keepLock: boolean, nowMs: number): boolean {
    const entry = this.#entry(rule.name, key, nowMs);
    if (entry === undefined) return false;
    const wasLocked = !keepLock && entry.lock !== undefined && nowMs < entry.lock.untilMs;
    if (algorithms[rule.type].kind.holdsSlots && entry.state !== undefined) {
      // The holders go, the last slot id stays (until the state expires): no id is handed out twice.
      (entry.state as HolderState).holders.clear();
    } else entry.state = undefined;
    if (entry.state === undefined) entry.expiresAt = 0;
    if (!keepLock) entry.lock = undefined;
    this.#put(rule.name, key, entry);
    return wasLocked;
  }

  /** Sets (limit null: clears) the limit of one key of one rule until `untilMs`. */
  setTimed(kind: 'o' | 'w' | 'l', rule: string, key: string, value: number | null, untilMs: number): void {
    const name = rowName(kind, rule, key);
    if (value === null) this.rows.delete(name);
    else this.rows.set(name, { value, untilMs });
    this.changed.add(name);
  }

  /** A lock index: the keys of `rule` listed as locked now, soonest unlock first, at most `limit`. */
  locked(rule: string, limit: number, nowMs: number): LockInfo[] {
    const out: LockInfo[] = [];
    const prefix = rowName('l', rule, '').slice(0, -3);
    for (const [name, row] of this.rows) {
      const { value, untilMs } = row as Timed;
      if (!name.startsWith(prefix) || untilMs <= nowMs) continue;
      const [, key] = JSON.parse(name.slice(1)) as [string, string];
      out.push({ rule, key, remainingMs: untilMs - nowMs, lockedUntil: untilMs, level: value });
    }
    return out.sort((a, b) => a.lockedUntil - b.lockedUntil).slice(0, limit);
  }

  /** Drops every row that has expired by `nowMs`; the soonest time one still held expires (Infinity: none). */
  sweep(nowMs: number): number {
    let soonest = Number.POSITIVE_INFINITY;
    for (const name of [...this.rows.keys()]) {
      const [rule, key] = JSON.parse(name.slice(1)) as [string, string];
      if (name.startsWith('s')) {
        const entry = this.#entry(rule, key, nowMs) as Entry;
        if (entry.state === undefined && entry.lock === undefined) this.#put(rule, key, entry);
        soonest = Math.min(soonest, expiryOf(entry));
      } else {
        const timed = this.#timed(name[0] as RowKind, rule, key, nowMs);
        if (timed !== undefined) soonest = Math.min(soonest, timed.untilMs);
      }
    }
    return soonest;
  }
}

/** When a row's next part expires: an entry's state or its lock's level, a timed row's end. */
export function expiryOf(row: Entry | Timed): number {
  if ('untilMs' in row) return row.untilMs;
  const entry = row;
  const state = entry.state === undefined ? Number.POSITIVE_INFINITY : entry.expiresAt;
  return Math.min(state, entry.lock?.forgetAtMs ?? Number.POSITIVE_INFINITY);
}

/** A state's figures as it is now (the op at cost 0). */
function figures(
  state: unknown,
  op: StoreOp,
  nowMs: number,
): Pick<OpResult, 'remaining' | 'resetMs' | 'count'> {
  const now = algorithms[op.rule.type].evaluate(state, { ...op, cost: 0 }, nowMs, false);
  return { remaining: now.remaining, resetMs: now.resetMs, count: now.count };
}

function lockedResult(leftMs: number, level: number, untilMs: number, lockedNow: boolean): OpResult {
  const result = verdict(false, 0, leftMs, leftMs, 0, 0);
  result.locked = true;
  result.level = level;
  result.lockedUntil = untilMs;
  result.lockedNow = lockedNow;
  return result;
}

/** Whether every one of the `cost` slots taken from `receipt` on is held now (lease not ended). */
function stillHeld(state: unknown, op: StoreOp, nowMs: number, receipt: number): boolean {
  const holders = (state as HolderState | undefined)?.holders;
  if (holders === undefined) return false;
  for (let id = receipt; id < receipt + op.cost; id++) {
    const untilMs = holders.get(id);
    if (untilMs === undefined || untilMs <= nowMs) return false;
  }
  return true;
}
