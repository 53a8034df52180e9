// A hot concurrency key's pool of slots (held in the store for this process, handed out and taken back
// here); and what a key's block or pool answers: whether it admits an op now, a peek with the blocks added.

import { windowKind } from '../../algorithms/index.js';
import type { EvalResult, OpResult, Refund, StoreOp } from '../store.js';
import { type Entry, idOf, usable } from './blocks.js';

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

/** A concurrency op: its slots are pooled, not counted units. */
export function isSlots(op: StoreOp): boolean {
  return windowKind(op.rule.type).lease === 'slots';
}

/**
 * A pool from a decision that took `take` slots beyond its own (`op.cost`, one): the result's receipt is
 * the first id of the call, the decision's own slot, in use from now; the take's ids follow it.
 */
export function newPool(op: StoreOp, r: OpResult, take: number, sentLocal: number, nowLocal: number): Pool {
  const pool: Pool = {
    op: { ...op, cost: 0 },
    free: [],
    inUse: new Map(),
    size: take,
    untilLocal: sentLocal + op.rule.sizeMs,
    renewedLocal: sentLocal,
    renewing: false,
    lastUsedLocal: nowLocal,
    seen: r.remaining - take,
    limit: r.limit,
    overridden: r.overridden,
  };
  addSlots(pool, r.receipt, op.cost, take, nowLocal);
  return pool;
}

/**
 * Adds a call's slots to the pool: `own` from `first` on in use (the decision that took them), the `take`
 * after them free. The pool's lease stays the earlier one (the new slots' leases end later).
 */
export function addSlots(pool: Pool, first: number, own: number, take: number, nowLocal: number): void {
  for (let id = first; id < first + own; id++) pool.inUse.set(id, nowLocal);
  for (let id = first + own + take - 1; id >= first + own; id--) pool.free.push(id);
}

/** Whether the pool may still hand out slots for `op`: its lease not over here, the same limit. */
export function poolLive(pool: Pool, op: StoreOp, nowLocal: number): boolean {
  return nowLocal < pool.untilLocal && pool.op.limit === op.limit;
}

/** Whether the pool admits `op` now: one slot (pools hand out one at a time), free, and the pool live. */
export function poolUsable(pool: Pool | undefined, op: StoreOp, nowLocal: number): pool is Pool {
  return pool !== undefined && op.cost === 1 && pool.free.length > 0 && poolLive(pool, op, nowLocal);
}

/** The result of `op` admitted with a free slot of `pool`, which it now holds (its id is the receipt). */
export function admitFromPool(pool: Pool, nowLocal: number): OpResult {
  const id = pool.free.pop() as number;
  pool.inUse.set(id, nowLocal);
  pool.lastUsedLocal = nowLocal;
  // Free slots as the store had them when the pool was filled, plus those free here.
  const remaining = pool.seen + pool.free.length;
  return {
    allowed: true,
    limit: pool.limit,
    overridden: pool.overridden,
    remaining,
    resetMs: Math.max(0, Math.ceil(pool.untilLocal - nowLocal)),
    retryAfterMs: 0,
    locked: false,
    count: Math.max(0, pool.limit - remaining),
    receipt: id,
    level: 0,
    lockedUntil: 0,
    lockedNow: false,
  };
}

/**
 * A slot of the pool released by its request: true when the pool held it in use. It is free again, or,
 * with `size` slots free already, handed back (the caller releases it in the store).
 */
export function releaseToPool(pool: Pool, id: number): 'free' | 'back' | undefined {
  if (!pool.inUse.delete(id)) return undefined;
  if (pool.free.length >= pool.size) return 'back';
  pool.free.push(id);
  return 'free';
}

/**
 * In-use slots the limiter stopped renewing (`letLapse`: a request whose client went) for over half a
 * lease leave the pool, so that they lapse as they would outside it; the limiter renews the others at
 * least every third of a lease.
 */
export function dropUnrenewed(pool: Pool, nowLocal: number): void {
  const staleMs = pool.op.rule.sizeMs / 2;
  for (const [id, askedLocal] of pool.inUse) if (nowLocal - askedLocal > staleMs) pool.inUse.delete(id);
}

/** Runs of consecutive ids among `ids`, each a refund (or renewal) of `op` with the run's length as cost. */
export function runsOf(op: StoreOp, ids: Iterable<number>): Refund[] {
  const sorted = [...ids].sort((a, b) => a - b);
  const runs: Refund[] = [];
  let start = 0;
  for (let i = 1; i <= sorted.length; i++) {
    if (i < sorted.length && (sorted[i] as number) === (sorted[i - 1] as number) + 1) continue;
    runs.push({ op: { ...op, cost: i - start }, receipt: sorted[start] as number });
    start = i;
  }
  return runs;
}

/** Every slot the pool holds in the store, as runs: what its renewal renews. */
export function heldRuns(pool: Pool): Refund[] {
  return runsOf(pool.op, [...pool.free, ...pool.inUse.keys()]);
}

/** What a take needs of the store: its own decisions and refunds, behind the leases. */
export interface TakeStore {
  evaluate(ops: readonly StoreOp[], mode: 'check'): Promise<{ results: OpResult[] }>;
  refund(refunds: readonly Refund[]): Promise<unknown>;
}

/** Whether the key's block (on both clocks) or pool (on this process's: no window) admits `op` now. */
export function ready(entry: Entry, op: StoreOp, nowLocal: number, nowMs: number): boolean {
  return entry.pool !== undefined
    ? poolUsable(entry.pool, op, nowLocal)
    : usable(entry.block, op, nowLocal, nowMs);
}

/**
 * A peek's (or status's) answer from the store with this process's blocks added: the store counts a
 * block's units from when they were reserved, but this process still admits them, so a peek answers
 * here as a check would (`remaining` and `count` are this process's view, as a check's from a block).
 */
export function withBlocks(
  entries: ReadonlyMap<string, Entry>,
  ops: readonly StoreOp[],
  result: EvalResult,
  [nowLocal, nowMs]: readonly [number, number],
): EvalResult {
  ops.forEach((op, i) => {
    // Only leasable ops have entries (a status is a peek of cost 0).
    const block = entries.get(idOf(op))?.block;
    const r = result.results[i] as OpResult;
    if (!usable(block, { ...op, cost: 0 }, nowLocal, nowMs) || r.limit !== block.limit) return;
    // What the store has left before this op (a denied op takes nothing), and this process's block.
    const units = (r.allowed ? r.remaining + op.cost : r.remaining) + block.left;
    r.allowed = units >= op.cost;
    r.remaining = r.allowed ? units - op.cost : units;
    r.count = Math.max(0, r.count - block.left);
    if (r.allowed) r.retryAfterMs = 0;
  });
  return result;
}
