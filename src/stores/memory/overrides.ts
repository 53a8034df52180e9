// The memory store's overrides: per rule and key, or for a whole rule, the limit an operator set (a key's may
// set its window too, or only), until it expires or is cleared.
import type { RuleLimit } from '../../types.js';
import type { StoreOp } from '../store.js';

interface Override {
  /** Undefined: a key's override that sets only the window (the limit is the rule-wide one, else the op's). */
  limit: number | undefined;
  /** A key's window size in ms (Store.override's windowMs); undefined: the op's. */
  windowMs?: number | undefined;
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

  set(rule: string, key: string, limit: number | undefined, untilMs: number, windowMs?: number): void {
    let keys = this.#byRule.get(rule);
    if (keys === undefined) {
      keys = new Map();
      this.#byRule.set(rule, keys);
    }
    if (!keys.has(key)) this.#size++;
    keys.set(key, { limit, untilMs, windowMs });
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
      if (found === undefined || found.untilMs <= nowMs || found.limit === undefined) continue;
      out.push(
        found.untilMs === Number.POSITIVE_INFINITY
          ? { rule, limit: found.limit }
          : { rule, limit: found.limit, untilMs: found.untilMs },
      );
    }
    return out;
  }

  /**
   * The key's own override in force at `nowMs` (an expired one is dropped), else undefined.
   */
  #own(op: StoreOp, nowMs: number): Override | undefined {
    const found = this.#byRule.get(op.rule.name)?.get(op.key);
    if (found === undefined || nowMs < found.untilMs) return found;
    this.delete(op.rule.name, op.key);
    return undefined;
  }

  /** The rule-wide limit in force at `nowMs` (an expired one is dropped), else undefined. */
  #wide(rule: string, nowMs: number): number | undefined {
    const wide = this.#ruleWide.get(rule);
    if (wide === undefined) return undefined;
    if (nowMs < wide.untilMs) return wide.limit;
    this.setRule(rule, null, 0);
    return undefined;
  }

  /**
   * The op as decided under the overrides in force, if any: the same op when there is none. The limit is
   * the key's override's, else the rule-wide limit; a window the key's override sets replaces the rule's
   * size (a new rule object, by which the store knows to report `windowMs`).
   */
  apply(op: StoreOp, nowMs: number): StoreOp {
    if (this.#size === 0) return op;
    const own = this.#own(op, nowMs);
    const limit = own?.limit ?? this.#wide(op.rule.name, nowMs);
    const windowMs = own?.windowMs;
    if (windowMs !== undefined) {
      return { ...op, limit: limit ?? op.limit, rule: { ...op.rule, sizeMs: windowMs } };
    }
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
