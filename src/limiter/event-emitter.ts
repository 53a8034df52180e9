// The limiter's events without node:events: Node's EventEmitter surface (on, once, off, emit and their
// aliases), typed by an event map, on any runtime. Listeners run synchronously, in the order added, and a
// listener that throws throws out of `emit`, as with Node's.

type Listener<Args extends unknown[]> = (...args: Args) => void;

/** One registration: `once` ones are removed before they run; `listener` is what the caller gave. */
interface Entry {
  readonly listener: unknown;
  readonly once: boolean;
}

/** The default of `getMaxListeners`, as Node's: a count past it suggests a leak (nothing is enforced). */
const DEFAULT_MAX_LISTENERS = 10;

export class EventEmitter<Events extends { [K in keyof Events]: unknown[] }> {
  readonly #listeners = new Map<keyof Events, Entry[]>();
  #max = DEFAULT_MAX_LISTENERS;

  #add<K extends keyof Events>(event: K, listener: Listener<Events[K]>, once: boolean, first: boolean): this {
    if (typeof listener !== 'function')
      throw new TypeError(`The "listener" argument must be a function, got ${typeof listener}`);
    const entries = this.#listeners.get(event);
    const entry: Entry = { listener, once };
    // Copied on change: an emit under way runs the list it started with.
    if (entries === undefined) this.#listeners.set(event, [entry]);
    else this.#listeners.set(event, first ? [entry, ...entries] : [...entries, entry]);
    return this;
  }

  /** Calls `listener` on every `event`, after the listeners added before it. */
  on<K extends keyof Events>(event: K, listener: Listener<Events[K]>): this {
    return this.#add(event, listener, false, false);
  }

  addListener<K extends keyof Events>(event: K, listener: Listener<Events[K]>): this {
    return this.#add(event, listener, false, false);
  }

  /** Calls `listener` on the next `event` only. */
  once<K extends keyof Events>(event: K, listener: Listener<Events[K]>): this {
    return this.#add(event, listener, true, false);
  }

  prependListener<K extends keyof Events>(event: K, listener: Listener<Events[K]>): this {
    return this.#add(event, listener, false, true);
  }

  prependOnceListener<K extends keyof Events>(event: K, listener: Listener<Events[K]>): this {
    return this.#add(event, listener, true, true);
  }

  /** Removes the most recently added registration of `listener` for `event`, if any. */
  off<K extends keyof Events>(event: K, listener: Listener<Events[K]>): this {
    const entries = this.#listeners.get(event);
    if (entries !== undefined)
      this.#remove(event, entries, entries.map((e) => e.listener).lastIndexOf(listener));
    return this;
  }

  #remove(event: keyof Events, entries: Entry[], at: number): void {
    if (at < 0) return;
    if (entries.length === 1) this.#listeners.delete(event);
    else this.#listeners.set(event, [...entries.slice(0, at), ...entries.slice(at + 1)]);
  }

  removeListener<K extends keyof Events>(event: K, listener: Listener<Events[K]>): this {
    return this.off(event, listener);
  }

  /** Removes every listener of `event`, or of every event. */
  removeAllListeners(event?: keyof Events): this {
    if (event === undefined) this.#listeners.clear();
    else this.#listeners.delete(event);
    return this;
  }

  /** Calls each listener of `event` with `args`; true when there was one. */
  emit<K extends keyof Events>(event: K, ...args: Events[K]): boolean {
    const entries = this.#listeners.get(event);
    if (entries === undefined) return false;
    for (const entry of entries) {
      if (entry.once) {
        const now = this.#listeners.get(event);
        if (now !== undefined) this.#remove(event, now, now.indexOf(entry));
      }
      (entry.listener as Listener<Events[K]>).apply(this, args);
    }
    return true;
  }

  listenerCount(event: keyof Events): number {
    return this.#listeners.get(event)?.length ?? 0;
  }

  listeners<K extends keyof Events>(event: K): Listener<Events[K]>[] {
    return (this.#listeners.get(event) ?? []).map((e) => e.listener as Listener<Events[K]>);
  }

  rawListeners<K extends keyof Events>(event: K): Listener<Events[K]>[] {
    return this.listeners(event);
  }

  eventNames(): (keyof Events)[] {
    return [...this.#listeners.keys()];
  }

  /** Kept for code written for Node's emitter; no warning is ever printed. */
  setMaxListeners(n: number): this {
    if (!Number.isInteger(n) || n < 0)
      throw new RangeError(`The "n" argument must be a non-negative integer, got ${String(n)}`);
    this.#max = n;
    return this;
  }

  getMaxListeners(): number {
    return this.#max;
  }
}
