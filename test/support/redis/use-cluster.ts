// The Redis Cluster of one describe block: started before its tests, stopped after them, with an ioredis client.
import type { Cluster } from 'ioredis';
import { type RedisCluster, startCluster } from './cluster.js';

/** A `RedisCluster` started by `useCluster`, with an ioredis Cluster client of its own. */
export interface ClusterUnderTest extends RedisCluster {
  /** An ioredis Cluster client seeded with every node, ready before the first test, disconnected with the Cluster. */
  readonly ioredis: Cluster;
}

/**
 * Registers mocha hooks that start a Cluster (3 masters, `replicas` each) before the block's tests and
 * stop it after them, and returns it: use it inside tests and hooks, not while the block is defined.
 * @example
 * describe('on a Cluster', () => {
 *   const cluster = useCluster();
 *   it('decides', async () => {
 *     const store = new RedisStore({ client: cluster.ioredis });
 *   });
 * });
 */
export function useCluster(options: { replicas?: 0 | 1 } = {}): ClusterUnderTest {
  let started: RedisCluster | undefined;
  let ioredis: Cluster | undefined;
  const live = (): RedisCluster => {
    if (started === undefined)
      throw new Error('useCluster: the Cluster runs only inside the tests and hooks of its block');
    return started;
  };
  before(async function () {
    // Six redis-servers and redis-cli's join on a busy machine.
    this.timeout(60_000);
    started = await startCluster(options);
    const client = started.client();
    // Ready before any test: a store's first decision must not wait for the client's own connection.
    if (client.status !== 'ready')
      await new Promise<void>((resolve) => client.once('ready', () => resolve()));
    ioredis = client;
  });
  after(async () => {
    const cluster = started;
    started = undefined;
    ioredis = undefined;
    await cluster?.stop();
  });
  return {
    get nodes() {
      return live().nodes;
    },
    get ioredis() {
      live();
      return ioredis as Cluster;
    },
    client: (opts) => live().client(opts),
    killMaster: (index) => live().killMaster(index),
    restartNode: (port) => live().restartNode(port),
    commandCount: (command) => live().commandCount(command),
    resetStats: () => live().resetStats(),
    stop: () => live().stop(),
  };
}
