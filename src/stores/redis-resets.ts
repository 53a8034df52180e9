// Resets: lua/reset.lua clears a key, and every process sharing the prefix hears of it (deny caches forget it).
import type { RedisConnection, RedisSubscription } from './redis-connection.js';
import { integers, type KeySpace, resetCall, resetChannel, type ScriptTime } from './redis-protocol.js';
import { type RedisScript, runScriptThen } from './redis-scripts.js';

/** Called with the rule and key reset; `('', '')`: resets may have been missed, forget everything. */
export type ResetListener = (rule: string, key: string) => void;

export class Resets {
  readonly #connection: RedisConnection;
  readonly #script: RedisScript;
  readonly #space: KeySpace;
  readonly #listeners = new Set<ResetListener>();
  #subscription: RedisSubscription | undefined;

  constructor(connection: RedisConnection, script: RedisScript, space: KeySpace) {
    this.#connection = connection;
    this.#script = script;
    this.#space = space;
  }

  /**
   * Clears count, lock and level (and the lock's lock-index entry, in the same call), then announces
   * the reset. Resolves true when the key was locked.
   */
  async reset(rule: string, key: string, time: ScriptTime): Promise<boolean> {
    const { keys, args } = resetCall(this.#space, rule, key, time);
    const channel = resetChannel(this.#space.prefix);
    // Announced in the same write as the reset, so that Redis runs it right after. Redis then writes
    // the news to the subscribers before its replies to this process (a reply for it was pending
    // first), so another process on the same server hears of the reset before this one's resolves.
    const announce = () => this.#connection.send('PUBLISH', [channel, JSON.stringify([rule, key])]);
    const reply = await runScriptThen(this.#connection, this.#script, keys, args, announce);
    const [wasLocked] = integers(reply, 2, 'reset');
    return wasLocked === 1;
  }

  /**
   * Subscribes (once, lazily, on a connection of its own) to resets announced by any process. After a
   * reconnection `listener('', '')` is called: resets announced while the subscriber was away were
   * missed, so local caches should forget everything.
   */
  listen(listener: ResetListener): void {
    this.#listeners.add(listener);
    if (this.#subscription !== undefined) return;
    this.#subscription = this.#connection.subscribe(
      resetChannel(this.#space.prefix),
      (message) => {
        let parsed: unknown;
        try {
          parsed = JSON.parse(message);
        } catch {
          return;
        }
        if (!Array.isArray(parsed) || typeof parsed[0] !== 'string' || typeof parsed[1] !== 'string') return;
        for (const notify of this.#listeners) notify(parsed[0], parsed[1]);
      },
      () => {
        for (const notify of this.#listeners) notify('', '');
      },
    );
  }

  close(): void {
    this.#listeners.clear();
    this.#subscription?.close();
    this.#subscription = undefined;
  }
}
