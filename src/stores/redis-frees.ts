// Frees: a process that released concurrency slots announces it, and the processes whose calls wait for a
// slot of that key (`acquire`, a waiting `wrap`) try again at once instead of at the soonest lease end.
import { randomBytes } from 'node:crypto';
import type { RedisConnection, RedisSubscription } from './redis-connection.js';
import { freeChannel } from './redis-keys.js';

/** How often a hello is sent again while this process's subscription has not heard it back (ms). */
const HELLO_RETRY_MS = 100;

/**
 * Announcements of freed slots, on a channel of their own (`<prefix>:free`): only processes with a call
 * waiting for a slot subscribe, so a release costs one PUBLISH that nobody hears while nobody waits.
 */
export class Frees {
  readonly #connection: RedisConnection;
  readonly #channel: string;
  readonly #listeners = new Set<(rule: string, key: string) => void>();
  #subscription: RedisSubscription | undefined;
  /** Resolves once the subscription heard back a hello of this process (it misses nothing from then on). */
  #live: Promise<void> | undefined;
  #hello: { id: string; done(): void; timer: NodeJS.Timeout | undefined } | undefined;

  constructor(connection: RedisConnection, prefix: string) {
    this.#connection = connection;
    this.#channel = freeChannel(prefix);
  }

  /**
   * Tells every listening process that slots of these rules and keys were freed (sent, not awaited): one
   * PUBLISH for them all, `[rule, key, rule, key, ...]` (a batch of releases costs Redis one command more,
   * not one per release).
   */
  announce(freed: ReadonlyArray<readonly [rule: string, key: string]>): void {
    if (freed.length === 0) return;
    this.#connection.send('PUBLISH', [this.#channel, JSON.stringify(freed.flat())]).catch(() => {});
  }

  /**
   * Calls `listener` with each free announced by any process, and `('', '')` after the subscriber
   * reconnected (frees may have been missed). Resolves once the subscription is live.
   */
  listen(listener: (rule: string, key: string) => void): Promise<void> {
    this.#listeners.add(listener);
    this.#live ??= this.#subscribe();
    return this.#live;
  }

  #subscribe(): Promise<void> {
    const id = randomBytes(8).toString('hex');
    const live = new Promise<void>((done) => {
      this.#hello = { id, done, timer: undefined };
    });
    this.#subscription = this.#connection.subscribe(
      this.#channel,
      (message) => {
        let parsed: unknown;
        try {
          parsed = JSON.parse(message);
        } catch {
          return;
        }
        if (Array.isArray(parsed)) {
          for (let i = 0; i + 1 < parsed.length; i += 2) {
            const rule: unknown = parsed[i];
            const key: unknown = parsed[i + 1];
            if (typeof rule !== 'string' || typeof key !== 'string' || rule === '') continue;
            for (const listener of this.#listeners) listener(rule, key);
          }
        } else if ((parsed as { hello?: unknown } | null)?.hello === id) this.#heard();
      },
      () => {
        for (const listener of this.#listeners) listener('', '');
      },
    );
    const send = () => {
      this.#connection.send('PUBLISH', [this.#channel, JSON.stringify({ hello: id })]).catch(() => {});
      const hello = this.#hello;
      if (hello === undefined) return;
      hello.timer = setTimeout(send, HELLO_RETRY_MS);
      hello.timer.unref();
    };
    send();
    return live;
  }

  #heard(): void {
    const hello = this.#hello;
    if (hello === undefined) return;
    clearTimeout(hello.timer);
    this.#hello = undefined;
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
