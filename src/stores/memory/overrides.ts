// The memory store's overrides: per rule and key, or for a whole rule, the limit an operator set, until it
// expires or is cleared.
import type { RuleLimit } from '../../types.js';
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
  /** Rule-wide limits, by rule: for the keys without an override of their own. */
  readonly #ruleWide = new Map<string, Override>();
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

  /** Sets (`limit` null: clears) the rule-wide limit of `rule`. */
  setRule(rule: string, limit: number | null, untilMs: number): void {
    if (limit === null) {
      if (this.#ruleWide.delete(rule)) this.#size--;
      return;
    }
    if (!this.#ruleWide.has(rule)) this.#size++;
    this.#ruleWide.set(rule, { limit, untilMs });
  }

  /** The rule-wide limits in force at `nowMs` among `rules`. */
  ruleLimits(rules: readonly string[], nowMs: number): RuleLimit[] {
    const out: RuleLimit[] = [];
    for (const rule of rules) {
      const found = this.#ruleWide.get(rule);
      if (found === undefined || found.untilMs <= nowMs) continue;
      out.push(
        found.untilMs === Number.POSITIVE_INFINITY ? { rule, limit: found.limit } : { rule, ...found },
      );
    }
    return out;
  }

  /**
   * The override in force for the op's rule and key at `nowMs`: the key's own, else the rule-wide
   * limit, or undefined (an expired one is dropped).
   */
  find(op: StoreOp, nowMs: number): number | undefined {
    const found = this.#byRule.get(op.rule.name)?.get(op.key);
    if (found !== undefined) {
      if (nowMs < found.untilMs) return found.limit;
      this.delete(op.rule.name, op.key);
    }
    const wide = this.#ruleWide.get(op.rule.name);
    if (wide === undefined) return undefined;
    if (nowMs < wide.untilMs) return wide.limit;
    this.setRule(op.rule.name, null, 0);
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
    for (const [rule, found] of this.#ruleWide) if (found.untilMs <= nowMs) this.setRule(rule, null, 0);
  }

  clear(): void {
    this.#byRule.clear();
    this.#ruleWide.clear();
    this.#size = 0;
  }
}
