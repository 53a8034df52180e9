// Local deny cache: keys a shared store denied, answered in-process until their retry time, bounded in entries.
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
