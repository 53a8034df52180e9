// Resets: lua/reset.lua clears a key, and every process sharing the prefix hears of it (deny caches forget it).
import { randomBytes } from 'node:crypto';
import { resetCall } from './redis-calls.js';
import type { RedisConnection, RedisSubscription } from './redis-connection.js';
import { type KeySpace, resetChannel } from './redis-keys.js';
import type { ScriptTime } from './redis-op-text.js';
import { integers } from './redis-replies.js';
import { type RedisScript, runScriptThen } from './redis-scripts.js';
import type { StoreRule } from './store-ops.js';

/**
 * Called with the rule and key reset, or whose override changed (`override` true); `('', '')`:
 * announcements may have been missed, forget everything.
 */
export type ResetListener = (rule: string, key: string, override: boolean) => void;

/** How often a hello is sent again while this process's subscription has not heard it back (ms). */
const HELLO_RETRY_MS = 100;

export class Resets {
  readonly #connection: RedisConnection;
  readonly #script: RedisScript;
  readonly #space: KeySpace;
  readonly #listeners = new Set<ResetListener>();
  #subscription: RedisSubscription | undefined;
  /** The hello this process waits to hear back (see `heard`), and what to do then. */
  #hello: { id: string; heard: Promise<void>; done(): void; timer: NodeJS.Timeout | undefined } | undefined;

  constructor(connection: RedisConnection, script: RedisScript, space: KeySpace) {
    this.#connection = connection;
    this.#script = script;
    this.#space = space;
  }

  /**
   * Clears count, lock and level (and the lock's lock-index entry, in the same call), then announces
   * the reset. Resolves true when the key was locked.
   */
  async reset(rule: StoreRule, key: string, time: ScriptTime): Promise<boolean> {
    const { keys, args } = resetCall(this.#space, rule, key, time);
    const channel = resetChannel(this.#space.prefix);
    // Announced in the same write as the reset, so that Redis runs it right after. Redis then writes
    // the news to the subscribers before its replies to this process (a reply for it was pending
    // first), so another process on the same server hears of the reset before this one's resolves.
    const announce = () => this.#connection.send('PUBLISH', [channel, JSON.stringify([rule.name, key])]);
    const reply = await runScriptThen(this.#connection, this.#script, keys, args, announce);
    const [wasLocked] = integers(reply, 2, 'reset');
    return wasLocked === 1;
  }

  /**
   * Clears the count of a grouped rule for one identity (store.clear): its state in the identity's
   * record, which one script call takes out; lock and level stay, nobody is told (as a count key's DEL).
   */
  async clear(rule: StoreRule, key: string, time: ScriptTime): Promise<void> {
    const { keys, args } = resetCall(this.#space, rule, key, time, true);
    await runScriptThen(this.#connection, this.#script, keys, args, undefined);
  }

  /** Tells every process that the override of `key` for `rule` changed (its deny cache forgets the key). */
  announceOverride(rule: string, key: string): Promise<unknown> {
    return this.#connection.send('PUBLISH', [
      resetChannel(this.#space.prefix),
      JSON.stringify([rule, key, 'o']),
    ]);
  }

  /**
   * Resolves once this process's subscription (made now if need be) hears back a hello it publishes
   * (again every 100 ms until then): from then on it misses no announcement, until a reconnection,
   * which listeners hear as `('', '')`.
   */
  heard(): Promise<void> {
    if (this.#hello !== undefined) return this.#hello.heard;
    if (this.#subscription === undefined) this.#subscribe();
    let done = () => {};
    const heard = new Promise<void>((resolve) => {
      done = resolve;
    });
    const hello = {
      id: randomBytes(8).toString('hex'),
      heard,
      done,
      timer: undefined as NodeJS.Timeout | undefined,
    };
    this.#hello = hello;
    const channel = resetChannel(this.#space.prefix);
    const send = () => {
      this.#connection.send('PUBLISH', [channel, JSON.stringify({ hello: hello.id })]).catch(() => {});
      hello.timer = setTimeout(send, HELLO_RETRY_MS);
      hello.timer.unref();
    };
    send();
    return heard;
  }

  /**
   * Subscribes (once, lazily, on a connection of its own) to resets announced by any process. After a
   * reconnection `listener('', '')` is called: resets announced while the subscriber was away were
   * missed, so local caches should forget everything.
   */
  listen(listener: ResetListener): void {
    this.#listeners.add(listener);
    if (this.#subscription === undefined) this.#subscribe();
  }

  #subscribe(): void {
    this.#subscription = this.#connection.subscribe(
      resetChannel(this.#space.prefix),
      (message) => {
        let parsed: unknown;
        try {
          parsed = JSON.parse(message);
        } catch {
          return;
        }
        if (!Array.isArray(parsed)) {
          this.#hear(parsed);
          return;
        }
        if (typeof parsed[0] !== 'string' || typeof parsed[1] !== 'string') return;
        const override = parsed[2] === 'o';
        for (const notify of this.#listeners) notify(parsed[0], parsed[1], override);
      },
      () => {
        for (const notify of this.#listeners) notify('', '', false);
      },
    );
  }

  /** A hello (any process's: `{ hello: id }`): ours means the subscription is live. */
  #hear(message: unknown): void {
    const hello = this.#hello;
    if (hello === undefined || (message as { hello?: unknown } | null)?.hello !== hello.id) return;
    clearTimeout(hello.timer);
    hello.timer = undefined;
    hello.done();
  }

  close(): void {
    if (this.#hello !== undefined) clearTimeout(this.#hello.timer);
    this.#hello = undefined;
    this.#listeners.clear();
    this.#subscription?.close();
    this.#subscription = undefined;
  }
}
