// Held concurrency slots: each admitted decision's slots, renewed by this process while held, freed by `release`.

import type { OpResult, Refund, Settler, Store } from '../stores/store.js';
import type { Decision, RuleResult } from '../types.js';
import type { Observers, SlotEvent } from './observers.js';
import type { RuleOp } from './op-builder.js';

/**
 * The slots one decision holds, in the store that decided it. Released through a batch (ReleaseBatch), it
 * is the settler of its own store call: the store's answer is kept here, no object made per release.
 */
class Held implements Settler<boolean[] | undefined> {
  readonly store: Store;
  readonly slots: Refund[] = [];
  /** Renewal ticks a release that failed has been tried again (see #tick). */
  tries = 0;
  /** Whether it is in the list of slots held; its neighbours there (see Holdings #first). */
  listed = false;
  prev: Held | undefined = undefined;
  next: Held | undefined = undefined;
  /** The batch its release went out in, told when the store answered. */
  batch: ReleaseBatch | undefined = undefined;
  /** Whether the store answered its release (in its batch), and that answer: per slot, still held. */
  answered = false;
  stillHeld: boolean[] | undefined = undefined;

  constructor(store: Store) {
    this.store = store;
  }

  resolve(stillHeld: boolean[] | undefined): void {
    this.answered = true;
    this.stillHeld = stillHeld;
    this.batch?.answered();
  }

  reject(error: unknown): void {
    this.batch?.failed(error);
  }
}

/**
 * The key of a slot id in Holdings' index: the id's low 30 bits, a small integer (ids are about 2^50,
 * numbers V8 keeps on the heap and hashes in its runtime). Ids that share a key are told apart by `holds`.
 */
function slotKey(slot: number): number {
  return slot % 1073741824;
}

export interface HoldingsParts {
  /** Every store call goes through the failure policy (timed, health kept). */
  call<T>(operation: string, promise: Promise<T>): Promise<T>;
  /** `call` for a store call that settles a settler (a store's `refundInto`). */
  callInto<T>(operation: string, send: (into: Settler<T>) => void): Promise<T>;
  /** A store call that failed: the `storeError` event. */
  failed(error: unknown, operation: string): void;
  /** Slots of `rule` for `key` were freed in the store (calls waiting for one try again). */
  freed(rule: string, key: string): void;
  /** Told of the slots held, released and lapsed (metrics), when some observer listens. */
  observers: Observers;
}

/** Whether `held` holds the slots of `rule` for `key` from `slot` on (a rule result's `slot`). */
function holds(held: Held, rule: string, key: string, slot: number): boolean {
  for (const { op, receipt } of held.slots) {
    if (receipt === slot && op.rule.name === rule && op.key === key) return true;
  }
  return false;
}

/**
 * The releases of one turn to a store that batches its refunds per turn (`refundInto`): one promise and
 * one deadline for them all, not one per release. Each release is handed to the store at once (its own
 * batch is sent when the turn ends, or earlier ahead of a decision), its Held the call's settler, which
 * tells the batch; the batch settles its deadline once the store has answered every one of them, and
 * rejects it when one failed.
 */
class ReleaseBatch {
  readonly store: Store;
  readonly helds: Held[] = [];
  /** Settles when every release of the batch was answered (never rejects: failures are handled). */
  done!: Promise<void>;
  /** Takes releases until its turn ends or it settled (a store that failed at once). */
  open = true;
  readonly #into: NonNullable<Store['refundInto']>;
  /** The deadline's settler, given at once by `callInto`. */
  #settler: Settler<void> | undefined;
  /** Store calls made and not answered yet. */
  #waiting = 0;
  #failure: { error: unknown } | undefined;

  constructor(store: Store, into: NonNullable<Store['refundInto']>) {
    this.store = store;
    this.#into = into;
  }

  start(settler: Settler<void>): void {
    this.#settler = settler;
  }

  add(held: Held): Promise<void> {
    this.helds.push(held);
    this.#waiting++;
    held.batch = this;
    held.answered = false;
    held.stillHeld = undefined;
    this.#into.call(this.store, held.slots, held);
    return this.done;
  }

