// Reservations: what an admitted decision consumed on rules that count outcomes, given back or cleared by `report`.

import type { OpResult, Store } from '../stores/store.js';
import type { Decision, Outcome, RuleResult } from '../types.js';
import { reservationIn, reservationOf } from './decision.js';
import type { RuleOp } from './op-builder.js';

interface Reservation {
  store: Store;
  /** False when the failure policy admitted the request: nothing was consumed, so nothing is refunded. */
  consumed: boolean;
  items: Array<{ op: RuleOp; receipt: number }>;
}

/**
 * `check` always consumes, so that N parallel attempts can never pass more than the limit; a rule
 * with `countOn` 'failure' or 'success' gives its unit back once the outcome says it does not count,
 * and a `resetOnSuccess` rule clears its count on success. Found by the decision's reservation id
 * (`RuleResult.reservation`), so a copy of the decision reports it too; forgotten once the decision the
 * limiter returned is dropped unreported (a copy alone does not keep it).
 */
export class Reservations {
  readonly #byId = new Map<number, Reservation>();
  readonly #dropped = new FinalizationRegistry<number>((id) => this.#byId.delete(id));

  /** Keeps what an admitted decision consumed on rules whose count depends on the outcome. */
  keep(
    decision: Decision,
    store: Store,
    consumed: boolean,
    ops: readonly RuleOp[],
    results: OpResult[],
  ): void {
    const items: Reservation['items'] = [];
    let id: number | undefined;
    for (let i = 0; i < ops.length; i++) {
      const op = ops[i] as RuleOp;
      const r = results[i] as OpResult;
      const rule = op.compiled;
      if (!r.allowed || op.cost === 0 || (rule.countOn === 'all' && !rule.resetOnSuccess)) continue;
      items.push({ op, receipt: r.receipt });
      id ??= reservationOf(decision);
      (decision.rules[i] as RuleResult).reservation = id;
    }
    if (id === undefined) return;
    const reservation: Reservation = { store, consumed, items };
    this.#byId.set(id, reservation);
    this.#dropped.register(decision, id, reservation);
  }

  /** True while a decision holds a reservation that no outcome has settled yet. */
  pending(decision: Decision): boolean {
    const id = reservationIn(decision);
    return id !== undefined && this.#byId.has(id);
  }

  /**
   * Settles a decision's reservation with its outcome, once: the store calls that give units back
   * and clear counts. Undefined when there is nothing to do (no reservation, already settled, or an
   * outcome that leaves every count as it is).
   */
  settle(decision: Decision, outcome: Outcome): Promise<void> | undefined {
    const id = reservationIn(decision);
    const reservation = id === undefined ? undefined : this.#byId.get(id);
    if (reservation === undefined) return undefined;
    this.#byId.delete(id as number);
    this.#dropped.unregister(reservation);
    const { store, consumed, items } = reservation;
    const refunds: Reservation['items'] = [];
    const clears: Reservation['items'] = [];
    for (const item of items) {
      const rule = item.op.compiled;
      if (outcome === 'success' && rule.resetOnSuccess) clears.push(item);
      else if (consumed && rule.countOn !== 'all' && rule.countOn !== outcome) refunds.push(item);
    }
    return refunds.length === 0 && clears.length === 0 ? undefined : settleWith(store, refunds, clears);
  }
}

async function settleWith(
  store: Store,
  refunds: Reservation['items'],
  clears: Reservation['items'],
): Promise<void> {
  if (refunds.length > 0) await store.refund(refunds);
  for (const { op } of clears) await store.reset(op.rule, op.key, { keepLock: true });
}
