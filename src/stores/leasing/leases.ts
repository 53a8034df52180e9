// Exact leasing for hot keys: blocks of a key's units reserved in the store in one call, admitted from locally.

import { windowKind } from '../../algorithms/index.js';
import type { EvalMode, EvalResult, OpResult, Refund, StoreOp } from '../store.js';
import type { LeasingSettings } from './leasing-options.js';

/** The store's own decisions and refunds, which the leases stand in front of. */
export interface LeaseStore {
  evaluate(ops: readonly StoreOp[], mode: EvalMode): Promise<EvalResult>;
  refund(refunds: readonly Refund[]): Promise<unknown>;
  now(): number;
}

/**
 * Units of one rule and key reserved in the store (counted there when the block was taken) and not yet
 * admitted here. Every deadline is on this process's monotonic clock, measured from before the take
 * was sent, so no wall clock is compared with another process's or the store's.
 */
interface Block {
  /** The op the block was taken with: its rule, key, limit and calendar period. */
  readonly op: StoreOp;
  readonly receipt: number;
  left: number;
  /** No unit is admitted from `untilLocal` on: the window's end, or a bucket block's lifetime. */
  readonly untilLocal: number;
  readonly sentLocal: number;
  lastUsedLocal: number;
  /** What the store had left of the key beyond the block when it was taken. */
  readonly seen: number;
  /** The limit the store decided the block on (an override's, else the op's). */
  readonly limit: number;
  readonly overridden: boolean;
  readonly resetMs: number;
  /** Token bucket and GCRA: the refill over the block's lifetime, reserved with it (docs/exactness.md). */
  readonly surcharge: number;
}

interface Entry {
  /** Decisions of the key in this second, and in the one before. */
  hits: number;
  prevHits: number;
  sinceLocal: number;
  /** What the store had left of the key after its last decision there (units). */
  seen: number;
  block: Block | undefined;
  /** A take of a block in flight: decisions of the key wait for it rather than take blocks of their own. */
  taking: Promise<unknown> | undefined;
}

const SECOND_MS = 1000;

/** Whether the store leases this op: a leasable rule of a window type its kind says leases, in mode check. */
function leasable(op: StoreOp): boolean {
  if (op.rule.leasable !== true || op.cost < 1) return false;
  const lease = windowKind(op.rule.type).lease;
  return lease === 'counted' || lease === 'capacity';
}

function isBucket(op: StoreOp): boolean {
  return windowKind(op.rule.type).lease === 'capacity';
}

function capacityOf(op: StoreOp, limit: number): number {
  return isBucket(op) && op.rule.burst > 0 ? op.rule.burst : limit;
}

/**
 * A store's leases: decisions of hot keys answered from blocks, the others sent on. Bounded: at most
 * `maxKeys` keys are tracked, each with at most one block.
 */
export class Leases {
  readonly #store: LeaseStore;
  readonly #settings: LeasingSettings;
  readonly #entries = new Map<string, Entry>();
  #timer: ReturnType<typeof setInterval> | undefined;
  /** Calls until the store's announcements reach `forget`: made once, when the first block is taken. */
  #subscribe: (() => void) | undefined;

  constructor(store: LeaseStore, settings: LeasingSettings, subscribe: () => void) {
    this.#store = store;
    this.#settings = settings;
    this.#subscribe = subscribe;
  }

