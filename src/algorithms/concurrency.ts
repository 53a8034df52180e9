// Concurrency: admitted while fewer than `limit` slots are held for the key; a slot is held until released, or
// until its lease (`sizeMs`) runs out unless its process renews it.

import type { StoreOp } from '../stores/store-ops.js';
import { type Algorithm, countingWindow, verdict } from './algorithm.js';

/**
 * Slot ids are `nowMs × SLOT_IDS_PER_MS + n`, one past the last id handed out when that is later: they
 * only grow, for a key, so a slot released or lapsed is never handed out again and a late release of it
 * frees nothing else. A key forgotten (no holder for a lease) starts again from the clock, which has
 * moved on past every id it gave before (while fewer than this many slots a millisecond were taken).
 * Ids stay below 2^53 until the year 2248.
 */
export const SLOT_IDS_PER_MS = 1024;

/** The holders of one key. */
export interface HolderState {
  /** The last slot id handed out (0: none). */
  seq: number;
  /** Slot id -> epoch ms its lease ends; a holder whose lease ended (`untilMs <= now`) has lapsed. */
  holders: Map<number, number>;
}

/** The id of the next slot taken at `nowMs`. */
export function nextSlotId(state: HolderState | undefined, nowMs: number): number {
  return Math.max((state?.seq ?? 0) + 1, nowMs * SLOT_IDS_PER_MS + 1);
}

/** Lease ends of the live holders, soonest first. */
function liveUntils(state: HolderState | undefined, nowMs: number): number[] {
  const out: number[] = [];
  if (state === undefined) return out;
  for (const untilMs of state.holders.values()) if (untilMs > nowMs) out.push(untilMs);
  return out.sort((a, b) => a - b);
}

/**
 * Renews the `cost` slots taken from `receipt` on, each until `nowMs + sizeMs`: true when every one of
 * them was still held (a slot released, lapsed or reset is not taken again).
 */
export function renewSlots(
  state: HolderState | undefined,
  op: StoreOp,
  nowMs: number,
  receipt: number,
): boolean {
  let held = true;
  for (let id = receipt; id < receipt + op.cost; id++) {
    const untilMs = state?.holders.get(id);
    if (untilMs === undefined || untilMs <= nowMs) held = false;
    else state?.holders.set(id, nowMs + op.rule.sizeMs);
  }
  return held;
}

export const concurrency: Algorithm<HolderState> = {
  // Slots held at once, up to the limit; with `lease` (a slot's life after its process died), the window
  // holds slots until they are released (RuleFacts.holdsSlots).
  kind: countingWindow('concurrency', ['lease'], {
    unchosen:
      "a concurrency window's lease is how long a slot outlives a process that died holding it, a property of your processes rather than of a client: give clients different limits with a limit function",
    // A hot key's slots are pooled in a process, released to the store when idle (src/stores/leasing/pools.ts).
    lease: 'slots',
  }),

  evaluate(state, op, nowMs, add) {
    // The live holders and the soonest lease end, in one pass: sorted only for a denial that needs more.
    let live = 0;
    let first = Number.POSITIVE_INFINITY;
    if (state !== undefined) {
      for (const untilMs of state.holders.values()) {
        if (untilMs <= nowMs) continue;
        live++;
        if (untilMs < first) first = untilMs;
      }
    }
    const { limit } = op;
    const total = live + op.cost;
    const allowed = total <= limit;
    const counted = allowed || add ? total : live;
    // Until the soonest lease ends: the latest a slot frees if its holder stops renewing (a release frees one sooner).
    const resetMs = live > 0 ? first - nowMs : counted > 0 ? op.rule.sizeMs : 0;
    let retryAfterMs = 0;
    if (!allowed && live > 0) {
      // Enough holders must lapse for this op to fit (all of them when it cannot fit at all).
      const k = Math.min(live, total - limit);
      retryAfterMs = (k === 1 ? first : (liveUntils(state, nowMs)[k - 1] as number)) - nowMs;
    }
    return verdict(
      allowed,
      Math.max(0, limit - counted),
      resetMs,
      retryAfterMs,
      counted,
      nextSlotId(state, nowMs),
    );
  },
  apply(state, op, nowMs) {
    // In place: the store holds the only reference to its state.
    const held = state ?? { seq: 0, holders: new Map<number, number>() };
    for (const [id, untilMs] of held.holders) if (untilMs <= nowMs) held.holders.delete(id);
    if (op.cost > 0) {
      const id = nextSlotId(held, nowMs);
      for (let k = 0; k < op.cost; k++) held.holders.set(id + k, nowMs + op.rule.sizeMs);
      held.seq = id + op.cost - 1;
    }
    return held;
  },
  refund(state, op, _nowMs, receipt) {
    // A release: the slots taken from `receipt` on. Unknown or lapsed ones: nothing to do. The state stays
    // (its seq) until it expires, so no id is handed out twice.
    for (let id = receipt; id < receipt + op.cost; id++) state.holders.delete(id);
    return state;
  },
  expiresAt(state, op) {
    let last = Math.floor(state.seq / SLOT_IDS_PER_MS) + op.rule.sizeMs;
    for (const untilMs of state.holders.values()) if (untilMs > last) last = untilMs;
    return last;
  },
};
