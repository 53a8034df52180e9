// Held concurrency slots: each admitted decision's slots, renewed by this process while held, freed by `release`.

import type { OpResult, Refund, Store } from '../stores/store.js';
import { unrefTimer } from '../timers.js';
import type { Decision, RuleResult } from '../types.js';
import type { Observers, SlotEvent } from './observers.js';
import type { RuleOp } from './op-builder.js';

/** The slots one decision holds, in the store that decided it. */
interface Held {
  readonly store: Store;
  readonly slots: Refund[];
  /** Renewal ticks a release that failed has been tried again (see #tick). */
  tries: number;
  /** Renewal ticks since `letLapse` stopped renewing these slots; undefined while they are renewed. */
  unrenewed?: number;
}

/** Where a held slot is found: its id is unique per rule and key only. */
function slotId(rule: string, key: string, slot: number): string {
  return `${slot} ${rule.length} ${rule}${key}`;
}

export interface HoldingsParts {
  /** Every store call goes through the failure policy (timed, health kept). */
  call<T>(operation: string, promise: Promise<T>): Promise<T>;
  /** A store call that failed: the `storeError` event. */
  failed(error: unknown, operation: string): void;
  /** Slots of `rule` for `key` were freed in the store (calls waiting for one try again). */
  freed(rule: string, key: string): void;
  /** Told of the slots held, released and lapsed (metrics), when some observer listens. */
  observers: Observers;
}

/**
 * A slot is held from the decision that took it until `release` (found by the `slot` of its rule
 * results, so a copy of the decision releases it too); the process renews every slot it holds in one
 * call per store every `renewEveryMs` (a third of the shortest lease), so that only a holder whose
 * process died (or stalled longer than a lease) loses its slots, a lease after its last renewal. A
 * decision never released holds its slots as long as its process lives. A release that fails (the store
 * is down) is tried again at each renewal until the lease has run out on its own.
 */
export class Holdings {
  /** Held slots by rule, key and the id of each of their slots (slotId). */
  readonly #bySlot = new Map<string, Held>();
  /** The slots held, oldest first. */
  readonly #held = new Set<Held>();
  /** Releases that failed, tried again at the next renewals. */
  readonly #unreleased = new Set<Held>();
  readonly #renewEveryMs: number;
  readonly #parts: HoldingsParts;
  #timer: NodeJS.Timeout | undefined;
  #closed = false;

  constructor(renewEveryMs: number, parts: HoldingsParts) {
    this.#renewEveryMs = renewEveryMs;
    this.#parts = parts;
  }

