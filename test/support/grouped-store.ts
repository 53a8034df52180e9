// A store whose every rule is grouped (StoreRule.grouped): on RedisStore every fixed, calendar,
// token-bucket and gcra rule then keeps its state in its identity's record (lua/identity-record.lua), so the
// conformance suite, written with one rule per key mostly, runs on that layout too.
import type {
  EvalMode,
  EvalResult,
  HeldSlot,
  Refund,
  Store,
  StoreLiveness,
  StoreOp,
  StoreRule,
} from '../../src/stores/store.js';
import type { LockInfo } from '../../src/types.js';

export function groupingEveryRule(store: Store): Store {
  const copies = new WeakMap<StoreRule, StoreRule>();
  const grouped = (rule: StoreRule): StoreRule => {
    let copy = copies.get(rule);
    if (copy === undefined) {
      copy = { ...rule, grouped: true };
      copies.set(rule, copy);
    }
    return copy;
  };
  const op = (o: StoreOp): StoreOp => ({ ...o, rule: grouped(o.rule) });
  const refund = (r: Refund): Refund => ({ op: op(r.op), receipt: r.receipt });
  const wrapped: Store = {
    local: store.local,
    ...(store.liveness && { liveness: store.liveness as StoreLiveness }),
    now: () => store.now(),
    evaluate: (ops: readonly StoreOp[], mode: EvalMode): Promise<EvalResult> =>
      store.evaluate(ops.map(op), mode),
    refund: (refunds: readonly Refund[]) => store.refund(refunds.map(refund)),
    reset: (rule: StoreRule, key: string, options?: { keepLock?: boolean }) =>
      store.reset(grouped(rule), key, options),
    locked: (rule: StoreRule, limit: number): Promise<LockInfo[]> => store.locked(grouped(rule), limit),
    close: () => store.close(),
  };
  if (store.renew) {
    const renew = store.renew.bind(store);
    wrapped.renew = (slots: readonly Refund[]) => renew(slots.map(refund));
  }
  if (store.holders) {
    const holders = store.holders.bind(store);
    wrapped.holders = (rule: StoreRule, key: string, limit: number): Promise<HeldSlot[]> =>
      holders(grouped(rule), key, limit);
  }
  if (store.override) {
    const override = store.override.bind(store);
    wrapped.override = (
      rule: StoreRule,
      key: string | null,
      limit: number | null,
      forMs?: number,
      windowMs?: number,
    ) => override(grouped(rule), key, limit, forMs, windowMs);
  }
  if (store.limits) {
    const limits = store.limits.bind(store);
    wrapped.limits = (rules: readonly StoreRule[]) => limits(rules.map(grouped));
  }
  if (store.onChange) wrapped.onChange = store.onChange.bind(store);
  return wrapped;
}
