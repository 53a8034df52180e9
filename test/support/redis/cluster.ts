// A spawned Redis Cluster: 3 masters, optionally a replica each, joined by redis-cli; masters can be killed.
import { execFile } from 'node:child_process';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { Cluster, type ClusterOptions } from 'ioredis';
import { freePort, HOST } from './ports.js';
import {
  commandCalls,
  infoField,
  type NodeAddress,
  resetStats,
  roleOf,
  waitFor,
  withConnection,
} from './probe.js';
import { Fleet, HOW_TO_GET_REDIS, REPLICATION_ARGS } from './redis-process.js';

export interface ClusterNodeInfo extends NodeAddress {
  pid: number;
  role: 'master' | 'replica';
}

export interface RedisCluster {
  /** Live nodes, roles as of startup or the last `killMaster`. */
  readonly nodes: ClusterNodeInfo[];
  /** An ioredis Cluster client seeded with every live node, disconnected on `stop()`. */
  client(opts?: ClusterOptions): Cluster;
  /**
   * Kill the index-th master of `nodes`; with replicas, resolve once a replica took over its slots.
   * Resolves with the node killed.
   */
  killMaster(index: number): Promise<ClusterNodeInfo>;
  /**
   * Start a node killed earlier again, on its port with its cluster config: it rejoins as a replica of
   * the master that took over its slots. Resolves once it is in sync and every node reports the
   * cluster healthy, so the next `killMaster` has a replica to fail over to.
   */
  restartNode(port: number): Promise<void>;
  commandCount(cmd: string): Promise<number>;
  resetStats(): Promise<void>;
  stop(): Promise<void>;
}

export function runRedisCli(args: string[]): Promise<string> {
  return promisify(execFile)('redis-cli', args, { timeout: 30_000 }).then(
    ({ stdout }) => stdout,
    (error: Error & { code?: unknown; stdout?: string }) => {
      if (error.code === 'ENOENT') throw new Error(`redis-cli not found on PATH: ${HOW_TO_GET_REDIS}`);
      throw new Error(`redis-cli ${args.join(' ')} failed: ${error.message}\n${error.stdout ?? ''}`);
    },
  );
}

const clusterHealthy = (node: NodeAddress) =>
  withConnection(node, async (conn) => {
    const info = String(await conn.cluster('INFO'));
    return infoField(info, 'cluster_state') === 'ok' && infoField(info, 'cluster_slots_ok') === '16384';
  });

/** Whether `node` has flagged the node `id` as failed (until then its "ok" state is a stale one). */
const flaggedFailed = async (node: NodeAddress, id: string) => {
  const lines = String(await withConnection(node, (conn) => conn.cluster('NODES'))).split('\n');
  const line = lines.find((entry) => entry.startsWith(`${id} `));
  return line?.split(' ')[2]?.split(',').includes('fail') === true;
};

/** 3 masters (and 1 replica each with `replicas: 1`), spawned and joined with redis-cli --cluster create. */
export async function startCluster(opts: { replicas?: 0 | 1 } = {}): Promise<RedisCluster> {
  const replicas = opts.replicas ?? 0;
  const fleet = new Fleet('cluster');
  let nodes: ClusterNodeInfo[] = [];
  const clusterArgs = (port: number) => [
    ...['--cluster-enabled', 'yes', '--cluster-config-file', join(fleet.dir, `nodes-${port}.conf`)],
    // Fail over after 1 s, and let a replica take over however long ago it last heard its master.
    ...['--cluster-node-timeout', '1000', '--cluster-replica-validity-factor', '0'],
    ...REPLICATION_ARGS,
  ];
  const refreshRoles = async () => {
    nodes = await Promise.all(
      [...fleet.procs].map(async ([port, proc]) => ({
        host: HOST,
        port,
        pid: proc.pid,
        role: await roleOf({ host: HOST, port }),
      })),
    );
  };

  try {
    const ports = await Promise.all(
      Array.from({ length: 3 * (1 + replicas) }, () =>
        fleet.launch({ args: clusterArgs, port: () => freePort(true) }),
      ),
    );
    const addresses = ports.map((port) => `${HOST}:${port}`);
    await runRedisCli([
      '--cluster',
      'create',
      ...addresses,
      '--cluster-replicas',
      String(replicas),
      '--cluster-yes',
    ]);
    await waitFor('every cluster node to report cluster_state:ok', 15_000, async () =>
      (await Promise.all(ports.map((port) => clusterHealthy({ host: HOST, port })))).every(Boolean),
    );
    await refreshRoles();
    await waitFor('every replica to finish its first sync', 15_000, async () => {
      const links = await Promise.all(
        nodes
          .filter((node) => node.role === 'replica')
          .map((node) => withConnection(node, (conn) => conn.info('replication'))),
      );
      return links.every((info) => infoField(info, 'master_link_status') === 'up');
    });
  } catch (error) {
    await fleet.stop();
    throw error;
  }

  return {
    get nodes() {
      return nodes;
    },
    client: (clientOpts: ClusterOptions = {}) =>
      fleet.track(
        new Cluster(
          nodes.map(({ host, port }) => ({ host, port })),
          // ioredis 6 declares replyMapping optional without undefined: a ClusterOptions is not one as is.
          clientOpts as ClusterOptions & { redisOptions?: { replyMapping?: 'legacy' } },
        ),
      ),
    async killMaster(index: number) {
      const victim = nodes.filter((node) => node.role === 'master')[index];
      if (!victim) throw new RangeError(`killMaster(${index}): there is no live master at that index`);
      const victimId = String(await withConnection(victim, (conn) => conn.cluster('MYID')));
      await fleet.kill(victim.port);
      nodes = nodes.filter((node) => node !== victim);
      if (replicas === 0) return victim;
      await waitFor(
        `a replica to take over from the master killed on port ${victim.port}`,
        30_000,
        async () => {
          const views = await Promise.all(
            nodes.map(async (node) => (await flaggedFailed(node, victimId)) && (await clusterHealthy(node))),
          );
          return views.every(Boolean);
        },
      );
      await refreshRoles();
      return victim;
    },
    async restartNode(port: number) {
      if (fleet.procs.has(port)) throw new Error(`restartNode(${port}): that node is running`);
      await fleet.launch({ args: clusterArgs, port: async () => port });
      const node = { host: HOST, port };
      await waitFor(`the node on port ${port} to rejoin as a replica in sync`, 30_000, async () => {
        const info = await withConnection(node, (conn) => conn.info('replication'));
        return infoField(info, 'role') === 'slave' && infoField(info, 'master_link_status') === 'up';
      });
      await waitFor('every cluster node to report cluster_state:ok', 15_000, async () =>
        (
          await Promise.all([...fleet.procs.keys()].map((p) => clusterHealthy({ host: HOST, port: p })))
        ).every(Boolean),
      );
      await refreshRoles();
    },
    async commandCount(cmd: string) {
      const counts = await Promise.all(nodes.map((node) => commandCalls(node, cmd)));
      return counts.reduce((sum, count) => sum + count, 0);
    },
    async resetStats() {
      await Promise.all(nodes.map(resetStats));
    },
    stop: () => fleet.stop(),
  };
}