  /** Slots held now by this process (for tests and metrics). */
  get size(): number {
    let slots = 0;
    for (const held of this.#held) for (const slot of held.slots) slots += slot.op.cost;
    return slots;
  }

  /**
   * Keeps the slots a decision took (its concurrency ops that consumed: those admitted, or every one when
   * `added`, a record), renewing them from now on; each such rule result gets its `slot`.
   */
  hold(
    decision: Decision,
    store: Store,
    ops: readonly RuleOp[],
    results: readonly OpResult[],
    added: boolean,
  ): void {
    if (this.#closed) return;
    let held: Held | undefined;
    for (let i = 0; i < ops.length; i++) {
      const op = ops[i] as RuleOp;
      const r = results[i] as OpResult;
      if (!op.compiled.facts.holdsSlots || op.cost === 0 || r.receipt === 0 || !(r.allowed || added))
        continue;
      held ??= { store, slots: [], tries: 0 };
      held.slots.push({ op, receipt: r.receipt });
      this.#bySlot.set(slotId(op.rule.name, op.key, r.receipt), held);
      (decision.rules[i] as RuleResult).slot = r.receipt;
    }
    if (held === undefined) return;
    this.#held.add(held);
    this.#tell(held, 'held');
    this.#schedule();
  }

  /**
   * Frees the slots a decision holds, once: undefined when it holds none (never did, or released already).
   * Observers are told once the store answered: `released` for each slot it still held, `lapsed` for one
   * it no longer did (this process stalled past the lease, or the key was reset), also when the late
   * release runs before the renewal that would have found it gone.
   */
  release(decision: Decision): Promise<void> | undefined {
    const freeing: Promise<void>[] = [];
    for (const r of decision.rules) {
      if (r.slot === undefined) continue;
      const held = this.#bySlot.get(slotId(r.rule, r.key, r.slot));
      if (held === undefined) continue;
      this.#forget(held);
      freeing.push(this.#free(held));
    }
    // The renewal timer is not cleared here: the next tick stops it when nothing is held by then. An app
    // whose requests do not overlap would otherwise clear it and arm it again on every request.
    if (freeing.length < 2) return freeing[0];
    return Promise.all(freeing).then(() => undefined);
  }

  /**
   * Stops renewing the slots a decision holds, and keeps them held: they lapse in the store a lease after
   * their last renewal, unless `release` frees them first (the adapters: a response begun by hand whose
   * client went, which its handler may still end, or never will). Then they are forgotten here, told
   * `lapsed`.
   */
  letLapse(decision: Decision): void {
    for (const r of decision.rules) {
      if (r.slot === undefined) continue;
      const held = this.#bySlot.get(slotId(r.rule, r.key, r.slot));
      if (held !== undefined && held.unrenewed === undefined) held.unrenewed = 0;
    }
  }

  /**
   * Stops renewing: held slots lapse a lease after their last renewal, and so do those whose release
   * failed and waits to be tried again.
   */
  close(): void {
    this.#closed = true;
    for (const held of this.#held) this.#tell(held, 'lapsed');
    for (const held of this.#unreleased) this.#tell(held, 'lapsed');
    this.#held.clear();
    this.#bySlot.clear();
    this.#unreleased.clear();
    this.#unschedule();
  }

  #tell(held: Held, change: SlotEvent['change']): void {
    const observers = this.#parts.observers;
    if (!observers.slotChanges) return;
    for (const { op } of held.slots) observers.slot(op.rule.name, op.cost, change);
  }

  #forget(held: Held): void {
    this.#held.delete(held);
    for (const { op, receipt } of held.slots) this.#bySlot.delete(slotId(op.rule.name, op.key, receipt));
  }

  /** Frees a held's slots in its store: the release's promise, its outcome handled (it never rejects). */
  #free(held: Held): Promise<void> {
    let refunded: Promise<boolean[] | undefined>;
    try {
      // Undefined from a store that does not say (see Store.refund).
      refunded = this.#parts.call('release', held.store.refund(held.slots) as Promise<boolean[] | undefined>);
    } catch (error) {
      refunded = Promise.reject(error);
    }
    return refunded.then(
      (stillHeld) => this.#freed(held, stillHeld),
      (error: unknown) => this.#retry(held, error),
    );
  }

  /**
   * The store answered a release: observers are told each slot `released`, or `lapsed` where the store
   * said it no longer held it; calls waiting for a slot of these keys try again.
   */
  #freed(held: Held, stillHeld: boolean[] | undefined): void {
    const observers = this.#parts.observers;
    const slots = held.slots;
    for (let k = 0; k < slots.length; k++) {
      const { op } = slots[k] as Refund;
      if (observers.slotChanges)
        observers.slot(op.rule.name, op.cost, stillHeld?.[k] === false ? 'lapsed' : 'released');
      this.#parts.freed(op.rule.name, op.key);
    }
  }

  /** A release that failed: reported, tried again at the next renewals. */
  #retry(held: Held, error: unknown): void {
    this.#parts.failed(error, 'release');
    if (this.#closed) return;
    this.#unreleased.add(held);
    this.#schedule();
  }

  #schedule(): void {
    if (this.#timer !== undefined) return;
    this.#timer = setInterval(() => void this.#tick(), this.#renewEveryMs);
    unrefTimer(this.#timer);
  }

  #unschedule(): void {
    if (this.#held.size > 0 || this.#unreleased.size > 0 || this.#timer === undefined) return;
    clearInterval(this.#timer);
    this.#timer = undefined;
  }

  /** One renewal: every slot held, one call per store; and the failed releases tried again. */
  async #tick(): Promise<void> {
    const byStore = new Map<Store, Held[]>();
    for (const held of this.#held) {
      if (held.unrenewed !== undefined) {
        // Three renewal periods are a lease: by then the store has let them lapse.
        if (++held.unrenewed >= 3) {
          this.#forget(held);
          this.#tell(held, 'lapsed');
        }
        continue;
      }
      const list = byStore.get(held.store);
      if (list === undefined) byStore.set(held.store, [held]);
      else list.push(held);
    }
    const retries = [...this.#unreleased];
    this.#unreleased.clear();
    for (const held of retries) {
      // Three renewal periods are a lease: by then the slots have lapsed without us.
      if (++held.tries < 3) void this.#free(held);
      else this.#tell(held, 'lapsed');
    }
    await Promise.all([...byStore].map(([store, list]) => this.#renew(store, list)));
    this.#unschedule();
  }

  async #renew(store: Store, list: Held[]): Promise<void> {
    const slots = list.flatMap((held) => held.slots);
    let stillHeld: boolean[];
    try {
      stillHeld = await this.#parts.call('renew', (store.renew as NonNullable<Store['renew']>)(slots));
    } catch (error) {
      // Tried again at the next renewal, a third of a lease later.
      this.#parts.failed(error, 'renew');
      return;
    }
    let at = 0;
    for (const held of list) {
      let any = false;
      for (let k = 0; k < held.slots.length; k++) if (stillHeld[at + k] === true) any = true;
      at += held.slots.length;
      // Lapsed (this process stalled longer than a lease) or reset by an operator: nothing left to renew.
      if (!any && this.#held.has(held)) {
        this.#forget(held);
        this.#tell(held, 'lapsed');
      }
    }
  }
}
