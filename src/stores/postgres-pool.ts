// The PostgreSQL store's calls on the app's pg Pool: one checkout per call, and the liveness the failure policy reads.
import { performance } from 'node:perf_hooks';
import type { StoreLiveness } from './store.js';

/** What the store uses of a pg (node-postgres) client: a query, and its end. */
export interface PostgresClient {
  query(config: { text: string; values?: unknown[]; name?: string; rowMode?: 'array' }): Promise<{
    rows: unknown[];
  }>;
  on(event: 'error', listener: (error: Error) => void): unknown;
  removeListener(event: 'error', listener: (error: Error) => void): unknown;
}

/** A client checked out of the pool; `release(error)` discards it. */
export interface PostgresPoolClient extends PostgresClient {
  release(error?: Error | boolean): void;
}

/** A client of its own (LISTEN), made as the pool makes its own. */
export interface PostgresListenClient extends PostgresClient {
  connect(): Promise<unknown>;
  end(): Promise<void>;
  on(event: 'error', listener: (error: Error) => void): unknown;
  on(event: 'end', listener: () => void): unknown;
  on(event: 'notification', listener: (message: { channel: string; payload?: string }) => void): unknown;
}

/**
 * The pg `Pool` the store is given (pg 8): described by what the store calls, so that the package's types
 * need no `pg` types. The store never ends it: it is the app's.
 */
export interface PostgresPool {
  connect(): Promise<PostgresPoolClient>;
  readonly totalCount: number;
  readonly idleCount: number;
  readonly options: { max?: number | undefined };
  /** pg's Pool keeps the Client class it makes clients of (the LISTEN client is made the same way). */
  readonly Client?: new (
    options: Record<string, unknown>,
  ) => PostgresListenClient;
}

/** Whether a value looks like a pg Pool (checked at construction, so that a wrong `pool` fails at once). */
export function isPool(value: unknown): value is PostgresPool {
  const pool = value as Partial<PostgresPool> | null;
  return (
    typeof pool === 'object' && pool !== null && typeof pool.connect === 'function' && 'totalCount' in pool
  );
}

/**
 * Calls on the pool, with their liveness: a call counts as outstanding from the moment PostgreSQL has
 * work for it (its query sent, or a connection the pool opens for it) until it answers. A call waiting
 * in the pool's own queue behind the app's queries (every connection checked out) is not PostgreSQL's
 * silence: it waits, up to the limiter's `storeMaxWait`. The first connection is waited for likewise.
 */
export class PoolCalls implements StoreLiveness {
  readonly #pool: PostgresPool;
  #outstanding = 0;
  #silentSinceMs = 0;
  /** Settled once the first checkout succeeded or failed; pending while the first one is being made. */
  #first: Promise<void> | undefined;
  #firstSettled = false;

  constructor(pool: PostgresPool) {
    this.#pool = pool;
  }

  connecting(): Promise<void> | undefined {
    return this.#firstSettled ? undefined : this.#first;
  }

  silentSinceMs(): number | undefined {
    return this.#outstanding > 0 ? this.#silentSinceMs : undefined;
  }

  /** Runs one query on a connection of the pool, released (or discarded, after a fault) when it settles. */
  async query(config: Parameters<PostgresClient['query']>[0]): Promise<unknown[]> {
    const client = await this.#checkout();
    // A connection lost while checked out emits 'error' on the client: caught here, the query rejects.
    const onError = () => {};
    client.on('error', onError);
    let fault: Error | undefined;
    try {
      const result = await this.#track(client.query(config), isServerAnswer);
      return result.rows;
    } catch (error) {
      if (!isServerAnswer(error)) fault = error as Error;
      throw error;
    } finally {
      client.removeListener('error', onError);
      client.release(fault);
    }
  }

  #checkout(): Promise<PostgresPoolClient> {
    const pool = this.#pool;
    // A new connection is opened for this call when none is idle and the pool may grow: PostgreSQL's work.
    const opens = pool.idleCount === 0 && pool.totalCount < (pool.options.max ?? 10);
    const checkout = opens ? this.#track(pool.connect(), () => false) : pool.connect();
    if (this.#first === undefined) {
      this.#first = checkout.then(
        () => {
          this.#firstSettled = true;
        },
        (error: unknown) => {
          this.#firstSettled = true;
          throw error;
        },
      );
      this.#first.catch(() => {});
    }
    return checkout;
  }

  #track<T>(call: Promise<T>, isAnswer: (error: unknown) => boolean): Promise<T> {
    if (this.#outstanding++ === 0) this.#silentSinceMs = performance.now();
    return call.then(
      (value) => {
        this.#answered();
        return value;
      },
      (error: unknown) => {
        if (isAnswer(error)) this.#answered();
        else this.#outstanding--;
        throw error;
      },
    );
  }

  #answered(): void {
    this.#outstanding--;
    this.#silentSinceMs = performance.now();
  }
}

/**
 * An error PostgreSQL itself sent (it has an SQLSTATE `code` of five characters): the server is alive and
 * the connection fine. Anything else (a lost connection, a refused one) is a fault of the connection.
 */
export function isServerAnswer(error: unknown): boolean {
  const code = (error as { code?: unknown } | null)?.code;
  return typeof code === 'string' && /^[0-9A-Z]{5}$/.test(code) && !code.startsWith('08');
}
