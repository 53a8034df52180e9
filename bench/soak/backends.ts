// The stores an app process of the soak runs its limiters on: a Redis Cluster, a standalone Redis, a
// PostgreSQL server; each with the connection settings the docs recommend, its clock, and its close.
import { Cluster, Redis } from 'ioredis';
import pg from 'pg';
import { PostgresStore, RedisStore, type Store } from '../../src/index.js';

/** Where a store listens: the standalone Redis, the Cluster's nodes, or the PostgreSQL server and the apps' role. */
export type StoreTarget =
  | { kind: 'standalone'; host: string; port: number }
  | { kind: 'cluster'; nodes: Array<{ host: string; port: number }> }
  | { kind: 'postgres'; host: string; port: number; user: string };

/** One connection (a Redis client, a pg pool) and the stores made on it. */
export interface Backend {
  /** A store on this connection whose keys start with `prefix` (Redis) or whose tables do (PostgreSQL). */
  store(prefix: string): Store;
  /** Resolves once connected (before that, the failure policy decides every request). */
  ready(): Promise<void>;
  /** The server's clock, epoch ms; rejects while the server does not answer. */
  serverTime(): Promise<number>;
  close(): Promise<void>;
}

/** The README's recommended ioredis settings, with commandTimeout equal to storeTimeout. */
function redisBackend(target: Exclude<StoreTarget, { kind: 'postgres' }>, commandTimeout: number): Backend {
  const retry = (attempt: number) => Math.min(attempt * 100, 2000);
  const perConnection = { maxRetriesPerRequest: 0, autoResendUnfulfilledCommands: false, commandTimeout };
  const client =
    target.kind === 'standalone'
      ? new Redis({
          host: target.host,
          port: target.port,
          enableOfflineQueue: false,
          retryStrategy: retry,
          ...perConnection,
        })
      : new Cluster(target.nodes, {
          enableOfflineQueue: false,
          clusterRetryStrategy: retry,
          redisOptions: perConnection,
        });
  client.on('error', () => {}); // faults are expected; the limiter reports them through 'storeError'
  return {
    store: (prefix) => new RedisStore({ client, prefix }),
    ready: () =>
      client.status === 'ready'
        ? Promise.resolve()
        : new Promise((resolve) => client.once('ready', () => resolve())),
    async serverTime() {
      const node = client instanceof Cluster ? client.nodes('master')[0] : client;
      if (node === undefined) throw new Error('no Cluster master known');
      const [seconds, micros] = await node.time();
      return Number(seconds) * 1000 + Math.floor(Number(micros) / 1000);
    },
    async close() {
      client.disconnect();
    },
  };
}

/**
 * A pg pool as docs/stores.md sets one up: an 'error' listener for idle connections lost (a restart,
 * pg_terminate_backend), a connection timeout so that a stopped server fails a checkout instead of
 * queueing it for good, and connections recycled after a while (so a role setting reaches them).
 */
function postgresBackend(target: Extract<StoreTarget, { kind: 'postgres' }>, timeoutMs: number): Backend {
  const pool = new pg.Pool({
    host: target.host,
    port: target.port,
    user: target.user,
    database: 'postgres',
    max: 10,
    connectionTimeoutMillis: Math.max(1000, 4 * timeoutMs),
    maxLifetimeSeconds: 30,
  });
  pool.on('error', () => {});
  return {
    store: (prefix) => new PostgresStore({ pool, tablePrefix: `${prefix.replace(/-/g, '_')}_` }),
    async ready() {
      await pool.query('SELECT 1');
    },
    async serverTime() {
      const { rows } = await pool.query<{ ms: string }>(
        'SELECT floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint::text AS ms',
      );
      return Number(rows[0]?.ms);
    },
    async close() {
      await pool.end();
    },
  };
}

export function connectBackend(target: StoreTarget, timeoutMs: number): Backend {
  return target.kind === 'postgres' ? postgresBackend(target, timeoutMs) : redisBackend(target, timeoutMs);
}
