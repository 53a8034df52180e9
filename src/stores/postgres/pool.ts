// The PostgreSQL store's calls on the app's pg Pool: one checkout per call, and the liveness the failure policy reads.
import { sha256Hex } from '../../digest.js';
import type { StoreLiveness } from '../store.js';

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
 * What the store's statements set for their own transaction when the session's settings cut them: a
 * role's (or a session's) `lock_timeout` or `statement_timeout` would end a decision waiting on a hot
 * row as a store failure, and a default isolation above READ COMMITTED would fail its upserts with
 * serialization errors; the statements are written for READ COMMITTED without timeouts. SET LOCAL: the
 * app's own queries on the same connection keep the session's settings.
 */
const OWN_SETTINGS =
  'SET LOCAL statement_timeout = 0; SET LOCAL lock_timeout = 0; SET TRANSACTION ISOLATION LEVEL READ COMMITTED; ';

/**
 * Tries of a call with its own settings: only its first SET runs under the session's statement_timeout,
 * so only a stalled machine cuts it (a statement_timeout of a millisecond or two); nothing was done.
 */
const OWN_SETTINGS_TRIES = 5;

/**
 * SQLSTATEs of a statement cut by the session's settings, not by the store's state: lock_not_available
 * (lock_timeout), query_canceled (statement_timeout), serialization_failure (an isolation level above
 * READ COMMITTED). Nothing of the statement was committed, so it is sent again with OWN_SETTINGS.
 */
const CUT_BY_SETTINGS = new Set(['55P03', '57014', '40001']);

/** The prepared statements (SQL PREPARE, by name) each connection holds; connections are pg's client objects. */
const preparedOn = new WeakMap<PostgresClient, Set<string>>();

/**
 * Pools a statement was cut on by the session's settings: the role's settings reach every connection of
 * the pool, so from then on every store's calls on it set their own.
 */
const ownSettingsOn = new WeakSet<PostgresPool>();

