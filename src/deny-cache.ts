// Local deny cache: keys a shared store denied, answered in-process until their retry time, bounded in entries.
import type { RuleOp } from './request-ops.js';
import type { RuleResult } from './types.js';

interface Cached {
  untilMs: number;
  result: RuleResult;
}

export class DenyCache {
  readonly #entries = new Map<string, Cached>();
  readonly #maxKeys: number;

  constructor(maxKeys: number) {
    this.#maxKeys = maxKeys;
  }

  get size(): number {
    return this.#entries.size;
  }

  /** The cached denial of `rule` for `key`, with its times counted down to `nowMs`; undefined when none. */
  get(rule: string, key: string, nowMs: number): RuleResult | undefined {
    const id = `${rule}\u0000${key}`;
    const cached = this.#entries.get(id);
    if (cached === undefined) return undefined;
    const left = cached.untilMs - nowMs;
    if (left <= 0) {
      this.#entries.delete(id);
      return undefined;
    }
    return { ...cached.result, resetMs: left, retryAfterMs: Math.max(1, left) };
  }

  /** The first cached denial among a request's ops; dry-run rules never deny, so they are not looked up. */
  find(ops: readonly RuleOp[], nowMs: number): RuleResult | undefined {
    for (const op of ops) {
      const cached = op.rule.dryRun ? undefined : this.get(op.rule.name, op.key, nowMs);
      if (cached !== undefined) return cached;
    }
    return undefined;
  }

  /**
   * Remembers the shared store's own denial of an op when nothing can pass it: a lock (until it ends),
   * or no unit left on a rule whose count only time or `reset` can lower (until `resetMs`); a rule
   * that counts outcomes may get units back from `report`, so its denials are not kept.
   */
  remember(op: RuleOp, r: RuleResult, nowMs: number): void {
    const rule = op.compiled;
    if (r.locked) this.set(r, nowMs + (r.retryAfterMs ?? 0));
    else if (r.remaining === 0 && rule.countOn === 'all' && !rule.resetOnSuccess)
      this.set(r, nowMs + r.resetMs);
  }

  /**
   * Remembers a denial that nothing can pass until `untilMs`: a lock, or a rule with no units left.
   * The oldest entry makes room when full.
   */
  set(result: RuleResult, untilMs: number): void {
    const id = `${result.rule}\u0000${result.key}`;
    this.#entries.delete(id);
    if (this.#entries.size >= this.#maxKeys) {
      const oldest = this.#entries.keys().next();
      if (!oldest.done) this.#entries.delete(oldest.value);
    }
    this.#entries.set(id, { untilMs, result });
  }

  delete(rule: string, key: string): void {
    this.#entries.delete(`${rule}\u0000${key}`);
  }

  clear(): void {
    this.#entries.clear();
  }
}
