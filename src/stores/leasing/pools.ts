// A hot concurrency key's pool of slots (held in the store for this process, handed out and taken back
// here); and what a key's block or pool answers: whether it admits an op now, a peek with the blocks added,
// a request sent to the store with its blocks held (decideHeld).

import { windowKind } from '../../algorithms/index.js';
import type { EvalResult, OpResult, Refund, StoreOp } from '../store.js';
import {
  admitFrom,
  type Block,
  deniedBy,
  type Entry,
  idOf,
  mayGiveBack,
  type Pool,
  resultOf,
  usable,
} from './blocks.js';

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

/**
 * The units of `block` held for `op`, whose request did not pass: back into the block; when the block
 * ended meanwhile (its unused units went back without these), what goes to the store while its window
 * lasts, unless a reset ended it (`epoch`, the entry's when they were held: the count they were in is gone).
 */
export function putBack(
  entry: Entry,
  block: Block,
  op: StoreOp,
  epoch: number,
  [nowLocal, nowMs]: readonly [number, number],
): Refund | undefined {
  if (entry.block === block) block.left += op.cost;
  else if (mayGiveBack(entry, epoch) && nowLocal < block.untilLocal && nowMs < block.untilMs)
    return { op: { ...block.op, cost: op.cost }, receipt: block.receipt };
  return undefined;
}

/**
 * A request its blocks do not all serve. An op whose block serves it is admitted from the block (its
 * units held meanwhile, given back when the request is denied or fails: all or nothing, and a block is
 * not left unused beside a rule that has none); the others go to the store in one call (`take`).
 */
export async function decideHeld(
  ops: readonly StoreOp[],
  entries: ReadonlyArray<Entry | undefined>,
  [sentLocal, sentMs]: readonly [number, number],
  store: {
    take(ops: readonly StoreOp[], entries: ReadonlyArray<Entry | undefined>): Promise<EvalResult>;
    giveBack(refunds: readonly Refund[]): unknown;
    now(): readonly [number, number];
  },
): Promise<EvalResult> {
  const held = ops.map((op, i) => {
    const block = entries[i]?.block;
    return usable(block, op, sentLocal, sentMs) ? block : undefined;
  });
  if (held.every((block) => block === undefined)) return store.take(ops, entries);
  const epochs = entries.map((entry) => entry?.epoch ?? 0);
  // Each held op's result if the request is denied (nothing taken), and if it passes (admitted).
  const kept = held.map((block, i) => block && resultOf(block, ops[i] as StoreOp, sentLocal));
  const admitted = held.map((block, i) => block && admitFrom(block, ops[i] as StoreOp, sentLocal));
  const sent = ops.flatMap((_, i) => (held[i] === undefined ? [i] : []));
  const undo = () => {
    const now = store.now();
    const refunds = held.flatMap((block, i) => {
      const refund =
        block && putBack(entries[i] as Entry, block, ops[i] as StoreOp, epochs[i] as number, now);
      return refund === undefined ? [] : [refund];
    });
    if (refunds.length > 0) store.giveBack(refunds);
  };
  const answer = await store
    .take(
      sent.map((i) => ops[i] as StoreOp),
      sent.map((i) => entries[i]),
    )
    .catch((error: unknown) => {
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