/**
 * Calls on the pool, with their liveness: a call counts as outstanding from the moment PostgreSQL has
 * work for it (its query sent, or a connection the pool opens for it) until it answers. A call waiting
 * in the pool's own queue behind the app's queries (every connection checked out) is not PostgreSQL's
 * silence: it waits, up to the limiter's `storeMaxWait`, and a pool's `connectionTimeoutMillis` ending
 * that wait sends it back to the queue (the limiter's deadlines, not the pool's, give up on it). The
 * first connection is waited for likewise. A connection that a restart, a failover or an administrator
 * ended is not the store failing: the call is sent again on another connection of the pool (dead ones
 * are dropped, so at most the pool's size of tries reaches a fresh one).
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

  /** One round trip: resolves when PostgreSQL answers, rejects with the cause when it does not. */
  async ping(): Promise<void> {
    await this.query({ text: 'SELECT 1' });
  }

  /** Runs one query on a connection of the pool, released (or discarded, after a fault) when it settles. */
  async query(config: Parameters<PostgresClient['query']>[0]): Promise<unknown[]> {
    const tries = (this.#pool.options.max ?? 10) + 1;
    for (let attempt = 1; ; attempt++) {
      const client = await this.#checkout();
      // A connection lost while checked out emits 'error' on the client: caught here, the query rejects.
      const onError = () => {};
      client.on('error', onError);
      let fault: Error | undefined;
      try {
        return await this.#send(client, config);
      } catch (error) {
        const ended = connectionEnded(error);
        if (ended || !isServerAnswer(error)) fault = error as Error;
        // A statement cut with its connection was rolled back (or, its commit's answer lost, counts
        // once more: never fewer): sent again, on another connection, within the same call.
        if (ended && attempt < tries) continue;
        throw error;
      } finally {
        client.removeListener('error', onError);
        client.release(fault);
      }
    }
  }

  /** One statement on a checked-out connection; again with the store's own settings when the session's cut it. */
  async #send(
    client: PostgresPoolClient,
    config: Parameters<PostgresClient['query']>[0],
  ): Promise<unknown[]> {
    if (!ownSettingsOn.has(this.#pool)) {
      try {
        return (await this.#track(client.query(config), isServerAnswer)).rows;
      } catch (error) {
        if (!CUT_BY_SETTINGS.has((error as { code?: unknown } | null)?.code as string)) throw error;
        ownSettingsOn.add(this.#pool);
      }
    }
    return this.#sendWithOwnSettings(client, config);
  }

  /**
   * The statement as one simple query (one round trip, one transaction): OWN_SETTINGS, then the statement
   * itself, or, with values, EXECUTE of it prepared on this connection (PREPARE in the same query the
   * first time), its values written as literals. A connection that lost the statement (the app ran
   * DISCARD ALL) or already had it (a PREPARE whose query failed after it) is told so and tried again.
   */
  async #sendWithOwnSettings(
    client: PostgresPoolClient,
    config: Parameters<PostgresClient['query']>[0],
  ): Promise<unknown[]> {
    const values = config.values ?? [];
    let prepared = preparedOn.get(client);
    if (prepared === undefined) {
      prepared = new Set();
      preparedOn.set(client, prepared);
    }
    const name = values.length === 0 ? '' : statementName(config.text);
    for (let attempt = 1; ; attempt++) {
      let text = OWN_SETTINGS;
      if (name === '') text += config.text;
      else {
        if (!prepared.has(name)) text += `PREPARE ${name} AS ${config.text};\n`;
        text += `EXECUTE ${name}(${values.map(literal).join(', ')})`;
      }
      const query = config.rowMode === undefined ? { text } : { text, rowMode: config.rowMode };
      try {
        const results = (await this.#track(client.query(query), isServerAnswer)) as unknown as Array<{
          rows: unknown[];
        }>;
        if (name !== '') prepared.add(name);
        return (results.at(-1) as { rows: unknown[] }).rows;
      } catch (error) {
        const code = (error as { code?: unknown } | null)?.code as string;
        if (attempt >= OWN_SETTINGS_TRIES) throw error;
        if (code === '42P05' && name !== '') prepared.add(name);
        else if (code === '26000' && name !== '') prepared.delete(name);
        else if (!CUT_BY_SETTINGS.has(code)) throw error;
      }
    }
  }

  #checkout(): Promise<PostgresPoolClient> {
    const checkout = this.#connect();
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

  /** A connection of the pool: waited for in its queue as long as it takes, its `connectionTimeoutMillis` notwithstanding. */
  async #connect(): Promise<PostgresPoolClient> {
    const pool = this.#pool;
    for (;;) {
      // A new connection is opened for this call when none is idle and the pool may grow: PostgreSQL's work.
      const opens = pool.idleCount === 0 && pool.totalCount < (pool.options.max ?? 10);
      try {
        return await (opens ? this.#track(pool.connect(), () => false) : pool.connect());
      } catch (error) {
        if (!waitedInPool(error)) throw error;
      }
    }
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
 * pg-pool's error for a checkout that waited `connectionTimeoutMillis` in its queue (every connection
 * checked out): the pool was busy, PostgreSQL was not asked. (A new connection that took too long to
 * open says "Connection terminated due to connection timeout": that is the server's.)
 */
function waitedInPool(error: unknown): boolean {
  return (
    error instanceof Error &&
    error.message === 'timeout exceeded when trying to connect' &&
    (error as { code?: unknown }).code === undefined
  );
}

/**
 * SQLSTATEs of a connection the server ended: admin_shutdown (a fast shutdown, pg_terminate_backend),
 * crash_shutdown (an immediate one, a crash), cannot_connect_now (shutting down), idle_session_timeout.
 */
const ENDED_BY_SERVER = new Set(['57P01', '57P02', '57P03', '57P05']);
/** pg's errors for a connection that ended under its query, or before it was sent. */
const ENDED_MESSAGES = new Set([
  'Connection terminated unexpectedly',
  'Client has encountered a connection error and is not queryable',
]);

/** Whether the connection under a query ended (the server restarted, failed over, or ended it). */
export function connectionEnded(error: unknown): boolean {
  const { code, message } = (error ?? {}) as { code?: unknown; message?: unknown };
  if (typeof code === 'string' && (ENDED_BY_SERVER.has(code) || code === 'ECONNRESET' || code === 'EPIPE'))
    return true;
  return typeof message === 'string' && ENDED_MESSAGES.has(message);
}

/** Statement names by text: the store's statements are a few fixed texts per store. */
const names = new Map<string, string>();

/** The name a statement is prepared under: from its text, so that the same name always means the same text. */
function statementName(text: string): string {
  let name = names.get(text);
  if (name === undefined) {
    name = `rk_${sha256Hex(text).slice(0, 32)}`;
    // Bounded for a process that makes stores without end (each of its own schema): cheap to hash again.
    if (names.size >= 1000) names.clear();
    names.set(text, name);
  }
  return name;
}

/**
 * A value as a SQL literal, read as pg sends it (text, coerced to the parameter's type): a Buffer as
 * bytea's hex form, an array as an array literal, `null` as NULL. An E'' string, so that backslashes
 * mean the same whatever standard_conforming_strings says. Text holding NUL (which PostgreSQL text
 * cannot hold, and which would end a simple query) is refused.
 */
export function literal(value: unknown): string {
  if (value === null || value === undefined) return 'NULL';
  const text = valueText(value);
  if (text.includes('\0')) {
    // PostgreSQL's own SQLSTATE for NUL in text (character_not_in_repertoire): an answer, not a fault of the connection.
    throw Object.assign(new Error('ratekeeper: a PostgreSQL text value cannot hold NUL'), { code: '22021' });
  }
  return `E'${text.replaceAll('\\', '\\\\').replaceAll("'", "''")}'`;
}

function valueText(value: unknown): string {
  if (Buffer.isBuffer(value)) return `\\x${value.toString('hex')}`;
  if (Array.isArray(value)) {
    const items = value.map((item) =>
      item === null || item === undefined
        ? 'NULL'
        : Array.isArray(item)
          ? valueText(item)
          : `"${valueText(item).replaceAll('\\', '\\\\').replaceAll('"', '\\"')}"`,
    );
    return `{${items.join(',')}}`;
  }
  return String(value);
}

/**
 * An error PostgreSQL itself sent (it has an SQLSTATE `code` of five characters): the server is alive and
 * the connection fine. Anything else (a lost connection, a refused one) is a fault of the connection.
 */
export function isServerAnswer(error: unknown): boolean {
  const code = (error as { code?: unknown } | null)?.code;
  return typeof code === 'string' && /^[0-9A-Z]{5}$/.test(code) && !code.startsWith('08');
}
