// Sliding log: exact; a hit at t counts until t + size. One entry per distinct millisecond, weighted by cost.
//
// A size chosen per client (a `window` function): each hit keeps the window that was in force when it was
// logged. The state keeps the size its entries count in; a request of another size moves every entry's time
// by the difference (a hit at t of a 60 s log is one at t + 50 s of a 10 s log: both leave at t + 60 s), so
// what is logged leaves exactly when it would have, and new hits count the new size. A state written before
// sizes could be chosen has no size and counts in the op's.
import type { StoreOp } from '../stores/store-ops.js';
import { type Algorithm, countingWindow, verdict } from './algorithm.js';

/** Entries oldest first: `ts` epoch ms, `cost` units hit at that millisecond; the size they count in. */
export interface LogState {
  entries: Array<{ ts: number; cost: number }>;
  /** The window size (ms) the entries count in; absent (a state of an earlier release): the op's. */
  sizeMs?: number;
}

/** Index of the first entry still inside the window at `nowMs`. */
function firstLive(entries: LogState['entries'], nowMs: number, sizeMs: number): number {
  let i = 0;
  while (i < entries.length && (entries[i] as { ts: number }).ts + sizeMs <= nowMs) i++;
  return i;
}

/** The log in the op's size: one of another size has its entries moved to leave when they would have. */
function inOpSize(state: LogState | undefined, op: StoreOp): LogState | undefined {
  const from = state?.sizeMs;
  if (state === undefined || from === undefined || from === op.rule.sizeMs) return state;
  const shift = from - op.rule.sizeMs;
  return { entries: state.entries.map((e) => ({ ts: e.ts + shift, cost: e.cost })), sizeMs: op.rule.sizeMs };
}

export const slidingLog: Algorithm<LogState> = {
  kind: countingWindow('sliding log', ['size']),

  evaluate(stored, op, nowMs, add) {
    const state = inOpSize(stored, op);
    const { sizeMs } = op.rule;
    const { limit } = op;
    const entries = state?.entries ?? [];
    const first = firstLive(entries, nowMs, sizeMs);
    let used = 0;
    for (let i = first; i < entries.length; i++) used += (entries[i] as { cost: number }).cost;
    const total = used + op.cost;
    const allowed = total <= limit;
    const counted = allowed || add ? total : used;
    const oldest =
      first < entries.length ? (entries[first] as { ts: number }).ts : counted > 0 ? nowMs : undefined;
    let retryAfterMs = 0;
    if (!allowed) {
      // Walk the oldest entries until enough units have expired for this op to fit.
      let freed = 0;
      retryAfterMs = sizeMs;
      for (let i = first; i < entries.length; i++) {
        const entry = entries[i] as { ts: number; cost: number };
        freed += entry.cost;
        retryAfterMs = entry.ts + sizeMs - nowMs;
        if (used - freed + op.cost <= limit) break;
      }
    }
    return verdict(
      allowed,
      Math.max(0, limit - counted),
      oldest === undefined ? 0 : oldest + sizeMs - nowMs,
      retryAfterMs,
      counted,
      nowMs,
    );
  },
  apply(stored, op, nowMs) {
    const state = inOpSize(stored, op);
    // In place: the store holds the only reference to its state.
    const live = state ?? { entries: [] };
    live.sizeMs = op.rule.sizeMs;
    const entries = live.entries;
    const first = firstLive(entries, nowMs, op.rule.sizeMs);
    if (first > 0) entries.splice(0, first);
    if (op.cost > 0) {
      // Oldest first: an entry moved from a longer size, or logged on a clock ahead, may come after this one.
      let at = entries.length;
      while (at > 0 && (entries[at - 1] as { ts: number }).ts > nowMs) at--;
      const before = entries[at - 1];
      if (before !== undefined && before.ts === nowMs) before.cost += op.cost;
      else entries.splice(at, 0, { ts: nowMs, cost: op.cost });
    }
    return live;
  },
  refund(state, op, _nowMs, receipt) {
    // A receipt is an entry's time in its op's size: one moved into another size since is not found again.
    if (state.sizeMs !== undefined && state.sizeMs !== op.rule.sizeMs) return state;
    const entry = state.entries.find((e) => e.ts === receipt);
    if (entry !== undefined) {
      entry.cost -= Math.min(entry.cost, op.cost);
      if (entry.cost === 0) state.entries.splice(state.entries.indexOf(entry), 1);
    }
    return state.entries.length === 0 ? undefined : state;
  },
  expiresAt: (state, op) => {
    const last = state.entries[state.entries.length - 1];
    return last === undefined ? 0 : last.ts + (state.sizeMs ?? op.rule.sizeMs);
  },
};
