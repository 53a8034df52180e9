// The memory store's entries and the order it evicts them in: never one that denies, the fewest units first.

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
   * Units the state counted at its last write: evicting the entry hands that many back to whoever owns
   * the key. Counts that decay with time (sliding windows, buckets) keep the figure of their last write,
   * so an entry is never judged less consequential than it was.
   */
  count: number;
  /** No unit was left at the last write: the key is denied until its state expires. */
  exhausted: boolean;
  /** The queue the entry waits in (see EvictionQueues). */
  queue: number;
  /** Written again since it entered its queue or since the hand last passed it: CLOCK's second chance. */
  recent: boolean;
}

/**
 * True while an entry's state denies or holds something back: a lock, an escalation level, an exhausted
 * count. Such an entry is never evicted: evicting it would hand a locked or spent key a full budget.
 */
export function denies(entry: Entry, nowMs: number): boolean {
  return entry.lock !== undefined || (entry.exhausted && entry.stateExpiresAt > nowMs);
}

/** Queues by units counted: 1, 2-3, 4-7 … 64-127, 128 and more; then the queue of entries that deny. */
const COUNT_QUEUES = 8;
const DENYING = COUNT_QUEUES;
/** Bounded work per insert: past this many entries that must stay, the store grows by one instead. */
const MAX_KEPT = 1000;

function queueOf(entry: Entry, nowMs: number): number {
  if (denies(entry, nowMs)) return DENYING;
  return entry.count <= 1 ? 0 : Math.min(COUNT_QUEUES - 1, 31 - Math.clz32(entry.count));
}

/**
 * Every entry, in one queue per order of magnitude of its count, and one for those that deny. Eviction
 * takes from the lowest queue, the entry that entered it first (an entry written again meanwhile gets a
 * second chance at the back): a flood of single hits goes before a count of 2, which goes before one of
 * 10. Each queue's hand resumes where it last stopped (a live Set iterator): starting over from the front
 * would pass again the deleted entries a Set keeps until it rehashes, so a flood would cost O(maxKeys)
 * per insert.
 */
export class EvictionQueues {
  readonly #queues: Array<Set<Entry>> = Array.from({ length: COUNT_QUEUES + 1 }, () => new Set());
  readonly #hands: Array<SetIterator<Entry> | undefined> = new Array(COUNT_QUEUES + 1).fill(undefined);
  #size = 0;

  get size(): number {
    return this.#size;
  }

  /**
   * Files an entry, new or just written, in the queue its state calls for. `again`: the key was written
   * again, which earns it a second chance in its queue.
   */
  place(entry: Entry, nowMs: number, again = true): void {
    const queue = queueOf(entry, nowMs);
    if (queue === entry.queue) {
      if (again) entry.recent = true;
      return;
    }
    if (entry.queue < 0) this.#size++;
    else this.#queues[entry.queue]?.delete(entry);
    entry.queue = queue;
    entry.recent = false;
    (this.#queues[queue] as Set<Entry>).add(entry);
  }

  delete(entry: Entry): void {
    if (entry.queue < 0) return;
    this.#queues[entry.queue]?.delete(entry);
    entry.queue = -1;
    this.#size--;
  }

  *values(): Generator<Entry> {
    for (const queue of this.#queues) yield* queue;
  }

  /** Drops the parked hands: they keep the Sets' outgrown tables alive; the next eviction starts afresh. */
  park(): void {
    this.#hands.fill(undefined);
  }

  clear(): void {
    this.park();
    for (const queue of this.#queues) queue.clear();
    this.#size = 0;
  }

  /**
   * The entry to evict, from the lowest queue that has one; null when `expire` dropped an entry that had
   * expired (a place is free); undefined when `MAX_KEPT` entries in a row must stay. `busy`: entries of the
   * evaluation under way, which stay even when found empty since it is about to write them. Entries of
   * the denying queue that no longer deny are filed again on the way.
   */
  victim(
    nowMs: number,
    expire: (entry: Entry) => boolean,
    busy: (entry: Entry) => boolean,
  ): Entry | null | undefined {
    let kept = 0;
    for (let q = 0; q <= COUNT_QUEUES && kept < MAX_KEPT; q++) {
      const queue = this.#queues[q] as Set<Entry>;
      // Each entry once per call: a second chance moves it to the back, where this pass must not meet it again.
      for (let left = queue.size; left > 0 && kept < MAX_KEPT; left--) {
        const entry = this.#next(q);
        if (entry === undefined) break;
        if (busy(entry)) kept++;
        else if (expire(entry)) return null;
        else if (q === DENYING) {
          if (denies(entry, nowMs)) kept++;
          else this.place(entry, nowMs);
        } else if (entry.recent) {
          entry.recent = false;
          queue.delete(entry);
          queue.add(entry);
        } else return entry;
      }
    }
    return undefined;
  }

  #next(q: number): Entry | undefined {
    let next = this.#hands[q]?.next();
    if (next === undefined || next.done === true) {
      const hand = (this.#queues[q] as Set<Entry>).values();
      this.#hands[q] = hand;
      next = hand.next();
    }
    return next.done === true ? undefined : next.value;
  }
}
