// Redis clients of every supported library, made with the settings docs/stores.md recommends, for suites run per client.
import { randomBytes } from 'node:crypto';
import { Redis as Ioredis6, Cluster as Ioredis6Cluster } from 'ioredis';
import { Redis as Ioredis5, Cluster as Ioredis5Cluster } from 'ioredis5';
import { Valkey, Cluster as ValkeyCluster } from 'iovalkey';
import { createClient, createCluster, createSentinel } from 'redis';
import { createClient as createClient5, createCluster as createCluster5 } from 'redis5';
import { RedisStore } from '../../src/index.js';
import { RECOMMENDED_CLUSTER_OPTIONS, RECOMMENDED_REDIS_OPTIONS } from '../fixtures/redis-options.js';
import { getRedis, type NodeAddress, startCluster } from './redis.js';
import { PATIENT } from './settle.js';
import type { StoreFactory } from './stores.js';

/** Any client RedisStore takes. */
export type AnyClient = ConstructorParameters<typeof RedisStore>[0]['client'];

/** A connection's address and, for a server with requirepass, its password. */
export interface Endpoint extends NodeAddress {
  password?: string;
}

/** One client library: how to make its standalone, Cluster and Sentinel clients, and close them. */
export interface ClientKind {
  name: string;
  /** Resolves once connected (node-redis: `connect()` awaited). */
  standalone(endpoint: Endpoint): Promise<AnyClient>;
  /** A client whose first connection may fail: never waited for (refused, unknown host, wrong password). */
  unready(url: string): AnyClient;
  cluster(nodes: readonly NodeAddress[]): Promise<AnyClient>;
  close(client: AnyClient): Promise<void>;
}

/**
 * The recommended ioredis settings, but with a commandTimeout no busy machine reaches: the suites run per
 * client assert what Redis answered (test/limiter/failure-policy.test.ts tests the timeout itself).
 */
const IOREDIS_OPTIONS = { ...RECOMMENDED_REDIS_OPTIONS, commandTimeout: PATIENT.storeTimeout };
const IOREDIS_CLUSTER_OPTIONS = {
  ...RECOMMENDED_CLUSTER_OPTIONS,
  redisOptions: { ...RECOMMENDED_CLUSTER_OPTIONS.redisOptions, commandTimeout: PATIENT.storeTimeout },
};

const reconnectStrategy = (retries: number) => Math.min(retries * 100, 2000);

/** node-redis, recommended: no offline queue (a command fails at once while disconnected), capped retries. */
export const NODE_REDIS_OPTIONS = {
  disableOfflineQueue: true,
  socket: { connectTimeout: 1000, reconnectStrategy },
} as const;

type NodeRedisLibrary = {
  createClient: typeof createClient;
  createCluster: typeof createCluster;
};

function nodeRedisKind(name: string, lib: NodeRedisLibrary): ClientKind {
  return {
    name,
    async standalone({ host, port, password }) {
      const client = lib.createClient({
        ...NODE_REDIS_OPTIONS,
        socket: { ...NODE_REDIS_OPTIONS.socket, host, port },
        ...(password === undefined ? {} : { password }),
      });
      client.on('error', () => {});
      await client.connect();
      return client;
    },
    unready(url) {
      const client = lib.createClient({ ...NODE_REDIS_OPTIONS, url });
      client.on('error', () => {});
      client.connect().catch(() => {});
      return client;
    },
    async cluster(nodes) {
      const cluster = lib.createCluster({
        rootNodes: nodes.map(({ host, port }) => ({ socket: { host, port } })),
        defaults: NODE_REDIS_OPTIONS,
      });
      cluster.on('error', () => {});
      await cluster.connect();
      return cluster;
    },
    async close(client) {
      (client as unknown as { destroy(): void }).destroy();
    },
  };
}

type IoredisLibrary = {
  Redis: typeof Ioredis5;
  Cluster: typeof Ioredis5Cluster;
};

