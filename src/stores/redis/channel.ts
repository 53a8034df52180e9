// A pub/sub channel this process publishes on and hears: the subscription (on a connection of its own, made
// again after reconnections by the connection), and a hello it publishes until it hears it back, which says
// the subscription is live. Resets (redis-resets.ts) and frees (redis-frees.ts) each use one.

import { bytesToHex } from '@noble/hashes/utils';
import { unrefTimer } from '../../timers.js';
import type { RedisConnection, RedisSubscription } from './connection/connection.js';

/** How often a hello is sent again while this process's subscription has not heard it back (ms). */
const HELLO_RETRY_MS = 100;

export class RedisChannel {
  readonly #connection: RedisConnection;
  readonly #name: string;
  readonly #onMessage: (message: readonly unknown[]) => void;
  readonly #onResubscribed: () => void;
  #subscription: RedisSubscription | undefined;
  /** Resolves once the subscription heard back a hello of this process (it misses nothing from then on). */
  #live: Promise<void> | undefined;
  /** The hello not heard back yet, and what to do then. */
  #hello: { id: string; done(): void; timer: NodeJS.Timeout | undefined } | undefined;

  /**
   * `onMessage` gets each message published on `name` that is a JSON array (a hello, `{ hello: id }`, is
   * this class's; anything else is dropped); `onResubscribed` is called after the subscriber reconnected
   * (messages published meanwhile were missed: the caller checks again).
   */
  constructor(
    connection: RedisConnection,
    name: string,
    onMessage: (message: readonly unknown[]) => void,
    onResubscribed: () => void,
  ) {
    this.#connection = connection;
    this.#name = name;
    this.#onMessage = onMessage;
    this.#onResubscribed = onResubscribed;
  }

  /** Publishes `message` (as JSON) to every process subscribed, this one included. */
  publish(message: unknown): Promise<unknown> {
    return this.#connection.send('PUBLISH', [this.#name, JSON.stringify(message)]);
  }

  /**
   * False where the connection cannot subscribe (Redis over HTTP): `open` then does nothing, and nothing
   * published by any process is heard.
   */
  get hears(): boolean {
    return this.#connection.subscribe !== undefined;
  }

  /** Subscribes, once (until `close`). */
  open(): void {
    if (this.#subscription !== undefined || this.#connection.subscribe === undefined) return;
    this.#subscription = this.#connection.subscribe(
      this.#name,
      (message) => {
        let parsed: unknown;
        try {
          parsed = JSON.parse(message);
        } catch {
          return;
        }
        if (Array.isArray(parsed)) this.#onMessage(parsed);
        else this.#hear(parsed);
      },
      this.#onResubscribed,
    );
  }

  /**
   * Resolves once the subscription (made now if need be) hears back a hello this process publishes (again
   * every 100 ms until then): from then on it misses no message, until a reconnection (`onResubscribed`).
   * Where the connection cannot subscribe (`hears` false) it resolves at once: there is nothing to wait
   * for, and every message is missed (the store bounds what that costs: `RedisStore.liveness.staleAfterMs`).
   */
  live(): Promise<void> {
    if (this.#live !== undefined) return this.#live;
    if (!this.hears) {
      this.#live = Promise.resolve();
      return this.#live;
    }
    this.open();
    const id = bytesToHex(crypto.getRandomValues(new Uint8Array(8)));
    const live = new Promise<void>((done) => {
      this.#hello = { id, done, timer: undefined };
    });
    this.#live = live;
    const send = () => {
      const hello = this.#hello;
      if (hello === undefined || hello.id !== id) return;
      this.publish({ hello: id }).catch(() => {});
      hello.timer = setTimeout(send, HELLO_RETRY_MS);
      unrefTimer(hello.timer);
    };
    send();
    return live;
  }

  /** A hello (any process's: `{ hello: id }`): ours means the subscription is live. */
  #hear(message: unknown): void {
    const hello = this.#hello;
    if (hello === undefined || (message as { hello?: unknown } | null)?.hello !== hello.id) return;
    clearTimeout(hello.timer);
    this.#hello = undefined;
    hello.done();
  }

  /** Stops the hello and closes the subscription (a later `open` or `live` subscribes again). */
  close(): void {
    if (this.#hello !== undefined) clearTimeout(this.#hello.timer);
    this.#hello = undefined;
    this.#live = undefined;
    this.#subscription?.close();
    this.#subscription = undefined;
  }
}
