// Exact leasing for hot keys: blocks of a key's units reserved in the store in one call, admitted from locally.

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
  putBack,
  resultOf,
  usable,
  withBlocks,
} from './blocks.js';
import type { LeasingSettings } from './leasing-options.js';

/** The store's own decisions and refunds, which the leases stand in front of. */
export interface LeaseStore {
  evaluate(ops: readonly StoreOp[], mode: EvalMode): Promise<EvalResult>;
  refund(refunds: readonly Refund[]): Promise<unknown>;
  now(): number;
  /** Tells every process that units of these refunds' keys came back: their deny caches forget the keys. */
  announce(refunds: readonly Refund[]): void;
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
  /** Calls until the store's announcements reach `forget`: made once, when the first block is taken. */
  #subscribe: (() => void) | undefined;

  constructor(store: LeaseStore, settings: LeasingSettings, subscribe: () => void) {
    this.#store = store;
    this.#settings = settings;
    this.#subscribe = subscribe;
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
      const entry = leasable(op) ? this.#entries.get(idOf(op)) : undefined;
      if (entry === undefined || !usable(entry.block, op, nowLocal, nowMs)) return undefined;
      count(entry, nowLocal);
      return this.#admit(ops, [entry], nowLocal, nowMs);
    }
    const entries: Entry[] = [];
    for (const op of ops) {
      const entry = leasable(op) ? this.#entries.get(idOf(op)) : undefined;
      if (entry === undefined || !usable(entry.block, op, nowLocal, nowMs)) return undefined;
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
      const entry = leasable(op) ? this.#hit(op, nowLocal, nowMs) : undefined;
      entries.push(entry);
      if (entry === undefined) local = false;
      else {
        any = true;
        if (!usable(entry.block, op, nowLocal, nowMs)) local = false;
      }
    }
    if (!any) return this.#store.evaluate(ops, mode);
    if (local) return Promise.resolve(this.#admit(ops, entries as Entry[], nowLocal, nowMs));
    return this.#again(ops, entries, nowLocal, nowMs);
  }

