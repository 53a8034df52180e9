// Sliding counter: `buckets` sub-windows of size/buckets; a hit counts for at least `size`, so it never over-admits.
//
// A size chosen per client (a `window` function): the state keeps the size its buckets count in. A request of
// another size re-files each bucket still counting into the bucket of its own width that ends first at or
// after the old one's end, and counts in its size from then on: a hit already counted leaves no earlier than
// it would have, and at most one bucket of the new size later (the lateness any hit may have), so a change
// never shortens what is counted nor stretches it past the counter's own rounding. The state's size is
// written with its buckets; a state written before sizes could be chosen has none and counts in the op's.

import type { StoreOp } from '../stores/store-ops.js';
import { type Algorithm, countingWindow, verdict } from './algorithm.js';

/** Bucket index (floor(t / width)) to units counted in that bucket, oldest first; the size they count in. */
export interface BucketState {
  buckets: Array<{ index: number; count: number }>;
  /** The window size (ms) the buckets count in; absent (a state of an earlier release): the op's. */
  sizeMs?: number;
}

function width(op: StoreOp): number {
  return op.rule.sizeMs / op.rule.buckets;
}

/**
 * A bucket `j` counts while the current index is at most `j + buckets`: a hit late in bucket j then
 * counts for at least `size` and at most `size + width`. The price of O(buckets) memory is that a
 * unit may come back up to one bucket width late; it never comes back early.
 */
function firstLive(state: BucketState | undefined, current: number, buckets: number): number {
  const list = state?.buckets ?? [];
  let i = 0;
  while (i < list.length && (list[i] as { index: number }).index < current - buckets) i++;
  return i;
}

/**
 * The state as buckets of the op's size: one counted in another size has each bucket still counting at
 * `nowMs` re-filed into the op's width (see the header); the same object when nothing changes.
 */
function inOpSize(state: BucketState | undefined, op: StoreOp, nowMs: number): BucketState | undefined {
  const from = state?.sizeMs;
  if (state === undefined || from === undefined || from === op.rule.sizeMs) return state;
  const { buckets } = op.rule;
  const fromWidth = from / buckets;
  const to = width(op);
  const current = Math.floor(nowMs / fromWidth);
  const list: BucketState['buckets'] = [];
  for (const bucket of state.buckets) {
    if (bucket.index < current - buckets) continue;
    const index = Math.ceil(((bucket.index + buckets + 1) * fromWidth) / to) - buckets - 1;
    const last = list[list.length - 1];
    if (last !== undefined && last.index === index) last.count += bucket.count;
    else list.push({ index, count: bucket.count });
  }
  return { buckets: list, sizeMs: op.rule.sizeMs };
}

/** Ms from now until bucket `index` stops counting. */
function expiryMs(index: number, op: StoreOp, nowMs: number): number {
  return Math.max(1, Math.ceil((index + op.rule.buckets + 1) * width(op) - nowMs));
}

export const sliding: Algorithm<BucketState> = {
  kind: countingWindow('sliding window', ['size', 'buckets']),

  evaluate(stored, op, nowMs, add) {
    const state = inOpSize(stored, op, nowMs);
    const { buckets } = op.rule;
    const { limit } = op;
    const current = Math.floor(nowMs / width(op));
    const list = state?.buckets ?? [];
    const first = firstLive(state, current, buckets);
    let used = 0;
    for (let i = first; i < list.length; i++) used += (list[i] as { count: number }).count;
    const total = used + op.cost;
    const allowed = total <= limit;
    const counted = allowed || add ? total : used;
    const oldest =
      first < list.length ? (list[first] as { index: number }).index : counted > 0 ? current : undefined;
    let retryAfterMs = 0;
    if (!allowed) {
      let freed = 0;
      retryAfterMs = expiryMs(current, op, nowMs);
      for (let i = first; i < list.length; i++) {
        const bucket = list[i] as { index: number; count: number };
        freed += bucket.count;
        retryAfterMs = expiryMs(bucket.index, op, nowMs);
        if (used - freed + op.cost <= limit) break;
      }
    }
    return verdict(
      allowed,
      Math.max(0, limit - counted),
      oldest === undefined ? 0 : expiryMs(oldest, op, nowMs),
      retryAfterMs,
      counted,
      current,
    );
  },
  apply(stored, op, nowMs) {
    const state = inOpSize(stored, op, nowMs);
    const current = Math.floor(nowMs / width(op));
    const first = firstLive(state, current, op.rule.buckets);
    // In place: the store holds the only reference to its state.
    const live = state ?? { buckets: [] };
    live.sizeMs = op.rule.sizeMs;
    const list = live.buckets;
    if (first > 0) list.splice(0, first);
    if (op.cost > 0) {
      // Oldest first: a bucket re-filed from a longer size, or written on a clock ahead, may come after this one.
      let at = list.length;
      while (at > 0 && (list[at - 1] as { index: number }).index > current) at--;
      const before = list[at - 1];
      if (before !== undefined && before.index === current) before.count += op.cost;
      else list.splice(at, 0, { index: current, count: op.cost });
    }
    return live;
  },
  refund(state, op, _nowMs, receipt) {
    // A receipt is a bucket of its op's size: one re-filed into another size since is not found again.
    if (state.sizeMs !== undefined && state.sizeMs !== op.rule.sizeMs) return state;
    const bucket = state.buckets.find((b) => b.index === receipt);
    if (bucket !== undefined) {
      bucket.count -= Math.min(bucket.count, op.cost);
      if (bucket.count === 0) state.buckets.splice(state.buckets.indexOf(bucket), 1);
    }
    return state.buckets.length === 0 ? undefined : state;
  },
  expiresAt(state, op) {
    const last = state.buckets[state.buckets.length - 1];
    const sizeMs = state.sizeMs ?? op.rule.sizeMs;
    return last === undefined
      ? 0
      : Math.ceil((last.index + op.rule.buckets + 1) * (sizeMs / op.rule.buckets));
  },
};