  /** One of its releases was answered. */
  answered(): void {
    if (--this.#waiting > 0) return;
    this.open = false;
    const settler = this.#settler as Settler<void>;
    if (this.#failure === undefined) settler.resolve();
    else settler.reject(this.#failure.error);
  }

  /** One of its releases failed. */
  failed(error: unknown): void {
    this.#failure ??= { error };
    this.answered();
  }
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
  /**
   * Held slots by the key (slotKey) of the id of their first slot: ids are unique per rule and key only
   * (fresh keys taken in the same millisecond share one), so an entry is one Held or the few that share
   * the key. A number keys the map without a string made and hashed per request.
   */
  readonly #bySlot = new Map<number, Held | Held[]>();
  /**
   * The slots held, a list linked through each Held (newest first): added and taken out without a
   * collection's hashing per request.
   */
  #first: Held | undefined;
  /** Releases that failed, tried again at the next renewals. */
  readonly #unreleased = new Set<Held>();
  /** The release batches of this turn, one per store that batches refunds (usually one store). */
  readonly #batches: ReleaseBatch[] = [];
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
    for (let held = this.#first; held !== undefined; held = held.next) {
      for (const slot of held.slots) slots += slot.op.cost;
    }
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
      held ??= new Held(store);
      held.slots.push({ op, receipt: r.receipt });
      this.#index(r.receipt, held);
      (decision.rules[i] as RuleResult).slot = r.receipt;
    }
    if (held === undefined) return;
    this.#list(held);
    this.#tell(held, 'held');
    this.#schedule();
  }

  /**
   * Frees the slots a decision holds, once: undefined when it holds none (never did, or released already).
   * Observers are told once the store answered: `released` for each slot it still held, `lapsed` for one
   * it no longer did (this process stalled past the lease, or the key was reset), also when the late
   * release runs before the renewal that would have found it gone. On a store that batches its refunds per turn (`refundInto`), the releases of one turn
   * share one promise and one deadline (see ReleaseBatch): a release per request makes none of its own.
   */
  release(decision: Decision): Promise<void> | undefined {
    // One decision's slots are one Held (see hold): found once, one promise and no Promise.all for it.
    let first: Promise<void> | undefined;
    let work: Promise<void>[] | undefined;
    for (const r of decision.rules) {
      if (r.slot === undefined) continue;
      const held = this.#find(r.rule, r.key, r.slot);
      if (held === undefined) continue;
      this.#forget(held);
      const freeing = this.#free(held);
      if (first === undefined) first = freeing;
      else if (first !== freeing) {
        if (work === undefined) work = [first, freeing];
        else if (!work.includes(freeing)) work.push(freeing);
      }
    }
    // The renewal timer is not cleared here: the next tick stops it when nothing is held by then. An app
    // whose requests do not overlap would otherwise clear it and arm it again on every request.
    return work === undefined ? first : Promise.all(work).then(() => undefined);
  }

  /**
   * Stops renewing: held slots lapse a lease after their last renewal, and so do those whose release
   * failed and waits to be tried again.
   */
  close(): void {
    this.#closed = true;
    for (let held = this.#first; held !== undefined; held = held.next) {
      held.listed = false;
      this.#tell(held, 'lapsed');
    }
    for (const held of this.#unreleased) this.#tell(held, 'lapsed');
    this.#first = undefined;
    this.#bySlot.clear();
    this.#unreleased.clear();
    this.#unschedule();
  }

  #tell(held: Held, change: SlotEvent['change']): void {
    const observers = this.#parts.observers;
    if (!observers.slotChanges) return;
    for (const { op } of held.slots) observers.slot(op.rule.name, op.cost, change);
  }

  #list(held: Held): void {
    const first = this.#first;
    held.next = first;
    held.prev = undefined;
    if (first !== undefined) first.prev = held;
    this.#first = held;
    held.listed = true;
  }