  /** Units held in blocks now, over every key (for tests and docs/exactness.md's bound). */
  held(): number {
    let units = 0;
    for (const entry of this.#entries.values()) units += entry.block?.left ?? 0;
    return units;
  }

  /** Keys tracked now. */
  get size(): number {
    return this.#entries.size;
  }

  evaluate(ops: readonly StoreOp[], mode: EvalMode): Promise<EvalResult> {
    if (mode !== 'check' || ops.length === 0) return this.#store.evaluate(ops, mode);
    const nowLocal = performance.now();
    let local = true;
    let any = false;
    const entries: Array<Entry | undefined> = [];
    for (const op of ops) {
      const entry = leasable(op) ? this.#hit(op, nowLocal) : undefined;
      entries.push(entry);
      if (entry === undefined) local = false;
      else {
        any = true;
        if (!usable(entry.block, op, nowLocal)) local = false;
      }
    }
    if (!any) return this.#store.evaluate(ops, mode);
    if (local) return Promise.resolve(this.#admit(ops, entries as Entry[], nowLocal));
    const taking = entries.find((entry) => entry?.taking !== undefined)?.taking;
    // Once the block in flight is here, the decision is made again: from it, or by a call of its own.
    if (taking !== undefined) return taking.then(() => this.#again(ops, entries, performance.now()));
    return this.#decide(ops, entries, nowLocal);
  }

  /** A decision that waited for a take: from the blocks if they serve it, else as #decide. */
  #again(
    ops: readonly StoreOp[],
    entries: ReadonlyArray<Entry | undefined>,
    nowLocal: number,
  ): EvalResult | Promise<EvalResult> {
    const local = entries.every(
      (entry, i) => entry !== undefined && usable(entry.block, ops[i] as StoreOp, nowLocal),
    );
    if (local) return this.#admit(ops, entries as Entry[], nowLocal);
    const taking = entries.find((entry) => entry?.taking !== undefined)?.taking;
    if (taking !== undefined) return taking.then(() => this.#again(ops, entries, performance.now()));
    return this.#decide(ops, entries, nowLocal);
  }

  /**
   * Forgets the blocks of a key whose count was reset or whose limit changed (`rule` and `key` empty:
   * every key's, announcements may have been missed). Their units are not given back: the count they
   * were part of is gone, and a late refund must not reach a count made since.
   */
  forget(rule: string, key: string): void {
    if (rule === '' && key === '') {
      for (const entry of this.#entries.values()) entry.block = undefined;
      return;
    }
    const entry = this.#entries.get(`${rule}\u0000${key}`);
    if (entry !== undefined) entry.block = undefined;
  }

  /** Gives every block's unused units back (awaited) and stops the idle timer. */
  async close(): Promise<void> {
    if (this.#timer !== undefined) clearInterval(this.#timer);
    this.#timer = undefined;
    const nowLocal = performance.now();
    const refunds: Refund[] = [];
    for (const entry of this.#entries.values()) {
      const refund = this.#ending(entry, nowLocal);
      if (refund !== undefined) refunds.push(refund);
    }
    this.#entries.clear();
    if (refunds.length > 0) await this.#store.refund(refunds).catch(() => undefined);
  }

  /** The key's entry, its decision counted; the oldest entry goes when `maxKeys` are tracked. */
  #hit(op: StoreOp, nowLocal: number): Entry {
    const id = `${op.rule.name}\u0000${op.key}`;
    let entry = this.#entries.get(id);
    if (entry === undefined) {
      if (this.#entries.size >= this.#settings.maxKeys) {
        const [oldest, first] = this.#entries.entries().next().value as [string, Entry];
        this.#end(first, nowLocal);
        this.#entries.delete(oldest);
      }
      entry = { hits: 0, prevHits: 0, sinceLocal: nowLocal, seen: 0, block: undefined, taking: undefined };
      this.#entries.set(id, entry);
    } else if (nowLocal - entry.sinceLocal >= SECOND_MS) {
      entry.prevHits = nowLocal - entry.sinceLocal < 2 * SECOND_MS ? entry.hits : 0;
      entry.hits = 0;
      entry.sinceLocal = nowLocal;
    }
    entry.hits++;
    return entry;
  }

  /** Every op admitted from its block. */
  #admit(ops: readonly StoreOp[], entries: readonly Entry[], nowLocal: number): EvalResult {
    const results: OpResult[] = [];
    for (let i = 0; i < ops.length; i++) {
      const op = ops[i] as StoreOp;
      const block = (entries[i] as Entry).block as Block;
      block.left -= op.cost;
      block.lastUsedLocal = nowLocal;
      // The store's remainder when the block was taken, less what this process admitted since.
      const remaining = block.seen + block.left;
      const limit = block.limit;
      results.push({
        allowed: true,
        limit,
        overridden: block.overridden,
        remaining,
        resetMs: isBucket(op) ? block.resetMs : Math.max(0, Math.ceil(block.untilLocal - nowLocal)),
        retryAfterMs: 0,
        locked: false,
        count: Math.max(0, capacityOf(op, limit) - remaining),
        receipt: block.receipt,
        level: 0,
        lockedUntil: 0,
        lockedNow: false,
      });
    }
    this.#startTimer();
    return { nowMs: this.#store.now(), results };
  }

  /**
   * One store call: the request's ops, a hot key's with a new block's units added to its cost. When a
   * rule could not give its block, the request is decided again without blocks, as without leasing.
   */
  async #decide(
    ops: readonly StoreOp[],
    entries: ReadonlyArray<Entry | undefined>,
    sentLocal: number,
  ): Promise<EvalResult> {
    const takes: number[] = [];
    const surcharges: number[] = [];
    let taking = false;
    for (let i = 0; i < ops.length; i++) {
      const op = ops[i] as StoreOp;
      const entry = entries[i];
      let take = 0;
      let surcharge = 0;
      if (entry !== undefined) {
        if (entry.block !== undefined && !usable(entry.block, op, sentLocal)) this.#end(entry, sentLocal);
        if (entry.block === undefined) [take, surcharge] = this.#size(entry, op);
      }
      takes.push(take);
      surcharges.push(surcharge);
      if (take > 0) taking = true;
    }
    if (!taking) return this.#seen(ops, entries, await this.#store.evaluate(ops, 'check'));
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
    if (result.results.some((r) => !r.allowed))
      return this.#seen(ops, entries, await this.#store.evaluate(ops, 'check'));
    const takenLocal = performance.now();
    for (let i = 0; i < ops.length; i++) {
      const take = takes[i] as number;
      if (take === 0) continue;
      const op = ops[i] as StoreOp;
      const r = result.results[i] as OpResult;
      const entry = entries[i] as Entry;
      const surcharge = surcharges[i] as number;
      // A block that came meanwhile (a take elsewhere in a multi-rule request) ends: one block per key.
      if (entry.block !== undefined) this.#end(entry, takenLocal);
      // The window's end as the store saw it when it counted the block: no later than it is here.
      const lifeMs = isBucket(op) ? this.#settings.blockMs : r.resetMs;
      entry.seen = r.remaining;
      entry.block = {
        op: { ...op, cost: 0 },
        receipt: r.receipt,
        left: take,
        untilLocal: sentLocal + lifeMs,
        sentLocal,
        lastUsedLocal: takenLocal,
        seen: r.remaining,
        limit: r.limit,
        overridden: r.overridden,
        resetMs: r.resetMs,
        surcharge,
      };
      r.remaining += take;
      r.count = Math.max(0, r.count - take - surcharge);
    }
    this.#subscribe?.();
    this.#subscribe = undefined;
    this.#startTimer();
    return result;
  }

  /** Remembers what the store has left of each leasable op's key: the next block's size depends on it. */
  #seen(ops: readonly StoreOp[], entries: ReadonlyArray<Entry | undefined>, result: EvalResult): EvalResult {
    for (let i = 0; i < ops.length; i++) {
      const entry = entries[i];
      if (entry !== undefined) entry.seen = (result.results[i] as OpResult).remaining;
    }
    return result;
  }

  /**
   * [units, surcharge] of a block for a hot key: about what this process admitted of it in `blockMs`, at
   * most `maxBlock` and 1/share of what the store had left; [0, 0] for a key not hot, or when the block
   * would be under 2 units (the last units of a window are decided one call each).
   */
  #size(entry: Entry, op: StoreOp): [number, number] {
    const { hotAfter, maxBlock, share, blockMs } = this.#settings;
    const rate = Math.max(entry.hits, entry.prevHits);
    if (rate < hotAfter) return [0, 0];
    const demand = Math.ceil((rate * op.cost * blockMs) / SECOND_MS);
    const surcharge = isBucket(op) ? Math.ceil((op.limit * blockMs) / op.rule.sizeMs) : 0;
    const take = Math.min(maxBlock, demand, Math.floor((entry.seen - op.cost) / share) - surcharge);
    return take >= 2 ? [take, surcharge] : [0, 0];
  }

  /** Ends a key's block, giving its unused units back. */
  #end(entry: Entry, nowLocal: number): void {
    const refund = this.#ending(entry, nowLocal);
    if (refund !== undefined)
      // A return that fails leaves the units counted for their window: fewer admitted, never more.
      this.#store.refund([refund]).catch(() => undefined);
  }