function ioredisKind(name: string, lib: IoredisLibrary): ClientKind {
  const ready = (client: Ioredis5 | Ioredis5Cluster) =>
    client.status === 'ready'
      ? Promise.resolve()
      : new Promise<void>((resolve) => client.once('ready', () => resolve()));
  return {
    name,
    async standalone({ host, port, password }) {
      const client = new lib.Redis({
        ...IOREDIS_OPTIONS,
        host,
        port,
        ...(password === undefined ? {} : { password }),
      });
      client.on('error', () => {});
      await ready(client);
      return client;
    },
    unready(url) {
      return new lib.Redis(url, RECOMMENDED_REDIS_OPTIONS).on('error', () => {});
    },
    async cluster(nodes) {
      const cluster = new lib.Cluster(
        nodes.map(({ host, port }) => ({ host, port })),
        IOREDIS_CLUSTER_OPTIONS,
      );
      cluster.on('error', () => {});
      await ready(cluster);
      return cluster;
    },
    async close(client) {
      (client as Ioredis5).disconnect();
    },
  };
}

export const NODE_REDIS_6 = nodeRedisKind('node-redis 6', { createClient, createCluster });
export const NODE_REDIS_5 = nodeRedisKind('node-redis 5', {
  createClient: createClient5 as unknown as typeof createClient,
  createCluster: createCluster5 as unknown as typeof createCluster,
});
export const IOREDIS_6 = ioredisKind('ioredis 6', {
  Redis: Ioredis6 as unknown as typeof Ioredis5,
  Cluster: Ioredis6Cluster as unknown as typeof Ioredis5Cluster,
});
export const IOREDIS_5 = ioredisKind('ioredis 5', { Redis: Ioredis5, Cluster: Ioredis5Cluster });
export const IOVALKEY = ioredisKind('iovalkey', {
  Redis: Valkey as unknown as typeof Ioredis5,
  Cluster: ValkeyCluster as unknown as typeof Ioredis5Cluster,
});

/** A node-redis Sentinel client of `sentinels`' master `name`, connected. */
export async function nodeRedisSentinel(sentinels: readonly NodeAddress[], name: string) {
  const sentinel = createSentinel({
    name,
    sentinelRootNodes: sentinels.map(({ host, port }) => ({ host, port })),
    nodeClientOptions: NODE_REDIS_OPTIONS,
  });
  sentinel.on('error', () => {});
  await sentinel.connect();
  return sentinel;
}

/** RedisStore through `kind` on a server, one client shared by every store, each store on its own prefix. */
export function storesThrough(
  kind: ClientKind,
  endpoint: () => Promise<Endpoint>,
): StoreFactory & {
  close(): Promise<void>;
} {
  let shared: Promise<AnyClient> | undefined;
  return {
    name: `redis through ${kind.name}`,
    async makeStore(clock) {
      shared ??= endpoint().then((address) => kind.standalone(address));
      return new RedisStore({ client: await shared, prefix: `rkn${randomBytes(5).toString('hex')}`, clock });
    },
    async close() {
      if (shared !== undefined) await kind.close(await shared);
      shared = undefined;
    },
  };
}

/** RedisStore through node-redis 6 on the shared test server: the HTTP suites' third store. */
export const nodeRedisStores = storesThrough(NODE_REDIS_6, getRedis);

let sharedCluster: Promise<AnyClient> | undefined;

/** RedisStore through node-redis 6 on a 3-master Cluster started on first use (killed when the tests exit). */
export const nodeRedisClusterStores: StoreFactory = {
  name: 'redis Cluster through node-redis 6',
  async makeStore(clock) {
    sharedCluster ??= startCluster().then((cluster) => NODE_REDIS_6.cluster(cluster.nodes));
    return new RedisStore({
      client: await sharedCluster,
      prefix: `rkn${randomBytes(5).toString('hex')}`,
      clock,
    });
  },
};
