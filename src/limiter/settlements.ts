// Settled costs: what an admitted decision reserved on `settle: true` rules (the estimate), replaced by the actual cost.

import { describe, RateLimitRequestError } from '../errors.js';
import type { OpResult, Refund, Store } from '../stores/store.js';
import type { Decision, RuleResult } from '../types.js';
import { decide, reservationIn, reservationOf } from './decision.js';
import type { RuleOp } from './op-builder.js';

/** The error a bad actual cost is refused with; undefined for a non-negative integer. */
export function settleCostError(cost: unknown): RateLimitRequestError | undefined {
  if (typeof cost === 'number' && Number.isSafeInteger(cost) && cost >= 0) return undefined;
  return new RateLimitRequestError(
    'ERR_COST',
    `settle: cost must be a non-negative integer (the actual cost), got ${describe(cost)}`,
  );
}

/** The estimate one rule reserved, and the receipt that finds it again. */
interface Estimate {
  readonly op: RuleOp;
  readonly receipt: number;
}

interface Pending {
  readonly store: Store;
  readonly items: Estimate[];
  /** The first settle's answer: a decision settles once. */
  settled: Promise<Decision> | undefined;
}

export interface SettlementParts {
  /** The ops of `rules` on `key` at `cost`, as a decision now would build them (calendar periods of now). */
  rebuild(op: RuleOp, cost: number): RuleOp;
  /** A store call under the failure policy. */
  call<T>(operation: string, promise: Promise<T>): Promise<T>;
  /** A store call that failed: the `storeError` event. */
  failed(error: unknown, operation: string): void;
  /** Units given back to a key: a denial the deny cache remembers of it may be out of date. */
  forget(rule: string, key: string): void;
}

/**
 * A `settle: true` rule reserves its cost (the estimate) at `check`, as any rule does, so that parallel
 * requests never pass more than the limit on estimates; `settle(decision, cost)` then moves each such
 * rule's count from the estimate to `cost`: a cost above it is added now, to the window current now, even
 * past the limit (a debt the window pays off: later requests wait), one below it gives the difference back,
 * as `report` gives a reservation back (only to the window that holds it). Store faults change nothing
 * (the estimate stands) and are told as `storeError`. Found by the decision's reservation id
 * (`RuleResult.reservation`), so a copy of the decision settles it too; forgotten once the decision the
 * limiter returned is dropped.
 */
export class Settlements {
  readonly #byId = new Map<number, Pending>();
  readonly #dropped = new FinalizationRegistry<number>((id) => this.#byId.delete(id));
  readonly #parts: SettlementParts;

  constructor(parts: SettlementParts) {
    this.#parts = parts;
  }

  /** Keeps the estimates an admitted decision reserved on `settle` rules. */
  keep(decision: Decision, store: Store, ops: readonly RuleOp[], results: readonly OpResult[]): void {
    const items: Estimate[] = [];
    let id: number | undefined;
    for (let i = 0; i < ops.length; i++) {
      const op = ops[i] as RuleOp;
      const r = results[i] as OpResult;
      if (!op.compiled.settle || !r.allowed) continue;
      items.push({ op, receipt: r.receipt });
      id ??= reservationOf(decision);
      (decision.rules[i] as RuleResult).reservation = id;
    }
    if (id === undefined) return;
    this.#byId.set(id, { store, items, settled: undefined });
    this.#dropped.register(decision, id);
  }

  /**
   * Settles a decision at `cost` (a non-negative integer, else `RateLimitRequestError` `ERR_COST` and
   * nothing changes), once: a later settle changes nothing and answers as the first did. A decision
   * with nothing to settle (denied, no `settle` rule) is answered as it is.
   */
  settle(decision: Decision, cost: number): Promise<Decision> {
    const refused = settleCostError(cost);
    if (refused !== undefined) return Promise.reject(refused);
    const id = reservationIn(decision);
    const pending = id === undefined ? undefined : this.#byId.get(id);
    if (pending === undefined) return Promise.resolve(decision);
    // The settled decision carries the same id (its rules are copies): settling it answers the same.
    pending.settled ??= this.#settle(decision, pending, cost);
    return pending.settled;
  }

  async #settle(decision: Decision, pending: Pending, cost: number): Promise<Decision> {
    const { rebuild } = this.#parts;
    const adds: RuleOp[] = [];
    const refunds: Refund[] = [];
    for (const { op, receipt } of pending.items) {
      const delta = cost - op.cost;
      if (delta > 0) adds.push(rebuild(op, delta));
      else if (delta < 0) refunds.push({ op: { ...op, cost: -delta }, receipt });
    }
    const figures = new Map<string, OpResult>();
    const { store } = pending;
    const learn = async (ops: RuleOp[], mode: 'record' | 'peek') => {
      const { results } = await this.#parts.call('settle', store.evaluate(ops, mode));
      for (let i = 0; i < ops.length; i++) figures.set((ops[i] as RuleOp).rule.name, results[i] as OpResult);
    };
    try {
      if (adds.length > 0) await learn(adds, 'record');
      if (refunds.length > 0) {
        await this.#parts.call<unknown>('settle', store.refund(refunds));
        for (const { op } of refunds) this.#parts.forget(op.rule.name, op.key);
        await learn(
          refunds.map(({ op }) => rebuild(op as RuleOp, 0)),
          'peek',
        );
      }
    } catch (error) {
      // What failed changed nothing: an estimate that stands never admits more than the limit.
      this.#parts.failed(error, 'settle');
    }
    // The request stays admitted; the settled rules show their counts after the settle.
    const rules = decision.rules.map((r) => {
      const now = figures.get(r.rule);
      if (now === undefined) return r;
      const settled: RuleResult = { ...r, remaining: now.remaining, count: now.count, resetMs: now.resetMs };
      return settled;
    });
    return decide(rules);
  }
}