  /**
   * The block's end: what goes back. A counted window's units only before its end (a unit never moves
   * into another window); a bucket's unused units, and the refill reserved for the part of its lifetime
   * not lived.
   */
  #ending(entry: Entry, nowLocal: number): Refund | undefined {
    const block = entry.block;
    entry.block = undefined;
    if (block === undefined) return undefined;
    let units = 0;
    if (block.surcharge > 0 || isBucket(block.op)) {
      const lifeMs = block.untilLocal - block.sentLocal;
      const unlived = Math.max(0, block.untilLocal - nowLocal) / lifeMs;
      units = block.left + Math.floor(block.surcharge * unlived);
    } else if (nowLocal < block.untilLocal) units = block.left;
    if (units <= 0) return undefined;
    return { op: { ...block.op, cost: units }, receipt: block.receipt };
  }

  /** Every `idleMs`, while a key is tracked: idle and ended blocks go back, quiet keys are forgotten. */
  #startTimer(): void {
    if (this.#timer !== undefined) return;
    const timer = setInterval(() => this.#sweep(), this.#settings.idleMs);
    // The timer keeps no process alive: the sweep is for other processes' benefit.
    (timer as { unref?: () => void }).unref?.();
    this.#timer = timer;
  }

  #sweep(): void {
    const nowLocal = performance.now();
    const { idleMs } = this.#settings;
    for (const [id, entry] of this.#entries) {
      const block = entry.block;
      if (block !== undefined && (nowLocal - block.lastUsedLocal >= idleMs || nowLocal >= block.untilLocal))
        this.#end(entry, nowLocal);
      if (entry.block === undefined && nowLocal - entry.sinceLocal >= 2 * SECOND_MS) this.#entries.delete(id);
    }
    if (this.#entries.size === 0 && this.#timer !== undefined) {
      clearInterval(this.#timer);
      this.#timer = undefined;
    }
  }
}

/** Whether a block admits `op` now: units enough, its window or lifetime not over, the same limit and period. */
function usable(block: Block | undefined, op: StoreOp, nowLocal: number): block is Block {
  return (
    block !== undefined &&
    block.left >= op.cost &&
    nowLocal < block.untilLocal &&
    block.op.limit === op.limit &&
    block.op.periodEndMs === op.periodEndMs
  );
}
