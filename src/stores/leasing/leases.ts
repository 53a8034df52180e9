// Exact leasing for hot keys: blocks of a key's units (or pools of its slots) reserved in the store in one
// call, admitted from locally.

import type { EvalMode, EvalResult, OpResult, Refund, StoreOp } from '../store.js';
import {
  admitFrom,
  type Block,
  blockSize,
  count,
  deniedBy,
  type Entry,
  endBlocks,
  ending,
  forgetBlocks,
  idOf,
  isBucket,
  leasable,
  mayGiveBack,
  newBlock,
  newEntry,
  noteSeen,
  topUp,
  usable,
} from './blocks.js';
import type { LeasingSettings } from './leasing-options.js';
import { admitFromPool, decideHeld, isSlots, poolLive, ready, withBlocks } from './pools.js';
import { type PoolStore, SlotPools } from './slot-pools.js';

/** The store's own decisions and refunds, which the leases stand in front of. */
export interface LeaseStore {
  evaluate(ops: readonly StoreOp[], mode: EvalMode): Promise<EvalResult>;
  refund(refunds: readonly Refund[]): Promise<unknown>;
  /** The store's renewals of held slots: without it, concurrency keys are not leased. */
  renew?(slots: readonly Refund[]): Promise<boolean[]>;
  now(): number;
  /**
   * Tells every process that units of these refunds' keys came back: their deny caches forget the keys
   * (a store with no change feed has none).
   */
  announce?(refunds: readonly Refund[]): void;
}

const SECOND_MS = 1000;

/**
 * A store's leases: decisions of hot keys answered from blocks, the others sent on. Bounded: at most
 * `maxKeys` keys are tracked, each with at most one block.
 */
export class Leases {
  readonly #store: LeaseStore;
  readonly #settings: LeasingSettings;
  readonly #entries = new Map<string, Entry>();
  #timer: ReturnType<typeof setInterval> | undefined;
  #timerMs = 0;
  /** Pools of concurrency keys' slots, where the store renews slots. */
  readonly #slots: SlotPools | undefined;
  /** Calls until the store's announcements reach `forget`: made once, when the first block is taken. */
  #subscribe: (() => void) | undefined;

  constructor(store: LeaseStore, settings: LeasingSettings, subscribe: () => void) {
    this.#store = store;
    this.#settings = settings;
    this.#subscribe = subscribe;
    if (store.renew !== undefined) this.#slots = new SlotPools(store as PoolStore, this.#entries, settings);
  }

