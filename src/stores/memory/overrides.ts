// The memory store's overrides: per rule and key, the limit an operator set, until it expires or is cleared.
import type { StoreOp } from '../store.js';

interface Override {
  limit: number;
  /** Epoch ms (store clock) the override ends; Infinity when it does not. */
  untilMs: number;
}

/**
 * Kept apart from the counting entries: an override outlives an empty count, is never evicted to make
 * room (an operator set it), and costs a decision nothing while none is set (`size` is checked first).
 */
export class OverrideTable {
  readonly #byRule = new Map<string, Map<string, Override>>();
  #size = 0;

  /** Overrides held (expired ones until they are next looked at or swept). */
  get size(): number {
    return this.#size;
  }

  set(rule: string, key: string, limit: number, untilMs: number): void {
    let keys = this.#byRule.get(rule);
    if (keys === undefined) {
      keys = new Map();
      this.#byRule.set(rule, keys);
    }
    if (!keys.has(key)) this.#size++;
    keys.set(key, { limit, untilMs });
  }

  delete(rule: string, key: string): void {
    const keys = this.#byRule.get(rule);
    if (keys?.delete(key) !== true) return;
    this.#size--;
    if (keys.size === 0) this.#byRule.delete(rule);
  }

  /** The override in force for the op's rule and key at `nowMs`, or undefined (an expired one is dropped). */
  find(op: StoreOp, nowMs: number): number | undefined {
    const found = this.#byRule.get(op.rule.name)?.get(op.key);
    if (found === undefined) return undefined;
    if (nowMs < found.untilMs) return found.limit;
    this.delete(op.rule.name, op.key);
    return undefined;
  }

  /** The op as decided under the override in force, if any: the same op when there is none. */
  apply(op: StoreOp, nowMs: number): StoreOp {
    if (this.#size === 0) return op;
    const limit = this.find(op, nowMs);
    return limit === undefined ? op : { ...op, limit };
  }

  /** Drops every expired override. */
  sweep(nowMs: number): void {
    for (const [rule, keys] of this.#byRule) {
      for (const [key, found] of keys) if (found.untilMs <= nowMs) this.delete(rule, key);
    }
  }

  clear(): void {
    this.#byRule.clear();
    this.#size = 0;
  }
}
