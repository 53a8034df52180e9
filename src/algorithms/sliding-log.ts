// Sliding log: exact; a hit at t counts until t + size. One entry per distinct millisecond, weighted by cost.
import { type Algorithm, countingWindow, verdict } from './algorithm.js';

/** Entries oldest first: `ts` epoch ms, `cost` units hit at that millisecond. */
export interface LogState {
  entries: Array<{ ts: number; cost: number }>;
}

/** Index of the first entry still inside the window at `nowMs`. */
function firstLive(entries: LogState['entries'], nowMs: number, sizeMs: number): number {
  let i = 0;
  while (i < entries.length && (entries[i] as { ts: number }).ts + sizeMs <= nowMs) i++;
  return i;
}

/** Time never runs backwards inside the log: a clock behind the newest entry is read as that entry's time. */
function clamp(state: LogState | undefined, nowMs: number): number {
  const last = state?.entries[state.entries.length - 1];
  return last !== undefined && last.ts > nowMs ? last.ts : nowMs;
}

export const slidingLog: Algorithm<LogState> = {
  kind: countingWindow('sliding log', ['size'], {
    unchosen:
      'a sliding log judges every hit it holds by the size of the request reading it, so a size chosen per request would shorten or stretch hits already counted: use a fixed or GCRA window',
  }),

  evaluate(state, op, now, add) {
    const nowMs = clamp(state, now);
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
  apply(state, op, now) {
    const nowMs = clamp(state, now);
    // In place: the store holds the only reference to its state.
    const live = state ?? { entries: [] };
    const entries = live.entries;
    const first = firstLive(entries, nowMs, op.rule.sizeMs);
    if (first > 0) entries.splice(0, first);
    if (op.cost > 0) {
      const last = entries[entries.length - 1];
      if (last !== undefined && last.ts === nowMs) last.cost += op.cost;
      else entries.push({ ts: nowMs, cost: op.cost });
    }
    return live;
  },
  refund(state, op, _nowMs, receipt) {
    const entry = state.entries.find((e) => e.ts === receipt);
    if (entry !== undefined) {
      entry.cost -= Math.min(entry.cost, op.cost);
      if (entry.cost === 0) state.entries.splice(state.entries.indexOf(entry), 1);
    }
    return state.entries.length === 0 ? undefined : state;
  },
  expiresAt: (state, op) => {
    const last = state.entries[state.entries.length - 1];
    return last === undefined ? 0 : last.ts + op.rule.sizeMs;
  },
};
