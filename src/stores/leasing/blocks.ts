// A hot key's block of units and what is decided from it: its size, its use, its top-up, its return.

import { windowKind } from '../../algorithms/index.js';
import type { OpResult, Refund, StoreOp } from '../store.js';
import type { LeasingSettings } from './leasing-options.js';
import { type Pool, poolUsable } from './pools.js';

/**
 * Units of one rule and key reserved in the store (counted there when the block was taken) and not yet
 * admitted here. Every deadline is on this process's monotonic clock, measured from before the take
 * was sent, so no wall clock is compared with another process's or the store's.
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
   * Counts the key's resets and limit changes heard (`forget`): a take sent before one and answered
   * after it may have been counted before the reset, so its units are dropped, never admitted.
   */
  epoch: number;
}

/** What a take needs of the store: its own decisions and refunds, behind the leases. */
export interface TakeStore {
  evaluate(ops: readonly StoreOp[], mode: 'check'): Promise<{ results: OpResult[] }>;
  refund(refunds: readonly Refund[]): Promise<unknown>;
}

const SECOND_MS = 1000;
/** The shortest time a key's rate is measured over. */
const RATE_MIN_MS = 100;

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
export function usable(block: Block | undefined, op: StoreOp, nowLocal: number): block is Block {
  return (
    block !== undefined &&
    block.left >= op.cost &&
    nowLocal < block.untilLocal &&
    block.op.limit === op.limit &&
    block.op.periodEndMs === op.periodEndMs
  );
}

/** Whether the key's block or pool admits `op` now. */
export function ready(entry: Entry, op: StoreOp, nowLocal: number): boolean {
  return entry.pool !== undefined ? poolUsable(entry.pool, op, nowLocal) : usable(entry.block, op, nowLocal);
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
 * granted, fails or lands on a block that ended leaves the block as it was (units counted for a block
 * that ended go back). Undefined when there is nothing worth a call.
 */
export function topUp(
  store: TakeStore,
  entry: Entry,
  block: Block,
  op: StoreOp,
  settings: LeasingSettings,
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
      if (!r.allowed || entry.epoch !== epoch) return;
      if (entry.block === block && r.receipt === block.receipt && r.limit === block.limit) {
        block.left += more;
        block.size = block.left;
        block.seen = r.remaining;
      } else {
        // Counted for a block that ended meanwhile (idle, replaced, its window over): back they go.
        store.refund([{ op: units, receipt: r.receipt }]).catch(() => undefined);
      }
    },
    () => undefined,
  );
}

/** The result of `op` admitted from `block`, which it is taken from. */
export function admitFrom(block: Block, op: StoreOp, nowLocal: number): OpResult {
  block.left -= op.cost;
  block.lastUsedLocal = nowLocal;
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
 * What goes back when a block ends at `nowLocal`: a counted window's units only before its end (a unit
 * never moves into another window); a bucket's unused units, and the refill reserved for the part of
 * its lifetime not lived.
 */
export function ending(block: Block, nowLocal: number): Refund | undefined {
  let units = 0;
  if (block.surcharge > 0 || isBucket(block.op)) {
    const lifeMs = block.untilLocal - block.sentLocal;
    const unlived = Math.max(0, block.untilLocal - nowLocal) / lifeMs;
    units = block.left + Math.floor(block.surcharge * unlived);
  } else if (nowLocal < block.untilLocal) units = block.left;
  if (units <= 0) return undefined;
  return { op: { ...block.op, cost: units }, receipt: block.receipt };
}
