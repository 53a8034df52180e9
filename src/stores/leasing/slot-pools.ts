// Concurrency slots leased to this process: pools taken and topped up, renewed as one holding, handed back.

import type { OpResult, Refund, StoreOp } from '../store.js';
import { blockSize, type Entry, idOf, type Pool, type TakeStore } from './blocks.js';
import type { LeasingSettings } from './leasing-options.js';
import { addSlots, dropUnrenewed, heldRuns, isSlots, newPool, releaseToPool, runsOf } from './pools.js';

/** What the pools need of the store: its own decisions, releases and renewals, behind the leases. */
export interface PoolStore extends TakeStore {
  renew(slots: readonly Refund[]): Promise<boolean[]>;
}

/**
 * The pools of a store's leases (docs/exactness.md, "Leasing", concurrency): the limiter's releases and
 * renewals of pooled slots are answered here, the others sent on to the store.
 */
export class SlotPools {
  readonly #store: PoolStore;
  readonly #entries: ReadonlyMap<string, Entry>;
  readonly #settings: LeasingSettings;
  /** Pools held now: none, and releases and renewals go straight to the store. */
  #count = 0;

  constructor(store: PoolStore, entries: ReadonlyMap<string, Entry>, settings: LeasingSettings) {
    this.#store = store;
    this.#entries = entries;
    this.#settings = settings;
  }

  /** Free slots held in pools now. */
  held(): number {
    let slots = 0;
    if (this.#count === 0) return slots;
    for (const entry of this.#entries.values()) slots += entry.pool?.free.length ?? 0;
    return slots;
  }

  /**
   * A decision that took `take` slots beyond its own (its result's counts already without them): they
   * start the key's pool, or join its live pool (at the same limit).
   */
  took(entry: Entry, op: StoreOp, r: OpResult, take: number, sentLocal: number, nowLocal: number): void {
    const pool = entry.pool;
    if (pool !== undefined && pool.limit === r.limit) {
      pool.size = take;
      this.#fill(pool, op, r.receipt, op.cost, take, nowLocal);
      pool.seen = r.remaining - take;
      pool.lastUsedLocal = nowLocal;
      return;
    }
    this.end(entry);
    entry.pool = newPool(op, r, take, sentLocal, nowLocal);
    this.#count++;
  }

  /**
   * A call's slots into a live pool: `own` in use, of the `take` after them as many as keep it at `size`
   * free (slots released while the call was out may have filled it), the others back to the store.
   */
  #fill(pool: Pool, op: StoreOp, first: number, own: number, take: number, nowLocal: number): void {
    const keep = Math.min(take, Math.max(0, pool.size - pool.free.length));
    addSlots(pool, first, own, keep, nowLocal);
    if (take > keep) this.#release([{ op: { ...op, cost: take - keep }, receipt: first + own + keep }]);
  }

  /** The slots of a take no pool may keep (a reset or limit change heard meanwhile): released at once. */
  dropTake(op: StoreOp, r: OpResult, take: number): void {
    this.#release([{ op: { ...op, cost: take }, receipt: r.receipt + op.cost }]);
  }

  /**
   * Takes slots for a pool half handed out, by a call of its own, so that its key's decisions do not wait
   * for one: up to the pool's size as sized now. Slots that land on a pool ended meanwhile go back.
   */
  topUp(entry: Entry, pool: Pool, op: StoreOp): Promise<unknown> | undefined {
    entry.seen = pool.seen;
    const [size] = blockSize(entry, op, 0, this.#settings);
    const more = size - pool.free.length;
    if (more < 2) return undefined;
    const epoch = entry.epoch;
    const slots = { ...op, cost: more };
    return this.#store.evaluate([slots], 'check').then(
      ({ results }) => {
        const r = results[0] as OpResult;
        entry.seen = r.remaining;
        if (!r.allowed) return;
        if (entry.epoch === epoch && entry.pool === pool && r.limit === pool.limit) {
          pool.size = size;
          this.#fill(pool, op, r.receipt, 0, more, performance.now());
          pool.seen = r.remaining;
        } else this.#release([{ op: slots, receipt: r.receipt }]);
      },
      () => undefined,
    );
  }

  /**
   * Ends the key's pool: its free slots go back to the store; those in use stay held by their requests,
   * which the limiter renews and releases in the store from now on, as slots taken without a pool.
   */
  end(entry: Entry): void {
    const pool = entry.pool;
    if (pool === undefined) return;
    entry.pool = undefined;
    this.#count--;
    this.#release(runsOf(pool.op, pool.free.splice(0)));
    // Those in use get a full lease now: the limiter's next renewal of them may be a third of a lease away.
    const inUse = runsOf(pool.op, pool.inUse.keys());
    if (inUse.length > 0 && performance.now() < pool.untilLocal)
      this.#store.renew(inUse).catch(() => undefined);
  }

  /** Every pool's free slots, the pools ended (the store closes). */
  endAll(): Refund[] {
    const back: Refund[] = [];
    for (const entry of this.#entries.values()) {
      const pool = entry.pool;
      if (pool === undefined) continue;
      entry.pool = undefined;
      back.push(...runsOf(pool.op, pool.free.splice(0)));
    }
    this.#count = 0;
    return back;
  }

  /**
   * One sweep of a pool: one idle for `idleMs` or whose lease ran out here ends; one renewed a third of
   * its lease ago is renewed, every slot it holds in one call.
   */
  sweep(entry: Entry, pool: Pool, nowLocal: number): void {
    if (nowLocal - pool.lastUsedLocal >= this.#settings.idleMs || nowLocal >= pool.untilLocal) {
      this.end(entry);
      return;
    }
    if (pool.renewing || nowLocal - pool.renewedLocal < pool.op.rule.sizeMs / 3) return;
    dropUnrenewed(pool, nowLocal);
    const runs = heldRuns(pool);
    if (runs.length === 0) return;
    pool.renewing = true;
    this.#store.renew(runs).then(
      (held) => {
        pool.renewing = false;
        if (entry.pool !== pool) return;
        // A slot of it released, lapsed or reset elsewhere: the pool is not what the store holds.
        if (held.every((h) => h)) {
          pool.renewedLocal = nowLocal;
          pool.untilLocal = nowLocal + pool.op.rule.sizeMs;
        } else this.end(entry);
      },
      // Tried again at the next sweep; the pool hands out nothing once its lease has run out here.
      () => {
        pool.renewing = false;
      },
    );
  }

