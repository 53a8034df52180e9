// A hot key's block of units and what is decided from it: its size, its use, its top-up, its return.

import { windowKind } from '../../algorithms/index.js';
import type { EvalResult, OpResult, Refund, StoreOp } from '../store.js';
import type { LeasingSettings } from './leasing-options.js';

/**
 * Units of one rule and key reserved in the store (counted there when the block was taken) and not yet
 * admitted here. Every deadline is measured from before the take was sent, on this process's monotonic
 * clock and on the store's (`store.now()`, the server's time as estimated here, or a clock injected for
 * tests): a block ends at the first of the two, so it never outlives the store's window on either.
 */
export interface Block {
  /** The op the block was taken with: its rule, key, limit and calendar period. */
  readonly op: StoreOp;
  readonly receipt: number;
  left: number;
  /** The units the block was last filled to (a take, or a top-up): a top-up starts at half of it. */
  size: number;
  /** No unit is admitted from `untilLocal` on: the window's end, or a bucket block's lifetime. */
  readonly untilLocal: number;
  readonly sentLocal: number;
  /** `untilLocal` and `sentLocal` on the store's clock (epoch ms). */
  readonly untilMs: number;
  readonly sentMs: number;
  lastUsedLocal: number;
  /** What the store had left of the key beyond the block when it was last filled. */
  seen: number;
  /** The limit the store decided the block on (an override's, else the op's). */
  readonly limit: number;
  readonly overridden: boolean;
  readonly resetMs: number;
  /** Token bucket and GCRA: the refill over the block's lifetime, reserved with it (docs/exactness.md). */
  readonly surcharge: number;
}

export interface Entry {
  /** Decisions of the key in this second, and in the one before. */
  hits: number;
  prevHits: number;
  sinceLocal: number;
  /** What the store had left of the key after its last decision there (units). */
  seen: number;
  block: Block | undefined;
  /** A concurrency key's pool of slots (pools.ts): a key has a block or a pool, never both. */
  pool: Pool | undefined;
  /** A take of a block in flight: decisions of the key wait for it rather than take blocks of their own. */
  taking: Promise<unknown> | undefined;
  /**
   * Counts the key's limit changes heard (`forget`), and its resets as RESET_EPOCHS each: a take sent
   * before one and answered after it is not admitted from; its units go back after limit changes only
   * (`mayGiveBack`), never into a count made since a reset.
   */
  epoch: number;
}

/**
 * Slots of one concurrency rule and key held in the store by this process (each take a range of
 * consecutive ids, counted there when taken, all renewed together as one holding) and handed out here
 * without a call: a `free` slot waits for a request, an `inUse` one is held by one. Deadlines are on this
 * process's monotonic clock, measured from before the call that set them was sent.
 */
export interface Pool {
  /** The op the pool was taken with (cost 0): its rule, key and limit. */
  readonly op: StoreOp;
  /** Ids held and in use by no request here; the last one released on top. */
  readonly free: number[];
  /** Ids a request here holds -> when the limiter last asked to renew it (or took it). */
  readonly inUse: Map<number, number>;
  /** The most free slots kept (the last take's size): a slot released beyond it goes back to the store. */
  size: number;
  /** No slot is handed out from `untilLocal` on: a lease from before the last take or renewal was sent. */
  untilLocal: number;
  /** When the last successful renewal (or the first take) was sent. */
  renewedLocal: number;
  /** A renewal in flight. */
  renewing: boolean;
  lastUsedLocal: number;
  /** What the store had left beyond the pool when it was last filled (free slots). */
  seen: number;
  /** The limit the store decided the pool on (an override's, else the op's). */
  readonly limit: number;
  readonly overridden: boolean;
}

/** What a take needs of the store: its own decisions and refunds, behind the leases. */
export interface TakeStore {
  evaluate(ops: readonly StoreOp[], mode: 'check'): Promise<{ results: OpResult[] }>;
  refund(refunds: readonly Refund[]): Promise<unknown>;
}

/** What a reset adds to a key's epoch (a limit change adds 1). */
const RESET_EPOCHS = 2 ** 20;

/** Whether units counted when the key's epoch was `epoch` may go back now: no reset of it since. */
export const mayGiveBack = (entry: Entry, epoch: number): boolean => entry.epoch - epoch < RESET_EPOCHS;

const SECOND_MS = 1000;
/** The shortest time a key's rate is measured over. */
const RATE_MIN_MS = 100;

/** Whether `r` denies its request: an enforced rule's denial (a dry run never denies). */
export const deniedBy = (r: OpResult, op: StoreOp | undefined): boolean =>
  !r.allowed && op?.rule.dryRun !== true;

/**
 * Whether a store leases this op: a leasable rule of a window type whose kind leases its units; slots
 * (one at a time) only where the store renews them (`slots`).
 */
export function leasable(op: StoreOp, slots = false): boolean {
  if (op.rule.leasable !== true || op.cost < 1) return false;
  const lease = windowKind(op.rule.type).lease;
  return lease === 'counted' || lease === 'capacity' || (lease === 'slots' && slots && op.cost === 1);
}

