// A spawned Sentinel setup: one master, one replica, 3 sentinels; the master can be killed and failed over.
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { Redis, type RedisOptions } from 'ioredis';
import { HOST } from './ports.js';
import { infoField, type NodeAddress, roleOf, waitFor, withConnection } from './probe.js';
import { Fleet, REPLICATION_ARGS } from './redis-process.js';

export interface SentinelSetup {
  readonly sentinels: NodeAddress[];
  readonly masterName: 'mymaster';
  /** An ioredis client that finds the master through the sentinels, disconnected on `stop()`. */
  client(opts?: RedisOptions): Redis;
  /** The master the sentinels currently report. */
  master(): Promise<NodeAddress>;
  /** SIGKILL the current master; resolve once every sentinel reports the promoted replica. */
  killMaster(): Promise<void>;
  stop(): Promise<void>;
}

const masterName = 'mymaster';

const askSentinel = <T>(sentinel: NodeAddress, ...args: string[]) =>
  withConnection(sentinel, (conn) => conn.call('SENTINEL', ...args) as Promise<T>);

async function masterSeenBy(sentinel: NodeAddress): Promise<NodeAddress> {
  const [host, port] = await askSentinel<[string, string]>(sentinel, 'GET-MASTER-ADDR-BY-NAME', masterName);
  return { host, port: Number(port) };
}

/** Whether a sentinel knows the master's replica (up) and the 2 other sentinels. */
async function sentinelReady(sentinel: NodeAddress): Promise<boolean> {
  const replicaList = await askSentinel<string[][]>(sentinel, 'REPLICAS', masterName);
  const peers = await askSentinel<unknown[]>(sentinel, 'SENTINELS', masterName);
  // A replica's flags are exactly "slave" once it is up and seen through the master.
  const up = replicaList.some((fields) => fields[fields.indexOf('flags') + 1] === 'slave');
  return up && peers.length === 2;
}

/** One master, one replica and 3 sentinels monitoring them as "mymaster". */
export async function startSentinel(): Promise<SentinelSetup> {
  const fleet = new Fleet('sentinel');
  const sentinels: NodeAddress[] = [];
  const currentMaster = () => {
    const first = sentinels[0];
    if (!first) throw new Error('no sentinel is running');
    return masterSeenBy(first);
  };
  const sentinelConf = (masterPort: number) => (port: number) => {
    const conf = join(fleet.dir, `sentinel-${port}.conf`);
    const lines = [
      'sentinel resolve-hostnames no',
      `sentinel monitor ${masterName} ${HOST} ${masterPort} 2`,
      `sentinel down-after-milliseconds ${masterName} 1000`,
      `sentinel failover-timeout ${masterName} 3000`,
    ];
    writeFileSync(conf, `${lines.join('\n')}\n`);
    return [conf];
  };

  try {
    const masterPort = await fleet.launch({ args: () => REPLICATION_ARGS });
    const replica = {
      host: HOST,
      port: await fleet.launch({
        args: () => [...REPLICATION_ARGS, '--replicaof', HOST, String(masterPort)],
      }),
    };
    // Sentinels learn replicas from the master's INFO, polled every 10 s: start them once the replica is in.
    await waitFor('the replica to sync with the master', 15_000, async () => {
      const info = await withConnection(replica, (conn) => conn.info('replication'));
      return infoField(info, 'master_link_status') === 'up';
    });
    for (let i = 0; i < 3; i++) {
      const port = await fleet.launch({ args: sentinelConf(masterPort), sentinel: true });
      sentinels.push({ host: HOST, port });
    }
    await waitFor('the sentinels to know the master, the replica and each other', 20_000, async () =>
      (await Promise.all(sentinels.map(sentinelReady))).every(Boolean),
    );
  } catch (error) {
    await fleet.stop();
    throw error;
  }

  return {
    sentinels,
    masterName,
    client: (opts: RedisOptions = {}) =>
      fleet.track(
        new Redis({ sentinels, name: masterName, ...(opts as RedisOptions & { replyMapping?: 'legacy' }) }),
      ),
    master: currentMaster,
    async killMaster() {
      const old = await currentMaster();
      if (!fleet.procs.has(old.port))
        throw new Error(`the master on port ${old.port} is not one this setup runs`);
      await fleet.kill(old.port);
      await waitFor(`the sentinels to promote a replica after killing port ${old.port}`, 30_000, async () => {
        const seen = await Promise.all(sentinels.map(masterSeenBy));
        const next = seen[0];
        if (!next || seen.some((addr) => addr.port === old.port || addr.port !== next.port)) return false;
        return (await roleOf(next)) === 'master';
      });
    },
    stop: () => fleet.stop(),
  };
}