  /**
   * Releases: a pooled slot in use goes back to its pool (true: it was held), or to the store when its
   * pool has enough free; the others are the store's.
   */
  refund(refunds: readonly Refund[]): Promise<boolean[]> {
    return this.#split(
      refunds,
      (refund) => {
        const pool = this.#poolOf(refund);
        const released = pool && releaseToPool(pool, refund.receipt);
        if (released === 'back') this.#release([refund]);
        return released !== undefined;
      },
      (rest) => this.#store.refund(rest),
    );
  }

  /** Renewals: a pooled slot in use is renewed with its pool (true while the pool's lease runs here). */
  renew(slots: readonly Refund[]): Promise<boolean[]> {
    const nowLocal = performance.now();
    return this.#split(
      slots,
      (slot) => {
        const pool = this.#poolOf(slot);
        if (pool === undefined || nowLocal >= pool.untilLocal || !pool.inUse.has(slot.receipt)) return false;
        pool.inUse.set(slot.receipt, nowLocal);
        return true;
      },
      (rest) => this.#store.renew(rest),
    );
  }

  /** The pool of a slot of one unit, when some pool holds such a slot of its key. */
  #poolOf(slot: Refund): Pool | undefined {
    if (slot.op.cost !== 1 || !isSlots(slot.op)) return undefined;
    const pool = this.#entries.get(idOf(slot.op))?.pool;
    return pool?.inUse.has(slot.receipt) === true ? pool : undefined;
  }

  /** Per item, `here` answered true, or the store's answer for the rest (sent in one call). */
  #split(
    items: readonly Refund[],
    here: (item: Refund) => boolean,
    store: (rest: Refund[]) => Promise<unknown>,
  ): Promise<boolean[]> {
    if (this.#count === 0) return store([...items]).then((held) => answers(held, items.length));
    const out: boolean[] = new Array(items.length).fill(true);
    const rest: Refund[] = [];
    const at: number[] = [];
    for (let i = 0; i < items.length; i++) {
      const item = items[i] as Refund;
      if (here(item)) continue;
      rest.push(item);
      at.push(i);
    }
    if (rest.length === 0) return Promise.resolve(out);
    return store(rest).then((held) => {
      const got = answers(held, rest.length);
      for (let k = 0; k < at.length; k++) out[at[k] as number] = got[k] as boolean;
      return out;
    });
  }

  /** Slots back to the store; a release that fails leaves them to lapse at their lease (fewer admitted). */
  #release(refunds: Refund[]): void {
    if (refunds.length > 0) this.#store.refund(refunds).catch(() => undefined);
  }
}

/** A store's per-item answer (a store that answers nothing has every item true). */
function answers(held: unknown, n: number): boolean[] {
  return Array.isArray(held) ? held.map((h) => h !== false) : new Array(n).fill(true);
}