  #unlist(held: Held): void {
    if (!held.listed) return;
    const { prev, next } = held;
    if (prev === undefined) this.#first = next;
    else prev.next = next;
    if (next !== undefined) next.prev = prev;
    held.prev = undefined;
    held.next = undefined;
    held.listed = false;
  }

  #index(slot: number, held: Held): void {
    const at = slotKey(slot);
    const found = this.#bySlot.get(at);
    if (found === undefined) this.#bySlot.set(at, held);
    else if (Array.isArray(found)) {
      if (!found.includes(held)) found.push(held);
    } else if (found !== held) this.#bySlot.set(at, [found, held]);
  }

  #find(rule: string, key: string, slot: number): Held | undefined {
    const found = this.#bySlot.get(slotKey(slot));
    if (found === undefined || !Array.isArray(found)) {
      return found !== undefined && holds(found, rule, key, slot) ? found : undefined;
    }
    return found.find((held) => holds(held, rule, key, slot));
  }

  #forget(held: Held): void {
    this.#unlist(held);
    for (const { receipt } of held.slots) {
      const at = slotKey(receipt);
      const found = this.#bySlot.get(at);
      if (found === held) this.#bySlot.delete(at);
      else if (Array.isArray(found)) {
        const rest = found.filter((other) => other !== held);
        if (rest.length === 0) this.#bySlot.delete(at);
        else this.#bySlot.set(at, rest.length === 1 ? (rest[0] as Held) : rest);
      }
    }
  }

  /** Frees a held's slots in its store: the release's promise, its outcome handled (it never rejects). */
  #free(held: Held): Promise<void> {
    const store = held.store;
    const into = store.refundInto;
    if (into !== undefined) return this.#batchOf(store, into).add(held);
    let refunded: Promise<boolean[] | undefined>;
    try {
      // Undefined from a store that does not say (see Store.refund).
      refunded = this.#parts.call('release', store.refund(held.slots) as Promise<boolean[] | undefined>);
    } catch (error) {
      refunded = Promise.reject(error);
    }
    return refunded.then(
      (stillHeld) => this.#freed(held, stillHeld),
      (error: unknown) => this.#retry(held, error),
    );
  }

  /** This turn's release batch for `store`, made on its first release. */
  #batchOf(store: Store, into: NonNullable<Store['refundInto']>): ReleaseBatch {
    const batches = this.#batches;
    for (const batch of batches) if (batch.store === store && batch.open) return batch;
    const batch = new ReleaseBatch(store, into);
    batches.push(batch);
    // Closed once the turn's I/O is done, before the store's own batch of refunds is sent (its
    // setImmediate is queued by the batch's first refundInto, after this one).
    setImmediate(() => {
      batch.open = false;
      batches.splice(batches.indexOf(batch), 1);
    });
    batch.done = this.#parts
      .callInto<void>('release', (settler) => batch.start(settler))
      .then(
        () => {
          for (const held of batch.helds) this.#freed(held, held.stillHeld);
        },
        (error: unknown) => {
          // One report for the batch; the releases the store did not answer are tried again, those it
          // answered (a store call of the batch that succeeded) are done.
          this.#parts.failed(error, 'release');
          for (const held of batch.helds) {
            if (held.answered) this.#freed(held, held.stillHeld);
            else this.#unrelease(held);
          }
        },
      );
    return batch;
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
    this.#unrelease(held);
  }

  #unrelease(held: Held): void {
    if (this.#closed) return;
    this.#unreleased.add(held);
    this.#schedule();
  }

  #schedule(): void {
    if (this.#timer !== undefined) return;
    this.#timer = setInterval(() => void this.#tick(), this.#renewEveryMs);
    this.#timer.unref();
  }

  #unschedule(): void {
    if (this.#first !== undefined || this.#unreleased.size > 0 || this.#timer === undefined) return;
    clearInterval(this.#timer);
    this.#timer = undefined;
  }

  /** One renewal: every slot held, one call per store; and the failed releases tried again. */
  async #tick(): Promise<void> {
    const byStore = new Map<Store, Held[]>();
    for (let held = this.#first; held !== undefined; held = held.next) {
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
      if (!any && held.listed) {
        this.#forget(held);
        this.#tell(held, 'lapsed');
      }
    }
  }
}