  /** A decision its blocks did not serve: from them once a take in flight is here, else by #decide. */
  async #again(
    ops: readonly StoreOp[],
    entries: ReadonlyArray<Entry | undefined>,
    nowLocal: number,
    nowMs: number,
  ): Promise<EvalResult> {
    let [at, atMs] = [nowLocal, nowMs];
    for (;;) {
      const local = entries.every(
        (entry, i) => entry !== undefined && usable(entry.block, ops[i] as StoreOp, at, atMs),
      );
      if (local) return this.#admit(ops, entries as Entry[], at, atMs);
      const taking = entries.find((entry) => entry?.taking !== undefined)?.taking;
      if (taking === undefined) return this.#decide(ops, entries, at, atMs);
      await taking;
      [at, atMs] = [performance.now(), this.#store.now()];
    }
  }

  /**
   * Ends the blocks of a key reset or whose limit changed (`counted`: its count stays, so they go back; a
   * reset's are dropped). `key` empty: every key of `rule`; both empty: every key's (announcements missed).
   */
  forget(rule: string, key: string, counted = false): Promise<void> {
    const now = [performance.now(), this.#store.now()] as const;
    const refunds = forgetBlocks(this.#entries, rule, key, counted ? now : undefined);
    return refunds.length > 0 ? this.#giveBack(refunds) : Promise.resolve();
  }

  /** Gives every block's unused units back (awaited) and stops the idle timer. */
  async close(): Promise<void> {
    if (this.#timer !== undefined) clearInterval(this.#timer);
    this.#timer = undefined;
    const refunds = endBlocks(this.#entries.values(), performance.now(), this.#store.now());
    this.#entries.clear();
    if (refunds.length > 0) await this.#giveBack(refunds);
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
      const block = entry.block as Block;
      results.push(admitFrom(block, op, nowLocal));
      if (block.left * 2 <= block.size && entry.taking === undefined && block.surcharge === 0)
        this.#topUp(entry, block, op);
    }
    this.#startTimer();
    return { nowMs, results };
  }

  /**
   * Refills a counted block to its size while its other half is admitted from, so that decisions never
   * wait for a take while the key stays hot: one call of its own, for units only, never over one take's
   * size (the bound of docs/exactness.md is unchanged). Units counted for a block that ended go back.
   */
  #topUp(entry: Entry, block: Block, op: StoreOp): void {
    entry.seen = block.seen;
    const [size] = blockSize(entry, op, 0, this.#settings);
    const more = size - block.left;
    if (more < 2) return;
    const epoch = entry.epoch;
    const units = { ...op, cost: more };
    const call = this.#store.evaluate([units], 'check').then(
      ({ results }) => {
        const r = results[0] as OpResult;
        entry.seen = r.remaining;
        if (!r.allowed || !mayGiveBack(entry, epoch)) return;
        // The same block (a reset or limit change heard since would have ended it), at the same limit.
        if (entry.block === block && r.receipt === block.receipt && r.limit === block.limit) {
          block.left += more;
          block.size = block.left;
          block.seen = r.remaining;
        } else {
          // Counted for a block that ended meanwhile (idle, replaced, its window over): back they go.
          void this.#giveBack([{ op: units, receipt: r.receipt }]);
        }
      },
      () => undefined,
    );
    entry.taking = call;
    call.then(() => {
      if (entry.taking === call) entry.taking = undefined;
    });
  }

  /**
   * A request its blocks do not all serve. An op whose block serves it is admitted from the block (its
   * units held meanwhile, given back when the request is denied or fails: all or nothing, and a block is
   * not left unused beside a rule that has none); the others go to the store in one call (#take).
   */
  async #decide(
    ops: readonly StoreOp[],
    entries: ReadonlyArray<Entry | undefined>,
    sentLocal: number,
    sentMs: number,
  ): Promise<EvalResult> {
    const held = ops.map((op, i) => {
      const block = entries[i]?.block;
      return usable(block, op, sentLocal, sentMs) ? block : undefined;
    });
    if (held.every((block) => block === undefined)) return this.#take(ops, entries, sentLocal, sentMs);
    const epochs = entries.map((entry) => entry?.epoch ?? 0);
    // Each held op's result if the request is denied (nothing taken), and if it passes (admitted).
    const kept = held.map((block, i) => block && resultOf(block, ops[i] as StoreOp, sentLocal));
    const admitted = held.map((block, i) => block && admitFrom(block, ops[i] as StoreOp, sentLocal));
    const sent = ops.flatMap((_, i) => (held[i] === undefined ? [i] : []));
    const undo = () => {
      const now = [performance.now(), this.#store.now()] as const;
      const refunds = held.flatMap((block, i) => {
        const refund =
          block && putBack(entries[i] as Entry, block, ops[i] as StoreOp, epochs[i] as number, now);
        return refund === undefined ? [] : [refund];
      });
      if (refunds.length > 0) void this.#giveBack(refunds);
    };
    const answer = await this.#take(
      sent.map((i) => ops[i] as StoreOp),
      sent.map((i) => entries[i]),
      sentLocal,
      sentMs,
    ).catch((error: unknown) => {
      undo();
      throw error;
    });
    const denied = answer.results.some((r, j) => deniedBy(r, ops[sent[j] as number]));
    if (denied) undo();
    let j = 0;
    const results = held.map((block, i) =>
      block === undefined ? (answer.results[j++] as OpResult) : ((denied ? kept : admitted)[i] as OpResult),
    );
    return { nowMs: answer.nowMs, results };
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
        if (entry.block !== undefined && !usable(entry.block, op, sentLocal, sentMs))
          this.#end(entry, sentLocal, sentMs);
        if (entry.block === undefined) [take, surcharge] = blockSize(entry, op, op.cost, this.#settings);
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
      // reached here); after a limit change only, its units go back.
      if (entry.epoch !== epochs[i]) {
        const all = { op: { ...op, cost: take + surcharge }, receipt: r.receipt };
        if (mayGiveBack(entry, epochs[i] as number)) void this.#giveBack([all]);
        continue;
      }
      r.remaining += take;
      r.count = Math.max(0, r.count - take - surcharge);
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

  /** Ends a key's block, giving its unused units back. */
  #end(entry: Entry, nowLocal: number, nowMs: number): void {
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
      () => this.#store.announce(refunds),
      () => undefined,
    );
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
    const nowMs = this.#store.now();
    const { idleMs } = this.#settings;
    for (const [id, entry] of this.#entries) {
      const block = entry.block;
      if (
        block !== undefined &&
        (nowLocal - block.lastUsedLocal >= idleMs || nowLocal >= block.untilLocal || nowMs >= block.untilMs)
      )
        this.#end(entry, nowLocal, nowMs);
      if (
        entry.block === undefined &&
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
