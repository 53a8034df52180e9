// Sliding counter: `buckets` sub-windows of size/buckets; a hit counts for at least `size`, so it never over-admits.

import type { StoreOp } from '../stores/store-ops.js';
import { type Algorithm, countingWindow, verdict } from './algorithm.js';

/** Bucket index (floor(t / width)) to units counted in that bucket, oldest first. */
export interface BucketState {
  buckets: Array<{ index: number; count: number }>;
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

function currentIndex(state: BucketState | undefined, op: StoreOp, nowMs: number): number {
  // Time never runs backwards: a clock behind the newest bucket is read as that bucket.
  const index = Math.floor(nowMs / width(op));
  const last = state?.buckets[state.buckets.length - 1];
  return last !== undefined && last.index > index ? last.index : index;
}

/** Ms from now until bucket `index` stops counting. */
function expiryMs(index: number, op: StoreOp, nowMs: number): number {
  return Math.max(1, Math.ceil((index + op.rule.buckets + 1) * width(op) - nowMs));
}

export const sliding: Algorithm<BucketState> = {
  kind: countingWindow('sliding window', ['size', 'buckets'], {
    unchosen:
      'a sliding window counts each bucket by the size of the request reading it, so a size chosen per request would shorten or stretch hits already counted: use a fixed or GCRA window',
  }),

  evaluate(state, op, nowMs, add) {
    const { buckets } = op.rule;
    const { limit } = op;
    const current = currentIndex(state, op, nowMs);
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
  apply(state, op, nowMs) {
    const current = currentIndex(state, op, nowMs);
    const first = firstLive(state, current, op.rule.buckets);
    // In place: the store holds the only reference to its state.
    const live = state ?? { buckets: [] };
    const list = live.buckets;
    if (first > 0) list.splice(0, first);
    if (op.cost > 0) {
      const last = list[list.length - 1];
      if (last !== undefined && last.index === current) last.count += op.cost;
      else list.push({ index: current, count: op.cost });
    }
    return live;
  },
  refund(state, op, _nowMs, receipt) {
    const bucket = state.buckets.find((b) => b.index === receipt);
    if (bucket !== undefined) {
      bucket.count -= Math.min(bucket.count, op.cost);
      if (bucket.count === 0) state.buckets.splice(state.buckets.indexOf(bucket), 1);
    }
    return state.buckets.length === 0 ? undefined : state;
  },
  expiresAt(state, op) {
    const last = state.buckets[state.buckets.length - 1];
    return last === undefined ? 0 : Math.ceil((last.index + op.rule.buckets + 1) * width(op));
  },
};
