// Resets: lua/reset.lua clears a key, and every process sharing the prefix hears of it (deny caches forget it).

import { keysOf } from '../leasing/blocks.js';
import type { Refund } from '../store.js';
import type { StoreRule } from '../store-ops.js';
import { resetCall } from './calls.js';
import { RedisChannel } from './channel.js';
import type { KeySpace } from './check-call.js';
import type { RedisConnection } from './connection/connection.js';
import type { RedisScript } from './function-library.js';
import { resetChannel } from './keys.js';
import type { ScriptTime } from './op-text.js';
import { integers, runScriptThen } from './replies.js';

/**
 * Called with the rule and key reset, or whose override changed (`override` true; an empty key: the
 * rule's rule-wide limit changed), or to which a leased block gave units back (`returned` true: a deny
 * cache forgets the key, blocks stay); `('', '')`: announcements may have been missed, forget everything.
 */
export type ResetListener = (rule: string, key: string, override: boolean, returned: boolean) => void;

export class Resets {
  readonly #connection: RedisConnection;
  readonly #script: RedisScript;
  readonly #space: KeySpace;
  readonly #channel: RedisChannel;
  readonly #listeners = new Set<ResetListener>();

  constructor(connection: RedisConnection, script: RedisScript, space: KeySpace) {
    this.#connection = connection;
    this.#script = script;
    this.#space = space;
    this.#channel = new RedisChannel(
      connection,
      resetChannel(space.prefix),
      (message) => {
        if (typeof message[0] !== 'string' || typeof message[1] !== 'string') return;
        const override = message[2] === 'o' || message[2] === 'r';
        // Only a rule-wide announcement names no key (no identity is empty).
        if ((message[1] === '') !== (message[2] === 'r')) return;
        for (const notify of this.#listeners) notify(message[0], message[1], override, message[2] === 'u');
      },
      () => {
        for (const notify of this.#listeners) notify('', '', false, false);
      },
    );
  }

  /**
   * Clears count, lock and level (and the lock's lock-index entry, in the same call), then announces
   * the reset. Resolves true when the key was locked.
   */
  async reset(rule: StoreRule, key: string, time: ScriptTime): Promise<boolean> {
    const { keys, args } = resetCall(this.#space, rule, key, time);
    // Announced in the same write as the reset, so that Redis runs it right after. Redis then writes
    // the news to the subscribers before its replies to this process (a reply for it was pending
    // first), so another process on the same server hears of the reset before this one's resolves.
    const announce = () => this.#channel.publish([rule.name, key]);
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

  /** False where the connection cannot subscribe (Redis over HTTP): no process's announcement is heard. */
  get hears(): boolean {
    return this.#channel.hears;
  }

  /** Tells every process that the override of `key` for `rule` changed (its deny cache forgets the key). */
  announceOverride(rule: string, key: string): Promise<unknown> {
    return this.#channel.publish([rule, key, 'o']);
  }

  /**
   * Tells every process that leased blocks gave units of these refunds' keys back (deny caches forget the
   * keys; blocks stay: their units are still counted).
   */
  announceReturned(refunds: readonly Refund[]): void {
    for (const [rule, key] of keysOf(refunds)) this.#channel.publish([rule, key, 'u']).catch(() => undefined);
  }

  /** Tells every process that the rule-wide limit of `rule` changed (its deny cache forgets the rule's keys). */
  announceRuleLimit(rule: string): Promise<unknown> {
    return this.#channel.publish([rule, '', 'r']);
  }

  /**
   * Resolves once this process's subscription (made now if need be) hears back a hello it publishes
   * (again every 100 ms until then): from then on it misses no announcement, until a reconnection,
   * which listeners hear as `('', '')`.
   */
  heard(): Promise<void> {
    return this.#channel.live();
  }

  /**
   * Subscribes (once, lazily, on a connection of its own) to resets announced by any process. After a
   * reconnection `listener('', '')` is called: resets announced while the subscriber was away were
   * missed, so local caches should forget everything.
   */
  listen(listener: ResetListener): void {
    this.#listeners.add(listener);
    this.#channel.open();
  }

  close(): void {
    this.#listeners.clear();
    this.#channel.close();
  }
}
