// Which Cluster master serves each slot, as CLUSTER SLOTS last said: how requests of different slots share a call.
import { unrefTimer } from '../../timers.js';
import type { RedisConnection } from './connection/connection.js';

/** Slots in a Redis Cluster. */
const SLOTS = 16384;
/** The map is read again at most this often, however many calls find it stale. */
const REFRESH_INTERVAL_MS = 1000;

/**
 * The master of each slot, read with CLUSTER SLOTS through the connection (any node answers), so that
 * it works whatever client library is behind the connection. It is only a hint: a call grouped on a
 * stale map is routed by its first key as any other, and the requests whose keys the node does not
 * serve fail there before writing anything and are sent again on their own (redis-batches.ts).
 */
export class SlotMap {
  readonly #connection: RedisConnection;
  #masters: Array<string | undefined> | undefined;
  #loading = false;
  #pending: NodeJS.Timeout | undefined;
  #loadedAt = Number.NEGATIVE_INFINITY;
  /** False once the server refused CLUSTER SLOTS (an ACL): grouping by master is then off. */
  #usable = true;

  constructor(connection: RedisConnection) {
    this.#connection = connection;
  }

  /** The master ("host:port") serving `slot`; undefined until the map is read (reading starts now). */
  masterOf(slot: number): string | undefined {
    if (this.#masters === undefined) this.refresh();
    return this.#masters?.[slot];
  }

  /**
   * Reads the map again, in the background: now, or a second after the last read when that was more
   * recent (one read then serves every call that found the map stale meanwhile).
   */
  refresh(): void {
    if (!this.#usable || this.#loading || this.#pending !== undefined) return;
    const waitMs = this.#loadedAt + REFRESH_INTERVAL_MS - performance.now();
    if (waitMs > 0) {
      this.#pending = setTimeout(() => {
        this.#pending = undefined;
        this.refresh();
      }, waitMs);
      unrefTimer(this.#pending);
      return;
    }
    this.#loading = true;
    this.#loadedAt = performance.now();
    this.#connection.send('CLUSTER', ['SLOTS']).then(
      (reply) => {
        this.#loading = false;
        this.#masters = parseSlots(reply);
      },
      (error: unknown) => {
        this.#loading = false;
        if (error instanceof Error && /^(NOPERM|ERR unknown)/.test(error.message)) this.#usable = false;
      },
    );
  }

  /** Stops a read waiting for its turn (the store is closing). */
  close(): void {
    clearTimeout(this.#pending);
    this.#pending = undefined;
  }
}

/** CLUSTER SLOTS: [first, last, [host, port, id?], replicas...] per range; slot -> "host:port" of its master. */
function parseSlots(reply: unknown): Array<string | undefined> | undefined {
  if (!Array.isArray(reply)) return undefined;
  const masters = new Array<string | undefined>(SLOTS);
  for (const range of reply) {
    if (!Array.isArray(range)) continue;
    const [first, last, master] = range as [unknown, unknown, unknown];
    if (typeof first !== 'number' || typeof last !== 'number' || !Array.isArray(master)) continue;
    const address = `${String(master[0])}:${String(master[1])}`;
    for (let slot = first; slot <= last && slot < SLOTS; slot++) masters[slot] = address;
  }
  return masters;
}