/** A bucket's block (token bucket, GCRA): its refill over its lifetime is reserved with it. */
export function isBucket(op: StoreOp): boolean {
  return windowKind(op.rule.type).lease === 'capacity';
}

export function idOf(op: StoreOp): string {
  return `${op.rule.name}\u0000${op.key}`;
}

export function newEntry(nowLocal: number): Entry {
  return {
    hits: 0,
    prevHits: 0,
    sinceLocal: nowLocal,
    seen: 0,
    block: undefined,
    pool: undefined,
    taking: undefined,
    epoch: 0,
  };
}

/**
 * The block of `take` units (and `surcharge`, a bucket's reserved refill) the store counted in answer
 * `r`, sent at `sentLocal` (`sentMs` on the store's clock), usable for `lifeMs` from then.
 */
export function newBlock(
  op: StoreOp,
  r: OpResult,
  [take, surcharge]: readonly [number, number],
  [sentLocal, sentMs, lifeMs]: readonly [number, number, number],
  takenLocal: number,
): Block {
  return {
    op: { ...op, cost: 0 },
    receipt: r.receipt,
    left: take,
    size: take,
    untilLocal: sentLocal + lifeMs,
    sentLocal,
    untilMs: sentMs + lifeMs,
    sentMs,
    lastUsedLocal: takenLocal,
    seen: r.remaining - take,
    limit: r.limit,
    overridden: r.overridden,
    resetMs: r.resetMs,
    surcharge,
  };
}

/** Counts a decision of the entry's key: in this second, the one before kept for the rate. */
export function count(entry: Entry, nowLocal: number): void {
  if (nowLocal - entry.sinceLocal >= SECOND_MS) {
    entry.prevHits = nowLocal - entry.sinceLocal < 2 * SECOND_MS ? entry.hits : 0;
    entry.hits = 0;
    entry.sinceLocal = nowLocal;
  }
  entry.hits++;
}

/**
 * The key's decisions per second in this process: the second before, or this one so far measured over
 * at least RATE_MIN_MS (a key decided 10 times in its first 100 ms runs at 100 a second), whichever is more.
 */
export function rateOf(entry: Entry, nowLocal: number): number {
  const elapsedMs = Math.max(RATE_MIN_MS, nowLocal - entry.sinceLocal);
  return Math.max(entry.prevHits, (entry.hits * SECOND_MS) / elapsedMs);
}

/** Whether a block admits `op` now: units enough, its window or lifetime not over, the same limit and period. */
export function usable(
  block: Block | undefined,
  op: StoreOp,
  nowLocal: number,
  nowMs: number,
): block is Block {
  return (
    block !== undefined &&
    block.left >= op.cost &&
    nowLocal < block.untilLocal &&
    nowMs < block.untilMs &&
    block.op.limit === op.limit &&
    block.op.periodEndMs === op.periodEndMs
  );
}

/**
 * [units, surcharge] of a block for a hot key, beyond `cost` (the decision's own): about what this
 * process admitted of it in `blockMs`, at most `maxBlock` and 1/share of what the store had left; [0, 0]
 * for a key not hot, or when the block would be under 2 units (the last units of a window are decided
 * one call each).
 */
export function blockSize(
  entry: Entry,
  op: StoreOp,
  cost: number,
  settings: LeasingSettings,
): [number, number] {
  const { hotAfter, maxBlock, share, blockMs } = settings;
  const rate = rateOf(entry, performance.now());
  if (rate < hotAfter) return [0, 0];
  const demand = Math.ceil((rate * op.cost * blockMs) / SECOND_MS);
  const surcharge = isBucket(op) ? Math.ceil((op.limit * blockMs) / op.rule.sizeMs) : 0;
  const take = Math.min(maxBlock, demand, Math.floor((entry.seen - cost) / share) - surcharge);
  return take >= 2 ? [take, surcharge] : [0, 0];
}

/**
 * Refills a counted block to its size while its other half is admitted from, so that decisions never
 * wait for a take while the key stays hot: one call of its own, for units only. The block never holds
 * more than one take's size (the bound of docs/exactness.md is unchanged); a top-up that is not
 * granted or fails leaves the block as it was. Units counted for a block that ended meanwhile (idle,
 * replaced, its window over, a limit change heard) go back by `giveBack`; after a reset they are
 * dropped (`mayGiveBack`). Undefined when there is nothing worth a call.
 */
