// The keys the memory store holds, by rule and identity: each found with its expired parts forgotten,
// created within maxKeys (evicting in EvictionQueues' order), dropped when empty, the locked ones listed.

import type { LockInfo } from '../../types.js';
import { MEMORY_STORE_FULL_WARNING, warnOnce } from '../../warnings.js';
import { type Entry, EvictionQueues } from './eviction.js';

export class KeyTable {
  /** Rule name, then identity: no joined string to build and hash on every lookup. */
  readonly #byRule = new Map<string, Map<string, Entry>>();
  /** Every entry, in the order it would be evicted. */
  readonly #queues = new EvictionQueues();
  readonly #locks = new Set<Entry>();
  readonly #maxKeys: number;
  readonly #warnFull = warnOnce(MEMORY_STORE_FULL_WARNING);
  /** Entries of the evaluation under way, which eviction must not take. */
  readonly #busy: (entry: Entry) => boolean;

  constructor(maxKeys: number, busy: (entry: Entry) => boolean) {
    this.#maxKeys = maxKeys;
    this.#busy = busy;
  }

  get size(): number {
    return this.#queues.size;
  }

  /** The entry as stored, expired parts and all (for operator calls that read or clear it). */
  raw(rule: string, key: string): Entry | undefined {
    return this.#byRule.get(rule)?.get(key);
  }

  /** The entry, or undefined when nothing unexpired is left of it (then it is dropped). */
  get(rule: string, key: string, nowMs: number): Entry | undefined {
    const entry = this.#byRule.get(rule)?.get(key);
    return entry === undefined || this.#expire(entry, nowMs) ? undefined : entry;
  }

  /**
   * The entry of an evaluation, its expired parts forgotten. Kept even when nothing is left of it, as
   * the evaluation will likely write it again (a full token bucket): the store drops it if not.
   */
  find(rule: string, key: string, nowMs: number): Entry | undefined {
    const entry = this.#byRule.get(rule)?.get(key);
    if (entry !== undefined) this.#forget(entry, nowMs);
    return entry;
  }

  /** Files a written entry again in its eviction queue (`again`: it was written before). */
  place(entry: Entry, nowMs: number, again = true): void {
    this.#queues.place(entry, nowMs, again);
  }

  /** Counts an entry among the locked ones (its `lock` set). */
  locked(entry: Entry): void {
    this.#locks.add(entry);
  }

  /** The keys of a rule locked now, soonest unlock first. */
  listLocked(rule: string, limit: number, nowMs: number): LockInfo[] {
    const out: LockInfo[] = [];
    for (const entry of this.#locks) {
      const lock = entry.lock;
      if (entry.rule !== rule || lock === undefined || lock.untilMs <= nowMs) continue;
      out.push({
        rule: entry.rule,
        key: entry.key,
        remainingMs: lock.untilMs - nowMs,
        lockedUntil: lock.untilMs,
        level: lock.level,
      });
    }
    out.sort((a, b) => a.lockedUntil - b.lockedUntil);
    return out.slice(0, limit);
  }

  /** Drops an entry with neither state nor lock; true when it did. */
  dropIfEmpty(entry: Entry): boolean {
    if (entry.state !== undefined || entry.lock !== undefined) return false;
    this.remove(entry);
    return true;
  }

  remove(entry: Entry): void {
    this.#byRule.get(entry.rule)?.delete(entry.key);
    this.#queues.delete(entry);
    this.#locks.delete(entry);
  }

  create(rule: string, key: string, nowMs: number): Entry {
    const entry: Entry = {
      rule,
      key,
      state: undefined,
      stateExpiresAt: 0,
      lock: undefined,
      count: 0,
      exhausted: false,
      queue: -1,
      recent: false,
    };
    if (this.#queues.size >= this.#maxKeys) this.#evict(nowMs);
    let keys = this.#byRule.get(rule);
    if (keys === undefined) {
      keys = new Map();
      this.#byRule.set(rule, keys);
    }
    keys.set(key, entry);
    // Filed at once (as a count of 0), so the keys of one evaluation never push the store past maxKeys.
    this.#queues.place(entry, nowMs, false);
    return entry;
  }

  /** Drops every expired key. */
  sweep(nowMs: number): void {
    this.#queues.park();
    // Survivors are filed again: a lock that ended or a count that expired no longer holds its entry back.
    for (const entry of this.#queues.values())
      if (!this.#expire(entry, nowMs)) this.#queues.place(entry, nowMs);
  }

  clear(): void {
    this.#byRule.clear();
    this.#queues.clear();
    this.#locks.clear();
  }

  /** Forgets what has expired in an entry; true when nothing is left of it. */
  #expire(entry: Entry, nowMs: number): boolean {
    this.#forget(entry, nowMs);
    return this.dropIfEmpty(entry);
  }

  #forget(entry: Entry, nowMs: number): void {
    if (entry.state !== undefined && entry.stateExpiresAt <= nowMs) {
      entry.state = undefined;
      entry.stateExpiresAt = 0;
    }
    if (entry.lock !== undefined && entry.lock.forgetAtMs <= nowMs) {
      entry.lock = undefined;
      this.#locks.delete(entry);
    }
  }

  /**
   * Makes room for one key (see EvictionQueues for the order), and for more when the store had grown
   * past maxKeys while it held only keys that deny. A key that denies is never evicted, so a flood of new
   * keys cannot hand back an attacker's spent count, lock or escalation level; the store is never
   * cleared wholesale.
   */
  #evict(nowMs: number): void {
    const expire = (entry: Entry) => this.#expire(entry, nowMs);
    while (this.#queues.size >= this.#maxKeys) {
      const victim = this.#queues.victim(nowMs, expire, this.#busy);
      if (victim === undefined) {
        this.#warnFull(
          `the MemoryStore holds more than maxKeys (${this.#maxKeys}) keys: every key it could evict still denies (a lock, an escalation level or an exhausted count), and those are never evicted. Raise maxKeys, or use a RedisStore`,
        );
        return;
      }
      if (victim !== null) this.remove(victim);
    }
  }
}
