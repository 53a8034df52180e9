// Resets and overrides (and, on a channel of their own, freed concurrency slots) heard from every process: LISTEN
// on a connection of its own, made as the pool makes its own.

import { keysOf } from '../leasing/blocks.js';
import type { Refund } from '../store.js';
import type { PoolCalls, PostgresListenClient, PostgresPool, PostgresPoolClient } from './pool.js';
import { announcement, readAnnouncement } from './protocol.js';
import { quoteIdent } from './sql.js';

/**
 * Called with the rule and key reset (or whose override changed: `override`; or, `returned`, to which a
 * leased block gave units back); `('', '')`: announcements may have been missed.
 */
export type ResetListener = (rule: string, key: string, override: boolean, returned: boolean) => void;

/** Waits before connecting again after the listening connection was lost (ms), doubling up to the most. */
const RETRY_MS = 100;
const MAX_RETRY_MS = 5000;

/**
 * Listens (once, lazily, when the first listener comes) on the store's channel. The connection is a
 * client of its own, not one of the pool's: it is held for as long as the store lives, and an app's
 * pool is sized for its queries. (A pool without its Client class, not made by pg, lends one of its
 * own connections instead.) When the connection is lost, listeners hear `('', '')`, since
 * announcements made meanwhile are missed, and it is made again, on an unref'd timer.
 */
export class ResetSubscription {
  readonly #pool: PostgresPool;
  readonly #channel: string;
  readonly #listeners = new Set<ResetListener>();
  #client: PostgresListenClient | PostgresPoolClient | undefined;
  #retryMs = RETRY_MS;
  #timer: NodeJS.Timeout | undefined;
  #closed = false;
  #started = false;
  /** Resolves once LISTEN first answered (from then on nothing announced is missed unheard), or on close. */
  #live: Promise<void> | undefined;
  #liveNow: (() => void) | undefined;

  constructor(pool: PostgresPool, channel: string) {
    this.#pool = pool;
    this.#channel = channel;
  }

  listen(listener: ResetListener): void {
    this.#listeners.add(listener);
    if (!this.#started) {
      this.#started = true;
      void this.#connect();
    }
  }

  /**
   * Resolves once the channel is listened to: an announcement made from then on is heard, or (the
   * connection lost meanwhile) listeners hear `('', '')`. Resolves at once after close.
   */
  live(): Promise<void> {
    if (this.#closed) return Promise.resolve();
    this.#live ??= new Promise<void>((resolve) => {
      this.#liveNow = resolve;
    });
    return this.#live;
  }

  close(): void {
    this.#liveNow?.();
    this.#closed = true;
    this.#listeners.clear();
    clearTimeout(this.#timer);
    this.#drop();
  }

  async #connect(): Promise<void> {
    if (this.#closed) return;
    let client: PostgresListenClient | PostgresPoolClient | undefined;
    try {
      const Client = this.#pool.Client;
      if (Client !== undefined) {
        const own = new Client(this.#pool.options);
        own.on('error', () => {});
        client = own;
        await own.connect();
      } else {
        client = await this.#pool.connect();
        client.on('error', () => {});
      }
      const listening = client;
      (listening as PostgresListenClient).on('notification', (message) => {
        if (message.channel !== this.#channel) return;
        const heard = readAnnouncement(message.payload);
        if (heard !== undefined)
          for (const notify of this.#listeners) notify(heard[0], heard[1], heard[2], heard[3]);
      });
      (listening as PostgresListenClient).on('end', () => this.#lost(listening));
      this.#client = listening;
      await listening.query({ text: `LISTEN ${quoteIdent(this.#channel)}` });
      if (this.#closed) {
        this.#drop();
        return;
      }
      this.#retryMs = RETRY_MS;
      this.live();
      this.#liveNow?.();
    } catch {
      if (client !== undefined && this.#client === client) this.#lost(client);
      else {
        if (client !== undefined) end(client);
        this.#retry();
      }
    }
  }

  /** The listening connection ended (or failed): what it would have heard meanwhile is missed. */
  #lost(client: PostgresListenClient | PostgresPoolClient): void {
    if (this.#client !== client) return;
    this.#drop();
    if (this.#closed) return;
    for (const notify of this.#listeners) notify('', '', false, false);
    this.#retry();
  }

  #retry(): void {
    if (this.#closed || this.#timer !== undefined) return;
    this.#timer = setTimeout(() => {
      this.#timer = undefined;
      void this.#connect();
    }, this.#retryMs);
    this.#timer.unref();
    this.#retryMs = Math.min(this.#retryMs * 2, MAX_RETRY_MS);
  }

  #drop(): void {
    const client = this.#client;
    this.#client = undefined;
    if (client !== undefined) end(client);
  }
}

/**
 * Tells every process that leased blocks gave units of these refunds' keys back (a NOTIFY each, sent after
 * the refund committed): their deny caches forget the keys; blocks stay.
 */
export function announceReturned(calls: PoolCalls, channel: string, refunds: readonly Refund[]): void {
  for (const [rule, key] of keysOf(refunds))
    calls
      .query({ text: 'SELECT pg_notify($1, $2)', values: [channel, announcement(rule, key, 'returned')] })
      .catch(() => undefined);
}

/** Ends a listening connection: a pool's is discarded, an own client closed. */
function end(client: PostgresListenClient | PostgresPoolClient): void {
  if ('release' in client && typeof client.release === 'function') client.release(true);
  else (client as PostgresListenClient).end().catch(() => {});
}