export function topUp(
  store: TakeStore,
  [entry, block, op]: readonly [Entry, Block, StoreOp],
  settings: LeasingSettings,
  giveBack: (refunds: readonly Refund[]) => unknown,
): Promise<unknown> | undefined {
  entry.seen = block.seen;
  const [size] = blockSize(entry, op, 0, settings);
  const more = size - block.left;
  if (more < 2) return undefined;
  const epoch = entry.epoch;
  const units = { ...op, cost: more };
  return store.evaluate([units], 'check').then(
    ({ results }) => {
      const r = results[0] as OpResult;
      entry.seen = r.remaining;
      if (!r.allowed || !mayGiveBack(entry, epoch)) return;
      // The same block (a reset or limit change heard since would have ended it), at the same limit.
      if (entry.block === block && r.receipt === block.receipt && r.limit === block.limit) {
        block.left += more;
        block.size = block.left;
        block.seen = r.remaining;
      } else giveBack([{ op: units, receipt: r.receipt }]);
    },
    () => undefined,
  );
}

/** The result of `op` admitted from `block`, which it is taken from. */
export function admitFrom(block: Block, op: StoreOp, nowLocal: number): OpResult {
  block.left -= op.cost;
  block.lastUsedLocal = nowLocal;
  return resultOf(block, op, nowLocal);
}

/** The result of `op` from `block`, whose `left` is what remains after it (nothing taken here). */
export function resultOf(block: Block, op: StoreOp, nowLocal: number): OpResult {
  // The store's remainder when the block was filled, less what this process admitted since.
  const remaining = block.seen + block.left;
  const limit = block.limit;
  const bucket = isBucket(op);
  const capacity = bucket && op.rule.burst > 0 ? op.rule.burst : limit;
  return {
    allowed: true,
    limit,
    overridden: block.overridden,
    remaining,
    resetMs: bucket ? block.resetMs : Math.max(0, Math.ceil(block.untilLocal - nowLocal)),
    retryAfterMs: 0,
    locked: false,
    count: Math.max(0, capacity - remaining),
    receipt: block.receipt,
    level: 0,
    lockedUntil: 0,
    lockedNow: false,
  };
}

/**
 * What goes back when a block ends at `nowLocal` (`nowMs` on the store's clock): a counted window's units
 * only before its end (a unit never moves into another window); a bucket's unused units, and the refill
 * reserved for the part of its lifetime not lived on either clock.
 */
export function ending(block: Block, nowLocal: number, nowMs: number): Refund | undefined {
  let units = 0;
  if (block.surcharge > 0 || isBucket(block.op)) {
    const unlived = Math.min(
      Math.max(0, block.untilLocal - nowLocal) / (block.untilLocal - block.sentLocal),
      Math.max(0, block.untilMs - nowMs) / Math.max(1, block.untilMs - block.sentMs),
    );
    units = block.left + Math.floor(block.surcharge * unlived);
  } else if (nowLocal < block.untilLocal && nowMs < block.untilMs) units = block.left;
  if (units <= 0) return undefined;
  return { op: { ...block.op, cost: units }, receipt: block.receipt };
}

/**
 * Ends the blocks of a key (`key` empty: of every key of `rule`; both empty: of every key), its epoch
 * counted: a take in flight for it is dropped when it lands. With `at` ([local, store] time), what goes
 * back of them; without, nothing does. `endPool` ends each such key's pool (its free slots go back by
 * their ids, which no count made since holds).
 */
export function forgetBlocks(
  entries: Map<string, Entry>,
  [rule, key]: readonly [string, string],
  at: readonly [number, number] | undefined,
  endPool: (entry: Entry) => void,
): Refund[] {
  const refunds: Refund[] = [];
  const forget = (entry: Entry | undefined) => {
    if (entry === undefined) return;
    endPool(entry);
    const refund = at && entry.block && ending(entry.block, at[0], at[1]);
    if (refund !== undefined) refunds.push(refund);
    entry.block = undefined;
    entry.epoch += at === undefined ? RESET_EPOCHS : 1;
  };
  if (rule !== '' && key !== '') forget(entries.get(`${rule}\u0000${key}`));
  else for (const [id, entry] of entries) if (rule === '' || id.startsWith(`${rule}\u0000`)) forget(entry);
  return refunds;
}

/** Ends every block of `entries` now: what goes back to the store. */
export function endBlocks(entries: Iterable<Entry>, nowLocal: number, nowMs: number): Refund[] {
  const refunds: Refund[] = [];
  for (const entry of entries) {
    const refund = entry.block && ending(entry.block, nowLocal, nowMs);
    entry.block = undefined;
    if (refund !== undefined) refunds.push(refund);
  }
  return refunds;
}

/** Remembers what the store has left of each leasable op's key: the next block's size depends on it. */
export function noteSeen(entries: ReadonlyArray<Entry | undefined>, result: EvalResult): EvalResult {
  for (let i = 0; i < entries.length; i++) {
    const entry = entries[i];
    if (entry !== undefined) entry.seen = (result.results[i] as OpResult).remaining;
  }
  return result;
}

/** The distinct [rule, key] of `refunds`: what a store announces once each. */
export function keysOf(refunds: readonly Refund[]): Array<[string, string]> {
  const keys = new Map<string, [string, string]>();
  for (const { op } of refunds) keys.set(idOf(op), [op.rule.name, op.key]);
  return [...keys.values()];
}