  /** Units held in blocks and free slots held in pools now, over every key (docs/exactness.md's bound). */
  held(): number {
    let units = this.#slots?.held() ?? 0;
    for (const entry of this.#entries.values()) units += entry.block?.left ?? 0;
    return units;
  }

  /** Releases of held slots: a pooled one goes back to its pool, the others to the store. */
  refund(refunds: readonly Refund[]): Promise<unknown> {
    return this.#slots?.refund(refunds) ?? this.#store.refund(refunds);
  }

  /** Renewals of held slots (where the store renews): a pooled one is renewed with its pool. */
  renew(slots: readonly Refund[]): Promise<boolean[]> | undefined {
    return this.#slots?.renew(slots);
  }

  /** Keys tracked now. */
  get size(): number {
    return this.#entries.size;
  }

  /**
   * The decision of `ops` from their keys' blocks, in this call, when every op has a block with units
   * enough (mode check); undefined otherwise, with nothing counted: `evaluate` decides it then. The
   * store's `evaluateSync`, so that the limiter answers a hot key without a promise of the store's.
   */
  answer(ops: readonly StoreOp[], mode: EvalMode): EvalResult | undefined {
    if (mode !== 'check' || ops.length === 0 || this.#entries.size === 0) return undefined;
    const nowLocal = performance.now();
    const nowMs = this.#store.now();
    if (ops.length === 1) {
      const op = ops[0] as StoreOp;
      const entry = this.#leasable(op) ? this.#entries.get(idOf(op)) : undefined;
      if (entry === undefined || !ready(entry, op, nowLocal, nowMs)) return undefined;
      count(entry, nowLocal);
      return this.#admit(ops, [entry], nowLocal, nowMs);
    }
    const entries: Entry[] = [];
    for (const op of ops) {
      const entry = this.#leasable(op) ? this.#entries.get(idOf(op)) : undefined;
      if (entry === undefined || !ready(entry, op, nowLocal, nowMs)) return undefined;
      entries.push(entry);
    }
    for (const entry of entries) count(entry, nowLocal);
    return this.#admit(ops, entries, nowLocal, nowMs);
  }

  evaluate(ops: readonly StoreOp[], mode: EvalMode): Promise<EvalResult> {
    if (mode === 'peek' && this.#entries.size > 0)
      return this.#store
        .evaluate(ops, mode)
        .then((result) => withBlocks(this.#entries, ops, result, [performance.now(), this.#store.now()]));
    if (mode !== 'check' || ops.length === 0) return this.#store.evaluate(ops, mode);
    const nowLocal = performance.now();
    const nowMs = this.#store.now();
    let local = true;
    let any = false;
    const entries: Array<Entry | undefined> = [];
    for (const op of ops) {
      const entry = this.#leasable(op) ? this.#hit(op, nowLocal, nowMs) : undefined;
      entries.push(entry);
      if (entry === undefined) local = false;
      else {
        any = true;
        if (!ready(entry, op, nowLocal, nowMs)) local = false;
      }
    }
    if (!any) return this.#store.evaluate(ops, mode);
    if (local) return Promise.resolve(this.#admit(ops, entries as Entry[], nowLocal, nowMs));
    return this.#again(ops, entries, nowLocal, nowMs);
  }

  /** A decision its blocks did not serve: from them once a take in flight is here, else by decideHeld. */
  async #again(
    ops: readonly StoreOp[],
    entries: ReadonlyArray<Entry | undefined>,
    nowLocal: number,
    nowMs: number,
  ): Promise<EvalResult> {
    let [at, atMs] = [nowLocal, nowMs];
    for (;;) {
      const local = entries.every(
        (entry, i) => entry !== undefined && ready(entry, ops[i] as StoreOp, at, atMs),
      );
      if (local) return this.#admit(ops, entries as Entry[], at, atMs);
      const taking = entries.find((entry) => entry?.taking !== undefined)?.taking;
      if (taking === undefined)
        return decideHeld(ops, entries, [at, atMs], {
          take: (sent, theirs) => this.#take(sent, theirs, at, atMs),
          giveBack: (refunds) => this.#giveBack(refunds),
          now: () => [performance.now(), this.#store.now()],
        });
      await taking;
      [at, atMs] = [performance.now(), this.#store.now()];
    }
  }

  /**
   * Ends the blocks and pools of a key reset or whose limit changed (`counted`: its count stays, so a
   * block's units go back; a reset's are dropped; a pool's free slots go back either way, by their ids).
   * `key` empty: every key of `rule`; both empty: every key's (announcements missed).
   */
  forget(rule: string, key: string, counted = false): Promise<void> {
    const now = [performance.now(), this.#store.now()] as const;
    const refunds = forgetBlocks(this.#entries, [rule, key], counted ? now : undefined, (entry) =>
      this.#slots?.end(entry),
    );
    return refunds.length > 0 ? this.#giveBack(refunds) : Promise.resolve();
  }

  /** Gives every block's unused units and every pool's free slots back (awaited) and stops the timer. */
  async close(): Promise<void> {
    if (this.#timer !== undefined) clearInterval(this.#timer);
    this.#timer = undefined;
    const refunds: Refund[] = this.#slots?.endAll() ?? [];
    refunds.push(...endBlocks(this.#entries.values(), performance.now(), this.#store.now()));
    this.#entries.clear();
    if (refunds.length > 0) await this.#giveBack(refunds);
  }

  /** Whether `op` is leased here: slots only where the store renews them. */
  #leasable(op: StoreOp): boolean {
    return leasable(op, this.#slots !== undefined);
  }

  /** The key's entry, its decision counted; the oldest entry goes when `maxKeys` are tracked. */
  #hit(op: StoreOp, nowLocal: number, nowMs: number): Entry {
    const id = idOf(op);
    let entry = this.#entries.get(id);
    if (entry === undefined) {
      if (this.#entries.size >= this.#settings.maxKeys) {
        const [oldest, first] = this.#entries.entries().next().value as [string, Entry];
        this.#end(first, nowLocal, nowMs);
        this.#entries.delete(oldest);
      }
      entry = newEntry(nowLocal);
      this.#entries.set(id, entry);
    }
    count(entry, nowLocal);
    return entry;
  }

  /** Every op admitted from its block; a counted block half used is topped up meanwhile. */
  #admit(ops: readonly StoreOp[], entries: readonly Entry[], nowLocal: number, nowMs: number): EvalResult {
    const results: OpResult[] = [];
    for (let i = 0; i < ops.length; i++) {
      const op = ops[i] as StoreOp;
      const entry = entries[i] as Entry;
      const pool = entry.pool;
      if (pool !== undefined) {
        results.push(admitFromPool(pool, nowLocal));
        if (pool.free.length * 2 <= pool.size && entry.taking === undefined)
          this.#taking(entry, this.#slots?.topUp(entry, pool, op));
        continue;
      }
      const block = entry.block as Block;
      results.push(admitFrom(block, op, nowLocal));
      if (block.left * 2 <= block.size && entry.taking === undefined && block.surcharge === 0)
        this.#taking(
          entry,
          topUp(this.#store, [entry, block, op], this.#settings, (back) => this.#giveBack(back)),
        );
    }
    this.#startTimer();
    return { nowMs, results };
  }

  /** A take in flight for the key: its decisions wait for it rather than take one of their own. */
  #taking(entry: Entry, call: Promise<unknown> | undefined): void {
    if (call === undefined) return;
    entry.taking = call;
    call.then(() => {
      if (entry.taking === call) entry.taking = undefined;
    });
  }

  /**
   * One store call: the ops, a hot key's with a new block's units added to its cost. When a rule could
   * not give its block, the ops are decided again without blocks, as without leasing.
   */
  async #take(
    ops: readonly StoreOp[],
    entries: ReadonlyArray<Entry | undefined>,
    sentLocal: number,
    sentMs: number,
  ): Promise<EvalResult> {
    const takes: number[] = [];
    const surcharges: number[] = [];
    const epochs: number[] = [];
    let taking = false;
    for (let i = 0; i < ops.length; i++) {
      const op = ops[i] as StoreOp;
      const entry = entries[i];
      let take = 0;
      let surcharge = 0;
      if (entry !== undefined) {
        // A live pool all in use takes more slots into it; a pool that ended here, or a block, is ended.
        if (entry.pool !== undefined && !poolLive(entry.pool, op, sentLocal))
          this.#end(entry, sentLocal, sentMs);
        if (entry.block !== undefined && !usable(entry.block, op, sentLocal, sentMs))
          this.#end(entry, sentLocal, sentMs);
        // A pool with free slots (another rule of the request had no unit here) takes none.
        if (entry.block === undefined && !(entry.pool && entry.pool.free.length > 0))
          [take, surcharge] = blockSize(entry, op, op.cost, this.#settings);
      }
      takes.push(take);
      surcharges.push(surcharge);
      epochs.push(entry?.epoch ?? 0);
      if (take > 0) taking = true;
    }
    if (!taking) return noteSeen(entries, await this.#store.evaluate(ops, 'check'));
    const asked = ops.map((op, i) => {
      const more = (takes[i] as number) + (surcharges[i] as number);
      return more > 0 ? { ...op, cost: op.cost + more } : op;
    });
    const call = this.#store.evaluate(asked, 'check');
    const flight = call.catch(() => undefined);
    for (let i = 0; i < ops.length; i++) if ((takes[i] as number) > 0) (entries[i] as Entry).taking = flight;
    let result: EvalResult;
    try {
      result = await call;
    } finally {
      for (let i = 0; i < ops.length; i++) {
        const entry = entries[i];
        if (entry !== undefined && entry.taking === flight) entry.taking = undefined;
      }
    }
    if (result.results.some((r, i) => deniedBy(r, ops[i])))
      return noteSeen(entries, await this.#store.evaluate(ops, 'check'));
    const [takenLocal, takenMs] = [performance.now(), this.#store.now()];
    for (let i = 0; i < ops.length; i++) {
      const take = takes[i] as number;
      if (take === 0) continue;
      const op = ops[i] as StoreOp;
      const r = result.results[i] as OpResult;
      const entry = entries[i] as Entry;
      const surcharge = surcharges[i] as number;
      // A reset or limit change heard while the take was in flight: it may have been counted before it, so
      // its block is not admitted from (this decision's own stands: it was decided before the change
      // reached here); after a limit change only, its units go back. Slots go back by their ids either way.
      if (entry.epoch !== epochs[i]) {
        const all = { op: { ...op, cost: take + surcharge }, receipt: r.receipt };
        if (isSlots(op)) this.#slots?.dropTake(op, r, take);
        else if (mayGiveBack(entry, epochs[i] as number)) void this.#giveBack([all]);
        continue;
      }
      r.remaining += take;
      r.count = Math.max(0, r.count - take - surcharge);
      if (isSlots(op)) {
        this.#slots?.took(entry, op, r, take, sentLocal, takenLocal);
        // Renewed a third of a lease after it was taken, by the sweep.
        this.#startTimer(Math.max(1, Math.floor(op.rule.sizeMs / 3)));
        continue;
      }
      // A block that came meanwhile (a take elsewhere in a multi-rule request) ends: one block per key.
      if (entry.block !== undefined) this.#end(entry, takenLocal, takenMs);
      // The window's end as the store saw it when it counted the block: no later than it is here.
      const lifeMs = isBucket(op) ? this.#settings.blockMs : r.resetMs;
      entry.seen = r.remaining - take;
      entry.block = newBlock(op, r, [take, surcharge], [sentLocal, sentMs, lifeMs], takenLocal);
    }
    this.#subscribe?.();
    this.#subscribe = undefined;
    this.#startTimer();
    return result;
  }

  /** Ends a key's block or pool, giving its unused units (free slots) back. */
  #end(entry: Entry, nowLocal: number, nowMs: number): void {
    this.#slots?.end(entry);
    const block = entry.block;
    entry.block = undefined;
    const refund = block && ending(block, nowLocal, nowMs);
    if (refund !== undefined) void this.#giveBack([refund]);
  }

  /**
   * Units back to the store, then announced: a process whose deny cache holds a denial of the key asks
   * the store again. A return that fails leaves its units counted for their window: fewer admitted,
   * never more.
   */
  #giveBack(refunds: readonly Refund[]): Promise<void> {
    return this.#store.refund(refunds).then(
      () => this.#store.announce?.(refunds),
      () => undefined,
    );
  }

  /**
   * Every `idleMs` (or `everyMs`, a third of a pool's lease, when shorter), while a key is tracked: idle and
   * ended blocks go back, pools are renewed, quiet keys are forgotten.
   */
  #startTimer(everyMs = this.#settings.idleMs): void {
    const ms = Math.min(everyMs, this.#settings.idleMs);
    if (this.#timer !== undefined && this.#timerMs <= ms) return;
    if (this.#timer !== undefined) clearInterval(this.#timer);
    const timer = setInterval(() => this.#sweep(), ms);
    // The timer keeps no process alive: the sweep is for other processes' benefit.
    (timer as { unref?: () => void }).unref?.();
    this.#timer = timer;
    this.#timerMs = ms;
  }

  #sweep(): void {
    const nowLocal = performance.now();
    const nowMs = this.#store.now();
    const { idleMs } = this.#settings;
    for (const [id, entry] of this.#entries) {
      const block = entry.block;
      if (
        block !== undefined &&
        (nowLocal - block.lastUsedLocal >= idleMs || nowLocal >= block.untilLocal || nowMs >= block.untilMs)
      )
        this.#end(entry, nowLocal, nowMs);
      if (entry.pool !== undefined) this.#slots?.sweep(entry, entry.pool, nowLocal);
      if (
        entry.block === undefined &&
        entry.pool === undefined &&
        entry.taking === undefined &&
        nowLocal - entry.sinceLocal >= 2 * SECOND_MS
      )
        this.#entries.delete(id);
    }
    if (this.#entries.size === 0 && this.#timer !== undefined) {
      clearInterval(this.#timer);
      this.#timer = undefined;
    }
  }
}
