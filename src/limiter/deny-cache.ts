// Local deny cache: denials of a shared store, answered in-process while the store would answer the same.

import type { RuleResult } from '../types.js';
import type { RuleOp } from './op-builder.js';

interface Cached {
  result: RuleResult;
  /** The store's clock when the request that got this answer was sent (`store.now()`). */
  atMs: number;
  /** Until when the store would give the same answer. */
  untilMs: number;
  /** The cost the answer is for; undefined for a lock, which denies every cost. */
  cost: number | undefined;
  /**
   * The limit the request asked for (`StoreOp.limit`); undefined for a lock. A request at another
   * limit (a limit function giving more after a plan upgrade) is the store's to decide.
   */
  limit: number | undefined;
}

/**
 * What a shared store denied, answered without asking it again, and only while it would answer the
 * same: a lock (any cost, until it ends), or a denial of a rule whose count only time or `reset` can
 * lower, for requests of the same cost (a cost 0 or a smaller cost may pass: the store decides it),
 * until a unit comes back or the request would be admitted, whichever is first. A rule that counts
 * outcomes may get units back from `report`, so its denials are not kept.
 *
 * Times are on the store's clock and anchored where the request was sent, not at the store's own
 * "now" in its answer: the store's clock as seen from this process (`store.now()`, Redis time
 * estimated from an offset) may be some ms off the server's, and measuring both ends of an entry
 * with it cancels that offset. An answer sent before the store decided can only end early, never
 * late, so the cache never refuses what the store would admit.
 */
export class DenyCache {
  readonly #entries = new Map<string, Cached>();
  readonly #maxKeys: number;

  constructor(maxKeys: number) {
    this.#maxKeys = maxKeys;
  }

  get size(): number {
    return this.#entries.size;
  }

  /**
   * The cached denial of `rule` for `key` at `nowMs`, for a request of `cost`, with its times counted
   * down; undefined when none applies.
   */
  get(rule: string, key: string, nowMs: number, cost: number, limit?: number): RuleResult | undefined {
    const id = `${rule}\u0000${key}`;
    const cached = this.#entries.get(id);
    if (cached === undefined || (cached.cost !== undefined && cached.cost !== cost)) return undefined;
    if (cached.limit !== undefined && limit !== undefined && cached.limit !== limit) return undefined;
    if (nowMs >= cached.untilMs) {
      this.#entries.delete(id);
      return undefined;
    }
    const elapsed = Math.max(0, nowMs - cached.atMs);
    const result = cached.result;
    return {
      ...result,
      resetMs: Math.max(0, result.resetMs - elapsed),
      retryAfterMs: Math.max(1, (result.retryAfterMs ?? 0) - elapsed),
    };
  }

  /** The first cached denial among a request's ops; dry-run rules never deny, so they are not looked up. */
  find(ops: readonly RuleOp[], nowMs: number): RuleResult | undefined {
    // Nothing denied lately (the usual case): no id to build per op.
    if (this.#entries.size === 0) return undefined;
    for (const op of ops) {
      const cached = op.rule.dryRun ? undefined : this.get(op.rule.name, op.key, nowMs, op.cost, op.limit);
      if (cached !== undefined) return cached;
    }
    return undefined;
  }

  /**
   * Learns from the shared store's own answer to a request sent at `atMs`: a 'check' it denied is
   * remembered when the cache can answer for the store; any other answer about a key (admitted, or
   * a 'record' that added to it) means what was remembered of that key may be out of date: forgotten.
   */
  learn(
    ops: readonly RuleOp[],
    results: readonly RuleResult[],
    mode: 'check' | 'record',
    atMs: number,
  ): void {
    for (let i = 0; i < ops.length; i++) {
      const op = ops[i] as RuleOp;
      const r = results[i] as RuleResult;
      if (mode === 'check' && !r.allowed && !r.dryRun && this.#remember(op, r, atMs)) continue;
      if (this.#entries.size > 0) this.delete(op.rule.name, op.key);
    }
  }

  /** Remembers a denial the cache can answer for the store; false when it cannot. */
  #remember(op: RuleOp, r: RuleResult, atMs: number): boolean {
    const retryAfterMs = r.retryAfterMs ?? 0;
    if (r.locked) {
      this.set(r, atMs, atMs + retryAfterMs, undefined);
      return true;
    }
    const facts = op.compiled.facts;
    if (facts.countsOutcomes) return false;
    // A slot frees whenever its holder releases it, in any process: no time the denial surely holds for.
    if (facts.holdsSlots) return false;
    // Decided at an override's limit rather than the one asked for: once the override ends (its 'for'
    // runs out) the key's limit is the request's again, which the denial says nothing about.
    if (r.limit !== op.limit) return false;
    // A bucket in debt (a record took it past its capacity) counts down with every unit that drips back,
    // before any unit is free: its count would go stale in the cache. (A window's count only ever resets.)
    if (facts.bucket && r.count > facts.capacity(r.limit)) return false;
    // After resetMs a unit is back (remaining and count change), after retryAfterMs this cost fits.
    const sameForMs = Math.min(r.resetMs, retryAfterMs);
    if (sameForMs <= 0) return false;
    this.set(r, atMs, atMs + sameForMs, op.cost, op.limit);
    return true;
  }

  /**
   * Remembers `result`, the answer to a request sent at `atMs`, until `untilMs`, for requests of
   * `cost` and `limit` (undefined: every cost, every limit). The oldest entry makes room when full.
   */
  set(result: RuleResult, atMs: number, untilMs: number, cost: number | undefined, limit?: number): void {
    const id = `${result.rule}\u0000${result.key}`;
    this.#entries.delete(id);
    if (this.#entries.size >= this.#maxKeys) {
      const oldest = this.#entries.keys().next();
      if (!oldest.done) this.#entries.delete(oldest.value);
    }
    this.#entries.set(id, { result, atMs, untilMs, cost, limit });
  }

  delete(rule: string, key: string): void {
    this.#entries.delete(`${rule}\u0000${key}`);
  }

  /** Forgets every key of a rule (its rule-wide limit changed): rare, so a walk over the entries. */
  deleteRule(rule: string): void {
    const prefix = `${rule}\u0000`;
    for (const id of this.#entries.keys()) if (id.startsWith(prefix)) this.#entries.delete(id);
  }

  clear(): void {
    this.#entries.clear();
  }
}
