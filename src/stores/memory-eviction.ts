// The memory store's entries and the order it evicts them in: never one that denies, the least consequential first.

export interface Lock {
  untilMs: number;
  level: number;
  /** The level is forgotten after this time. */
  forgetAtMs: number;
}

export interface Entry {
  readonly rule: string;
  readonly key: string;
  state: unknown;
  stateExpiresAt: number;
  /** A lock, or after it ended the escalation level still remembered (until `forgetAtMs`). */
  lock: Lock | undefined;
  /**
   * Share of the rule's capacity the state counted at its last write, from 0 to 1; 1 means exhausted
   * (no unit was left). Evicting an entry gives that much back to whoever owns the key, so the lowest
   * goes first. Counts that decay with time (sliding windows, buckets) keep the figure of their last
   * write: an entry is never judged less consequential than it was.
   */
  usage: number;
  /**
   * Written again since it was created or since the eviction hand last passed it: between entries of
   * equal usage, the one not used again goes first (CLOCK's second chance). A flag instead of moving
   * the key to the back of a Set on every write.
   */
  recent: boolean;
}

/** The share of capacity a state counts, from an algorithm's `count` and `remaining` after an op. */
export function usageOf(count: number, remaining: number): number {
  return remaining <= 0 ? 1 : count / (count + remaining);
}

/**
 * True while an entry's state denies or holds something back: a lock, an escalation level, an exhausted
 * count. Such an entry is never evicted: evicting it would hand a locked or spent key a full budget.
 */
export function denies(entry: Entry, nowMs: number): boolean {
  return entry.lock !== undefined || (entry.usage >= 1 && entry.stateExpiresAt > nowMs);
}

/** How many evictable entries one eviction compares: the least consequential of them goes. */
const SAMPLE = 8;
/**
 * Bounded work per insert: past this many entries that deny (or belong to the evaluation under way),
 * the store grows by one instead. Entries passed for their second chance do not count.
 */
const MAX_KEPT = 1000;

/**
 * Every entry, oldest first, and the hand that walks them to choose what to evict. The hand resumes
 * where it last stopped (a live Set iterator): starting over from the front each time would pass again
 * the entries that deny, and the holes V8 leaves in a Set until it rehashes, so a flood would cost
 * O(maxKeys) per insert.
 */
export class EntryRing {
  readonly #entries = new Set<Entry>();
  #cursor: SetIterator<Entry> | undefined;

  get size(): number {
    return this.#entries.size;
  }

  add(entry: Entry): void {
    this.#entries.add(entry);
  }

  delete(entry: Entry): void {
    this.#entries.delete(entry);
  }

  values(): SetIterator<Entry> {
    return this.#entries.values();
  }

  /** Drops the parked hand: it keeps the Set's outgrown tables alive; the next eviction starts a fresh one. */
  park(): void {
    this.#cursor = undefined;
  }

  clear(): void {
    this.#cursor = undefined;
    this.#entries.clear();
  }

  /**
   * The entry to evict: of the next `SAMPLE` entries that may go, the one with the lowest usage (equal
   * usage: the one not written again, then the oldest); their second chances are spent. Undefined when
   * `MAX_KEPT` entries in a row must stay. `expire` forgets what has expired and returns true when the
   * entry is gone (it was empty): that freed a place, and nothing else is evicted. `busy`: entries of
   * the evaluation under way, which stay even when found empty since it is about to write them.
   */
  victim(
    nowMs: number,
    expire: (entry: Entry) => boolean,
    busy: (entry: Entry) => boolean,
  ): Entry | null | undefined {
    let best: Entry | undefined;
    let bestRecent = false;
    let compared = 0;
    for (let kept = 0; kept < MAX_KEPT && compared < SAMPLE; ) {
      const entry = this.#next();
      if (entry === undefined) break;
      if (busy(entry)) kept++;
      else if (expire(entry)) return null;
      else if (denies(entry, nowMs)) kept++;
      else {
        compared++;
        const recent = entry.recent;
        entry.recent = false;
        // Lower usage first; equal usage: the one not written again, then the oldest.
        if (
          best === undefined ||
          entry.usage < best.usage ||
          (entry.usage === best.usage && !recent && bestRecent)
        ) {
          best = entry;
          bestRecent = recent;
        }
      }
    }
    return best;
  }

  #next(): Entry | undefined {
    let next = this.#cursor?.next();
    if (next === undefined || next.done === true) {
      this.#cursor = this.#entries.values();
      next = this.#cursor.next();
    }
    return next.done === true ? undefined : next.value;
  }
}
