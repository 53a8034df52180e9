// Frees: a process that released concurrency slots announces it, and the processes whose calls wait for a
// slot of that key (`acquire`, a waiting `wrap`) try again at once instead of at the soonest lease end.
import { RedisChannel } from './channel.js';
import type { RedisConnection } from './connection/connection.js';
import { freeChannel } from './keys.js';

/**
 * Announcements of freed slots, on a channel of their own (`<prefix>:free`): only processes with a call
 * waiting for a slot subscribe, so a release costs one PUBLISH that nobody hears while nobody waits. The
 * release script publishes it (lua/refund.lua, after the slots are free): one per call, `[rule, key, rule,
 * key, ...]` as JSON (calls.ts refundCall).
 */
export class Frees {
  readonly #channel: RedisChannel;
  readonly #listeners = new Set<(rule: string, key: string) => void>();
  /** Resolves once the subscription is live (kept after `close`: a closed store subscribes no more). */
  #live: Promise<void> | undefined;

  constructor(connection: RedisConnection, prefix: string) {
    this.#channel = new RedisChannel(
      connection,
      freeChannel(prefix),
      (freed) => {
        for (let i = 0; i + 1 < freed.length; i += 2) {
          const rule: unknown = freed[i];
          const key: unknown = freed[i + 1];
          if (typeof rule !== 'string' || typeof key !== 'string' || rule === '') continue;
          for (const listener of this.#listeners) listener(rule, key);
        }
      },
      () => {
        for (const listener of this.#listeners) listener('', '');
      },
    );
  }

  /**
   * Calls `listener` with each free announced by any process, and `('', '')` after the subscriber
   * reconnected (frees may have been missed). Resolves once the subscription is live.
   */
  listen(listener: (rule: string, key: string) => void): Promise<void> {
    this.#listeners.add(listener);
    this.#live ??= this.#channel.live();
    return this.#live;
  }

  close(): void {
    this.#listeners.clear();
    this.#channel.close();
  }
}
