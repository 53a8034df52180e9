// Real Redis for tests: one shared server, and spawned standalone, Cluster and Sentinel setups to kill.
import { type ChildProcess, execFile, spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { Cluster, type ClusterOptions, Redis, type RedisOptions } from 'ioredis';

/** A Redis server for one suite; the process controls work only on a server this process spawned. */
export interface RedisServer {
  readonly host: string;
  readonly port: number;
  readonly url: string;
  readonly pid: number;
  /** SIGKILL the server, wait for it to exit, disconnect every client made by `client()`. */
  stop(): Promise<void>;
  kill(): Promise<void>;
  /** A fresh process on the same port: data and loaded scripts are gone; clients reconnect. */
  restart(): Promise<void>;
  /** SIGSTOP: connections stay open and nothing answers. */
  pause(): void;
  resume(): void;
  client(opts?: RedisOptions): Redis;
  /** Calls of `cmd` (e.g. 'evalsha', 'script|load') since start or `resetStats()`, from INFO commandstats. */
  commandCount(cmd: string): Promise<number>;
  resetStats(): Promise<void>;
}

export interface ClusterNodeInfo {
  host: string;
  port: number;
  pid: number;
  role: 'master' | 'replica';
}

export interface RedisCluster {
  /** Live nodes, roles as of startup or the last `killMaster`. */
  readonly nodes: ClusterNodeInfo[];
  client(opts?: ClusterOptions): Cluster;
  /** Kill the index-th master of `nodes`; with replicas, resolve once a replica took over its slots. */
  killMaster(index: number): Promise<void>;
  commandCount(cmd: string): Promise<number>;
  resetStats(): Promise<void>;
  stop(): Promise<void>;
}

export interface SentinelSetup {
  readonly sentinels: { host: string; port: number }[];
  readonly masterName: 'mymaster';
  client(opts?: RedisOptions): Redis;
  /** The master the sentinels currently report. */
  master(): Promise<{ host: string; port: number }>;
  /** SIGKILL the current master; resolve once every sentinel reports the promoted replica. */
  killMaster(): Promise<void>;
  stop(): Promise<void>;
}

const HOST = '127.0.0.1';
const BASE_ARGS = ['--save', '', '--appendonly', 'no', '--enable-debug-command', 'yes'];
// Replicas sync at once rather than after the default 5 s wait for more replicas to join.
const REPLICATION_ARGS = ['--repl-diskless-sync', 'yes', '--repl-diskless-sync-delay', '0'];
const CONTAINER_IMAGE = 'redis:7.2-alpine';
const HOW_TO_GET_REDIS =
  'install redis-server (Debian/Ubuntu: apt-get install -y redis-server) or set REDIS_URL=redis://host:port';

// Everything spawned or created here is torn down when the test process ends, however it ends.
const liveProcs = new Set<ChildProcess>();
const tempDirs = new Set<string>();
let exitHooked = false;

function cleanupSync(): void {
  for (const child of liveProcs) child.kill('SIGKILL');
  liveProcs.clear();
  for (const dir of tempDirs) rmSync(dir, { recursive: true, force: true });
  tempDirs.clear();
}

function hookExit(): void {
  if (exitHooked) return;
  exitHooked = true;
  process.once('exit', cleanupSync);
  for (const signal of ['SIGINT', 'SIGTERM', 'SIGHUP'] as const) {
    process.once(signal, () => {
      cleanupSync();
      // Nobody else handles it: die of the signal as the process would have without this hook.
      if (process.listenerCount(signal) === 0) process.kill(process.pid, signal);
    });
  }
}

function makeTempDir(kind: string): string {
  hookExit();
  const dir = mkdtempSync(join(tmpdir(), `ratekeeper-${kind}-`));
  tempDirs.add(dir);
  return dir;
}

function removeTempDir(dir: string): void {
  rmSync(dir, { recursive: true, force: true });
  tempDirs.delete(dir);
}

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

async function waitFor(what: string, timeoutMs: number, check: () => Promise<boolean>): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  let lastError: unknown;
  while (Date.now() < deadline) {
    try {
      if (await check()) return;
    } catch (error) {
      lastError = error;
    }
    await sleep(100);
  }
  const why = lastError instanceof Error ? ` (last error: ${lastError.message})` : '';
  throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}${why}`);
}

function withTimeout<T>(promise: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what} took over ${ms} ms`)), ms);
  });
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}

// Ports handed out in this process, so two nodes never get the same one between release and bind.
const handedOut = new Set<number>();

function bindPort(port: number): Promise<number | undefined> {
  return new Promise((resolve) => {
    const server = createServer();
    server.once('error', () => resolve(undefined));
    server.listen(port, HOST, () => {
      const address = server.address();
      server.close(() => resolve(typeof address === 'object' && address ? address.port : undefined));
    });
  });
}

/** A port free right now; with `busPort`, port + 10000 (the Cluster bus) is free as well. */
async function freePort(busPort = false): Promise<number> {
  for (let attempt = 0; attempt < 50; attempt++) {
    const port = await bindPort(0);
    if (port === undefined || handedOut.has(port)) continue;
    if (busPort && (port + 10000 > 65535 || (await bindPort(port + 10000)) === undefined)) continue;
    handedOut.add(port);
    return port;
  }
  throw new Error('could not find a free TCP port on 127.0.0.1');
}

/** One short-lived connection for probes and stats, apart from the clients under test. */
async function withConnection<T>(port: number, use: (conn: Redis) => Promise<T>, host = HOST): Promise<T> {
  const conn = new Redis({
    host,
    port,
    lazyConnect: true,
    enableReadyCheck: false,
    enableOfflineQueue: false,
    maxRetriesPerRequest: 0,
    retryStrategy: () => null,
    connectTimeout: 2000,
    commandTimeout: 2000,
  });
  conn.on('error', () => {});
  try {
    await conn.connect();
    return await use(conn);
  } finally {
    conn.disconnect();
  }
}

async function commandCalls(port: number, cmd: string, host = HOST): Promise<number> {
  const info = await withConnection(port, (conn) => conn.info('commandstats'), host);
  const name = cmd.toLowerCase().replace(/[|.]/g, '\\$&');
  const calls = new RegExp(`^cmdstat_${name}:calls=(\\d+)`, 'm').exec(info)?.[1];
  return calls === undefined ? 0 : Number(calls);
}

function infoField(info: string, field: string): string | undefined {
  return new RegExp(`^${field}:(.*?)\\r?$`, 'm').exec(info)?.[1];
}

/** A redis-server process; `exited` settles when it is gone, whatever the reason. */
class Proc {
  readonly child: ChildProcess;
  readonly exited: Promise<void>;
  done = false;
  spawnError: Error | undefined;

  constructor(
    args: string[],
    readonly logFile: string,
  ) {
    hookExit();
    this.child = spawn('redis-server', args, { stdio: 'ignore' });
    liveProcs.add(this.child);
    this.exited = new Promise((resolve) => {
      const finish = () => {
        this.done = true;
        liveProcs.delete(this.child);
        resolve();
      };
      this.child.once('exit', finish);
      this.child.once('error', (error) => {
        this.spawnError = error;
        finish();
      });
    });
  }

  get pid(): number {
    return this.child.pid ?? -1;
  }

  async kill(): Promise<void> {
    if (!this.done) this.child.kill('SIGKILL');
    await this.exited;
  }

  logTail(): string {
    if (!existsSync(this.logFile)) return '(no log)';
    return readFileSync(this.logFile, 'utf8').trim().split('\n').slice(-8).join('\n');
  }
}

/** Start redis-server with `args` on `port`, resolve once it answers PING. */
async function launch(port: number, dir: string, args: string[], asSentinel = false): Promise<Proc> {
  const logFile = join(dir, `redis-${port}.log`);
  const common = ['--port', String(port), '--bind', HOST, '--dir', dir, '--logfile', logFile];
  const proc = new Proc(
    asSentinel ? [...args, '--sentinel', ...common] : [...common, ...BASE_ARGS, ...args],
    logFile,
  );
  const deadline = Date.now() + 10_000;
  while (Date.now() < deadline) {
    if (proc.done) {
      if (proc.spawnError)
        throw new Error(`cannot run redis-server (${proc.spawnError.message}): ${HOW_TO_GET_REDIS}`);
      throw new Error(`redis-server on port ${port} exited at startup:\n${proc.logTail()}`);
    }
    try {
      if ((await withConnection(port, (conn) => conn.ping())) === 'PONG') return proc;
    } catch {
      await sleep(50);
    }
  }
  await proc.kill();
  throw new Error(`redis-server on port ${port} did not answer PING within 10 s:\n${proc.logTail()}`);
}

/** Retries when the port was taken between `pickPort` finding it free and redis-server binding it. */
async function launchRetrying(
  pickPort: () => Promise<number>,
  dir: string,
  argsFor: (port: number) => string[],
  asSentinel: boolean,
): Promise<[number, Proc]> {
  for (let attempt = 1; ; attempt++) {
    const port = await pickPort();
    try {
      return [port, await launch(port, dir, argsFor(port), asSentinel)];
    } catch (error) {
      const taken = error instanceof Error && error.message.includes('already in use');
      if (!taken || attempt === 5) throw error;
      await sleep(100);
    }
  }
}

/** Processes, clients and a temp dir that go away together on `stop()`. */
class Fleet {
  readonly dir: string;
  readonly procs = new Map<number, Proc>();
  private readonly clients = new Set<Redis | Cluster>();

  constructor(kind: string) {
    this.dir = makeTempDir(kind);
  }

  async launch(
    argsFor: (port: number) => string[],
    pickPort = () => freePort(),
    asSentinel = false,
  ): Promise<number> {
    const [port, proc] = await launchRetrying(pickPort, this.dir, argsFor, asSentinel);
    this.procs.set(port, proc);
    return port;
  }

  async kill(port: number): Promise<void> {
    await this.procs.get(port)?.kill();
    this.procs.delete(port);
  }

  /** Swallows client errors, else ioredis prints "Unhandled error event" each time a server dies. */
  track<T extends Redis | Cluster>(client: T): T {
    client.on('error', () => {});
    this.clients.add(client);
    return client;
  }

  async stop(): Promise<void> {
    for (const client of this.clients) client.disconnect();
    this.clients.clear();
    await Promise.all([...this.procs.keys()].map((port) => this.kill(port)));
    removeTempDir(this.dir);
  }
}

function needsSpawned(what: string): Error {
  return new Error(
    `${what} needs a redis-server this process spawned; the shared server from getRedis() ` +
      '(REDIS_URL, testcontainers or spawned) must not be stopped, paused or restarted: use startRedis()',
  );
}

class Server implements RedisServer {
  readonly url: string;

  /** Without a fleet the server is not ours: an external URL, a container, or the shared one. */
  constructor(
    readonly host: string,
    readonly port: number,
    private readonly fleet?: Fleet,
    private readonly args: string[] = [],
    url?: string,
  ) {
    this.url = url ?? `redis://${host}:${port}`;
  }

  get pid(): number {
    return this.proc('pid').pid;
  }

  client(opts: RedisOptions = {}): Redis {
    const client = this.fleet
      ? new Redis({ host: this.host, port: this.port, ...opts })
      : new Redis(this.url, opts);
    return this.fleet ? this.fleet.track(client) : client.on('error', () => {});
  }

  async stop(): Promise<void> {
    await this.ownFleet('stop()').stop();
  }

  kill(): Promise<void> {
    return this.stop();
  }

  async restart(): Promise<void> {
    const fleet = this.ownFleet('restart()');
    await fleet.kill(this.port);
    await fleet.launch(
      () => this.args,
      async () => this.port,
    );
  }

  pause(): void {
    this.proc('pause()').child.kill('SIGSTOP');
  }

  resume(): void {
    this.proc('resume()').child.kill('SIGCONT');
  }

  commandCount(cmd: string): Promise<number> {
    return commandCalls(this.port, cmd, this.host);
  }

  async resetStats(): Promise<void> {
    await withConnection(this.port, (conn) => conn.config('RESETSTAT'), this.host);
  }

  private ownFleet(what: string): Fleet {
    if (!this.fleet) throw needsSpawned(what);
    return this.fleet;
  }

  private proc(what: string): Proc {
    const proc = this.ownFleet(what).procs.get(this.port);
    if (!proc) throw new Error(`${what}: the redis-server on port ${this.port} was stopped`);
    return proc;
  }
}

/** A redis-server of its own on a free port; the caller stops it. */
export async function startRedis(opts: { args?: string[] } = {}): Promise<RedisServer> {
  const args = opts.args ?? [];
  const fleet = new Fleet('redis');
  try {
    const port = await fleet.launch(() => args);
    return new Server(HOST, port, fleet, args);
  } catch (error) {
    await fleet.stop();
    throw error;
  }
}

async function dockerAnswers(): Promise<boolean> {
  try {
    const { getContainerRuntimeClient } = await import('testcontainers');
    await withTimeout(getContainerRuntimeClient(), 5000, 'finding a Docker engine');
    return true;
  } catch {
    return false;
  }
}

async function startContainer(): Promise<RedisServer> {
  const { RedisContainer } = await import('@testcontainers/redis');
  // Ryuk, testcontainers' reaper, removes the container when this process ends.
  const container = await new RedisContainer(CONTAINER_IMAGE)
    .withCommand(['redis-server', '--protected-mode', 'no', ...BASE_ARGS])
    .start();
  return new Server(container.getHost(), container.getPort(), undefined, [], container.getConnectionUrl());
}

async function connectUrl(url: string): Promise<RedisServer> {
  const parsed = new URL(url);
  const server = new Server(parsed.hostname, Number(parsed.port || 6379), undefined, [], url);
  const probe = server.client({ lazyConnect: true, maxRetriesPerRequest: 0, retryStrategy: () => null });
  try {
    await probe.connect();
    await probe.ping();
  } catch (error) {
    throw new Error(`REDIS_URL=${url} does not answer PING: ${(error as Error).message}`);
  } finally {
    probe.disconnect();
  }
  return server;
}

let shared: Promise<RedisServer> | undefined;

/**
 * The server shared by suites that never kill it: REDIS_URL if set, else a testcontainers Redis
 * when a Docker engine answers, else a spawned redis-server. Its stop/restart/pause throw.
 */
export function getRedis(): Promise<RedisServer> {
  shared ??= findSharedRedis().catch((error: unknown) => {
    shared = undefined;
    throw error;
  });
  return shared;
}

async function findSharedRedis(): Promise<RedisServer> {
  const url = process.env.REDIS_URL;
  if (url) return connectUrl(url);
  let containerError = '; no Docker engine answered for testcontainers';
  if (await dockerAnswers()) {
    try {
      return await startContainer();
    } catch (error) {
      containerError = `; testcontainers failed too: ${(error as Error).message}`;
    }
  }
  try {
    const own = await startRedis();
    return new Server(own.host, own.port);
  } catch (error) {
    throw new Error(
      `no Redis for the tests (REDIS_URL is unset${containerError}): ${(error as Error).message}`,
    );
  }
}

function runRedisCli(args: string[]): Promise<string> {
  return promisify(execFile)('redis-cli', args, { timeout: 30_000 }).then(
    ({ stdout }) => stdout,
    (error: Error & { code?: unknown; stdout?: string }) => {
      if (error.code === 'ENOENT') throw new Error(`redis-cli not found on PATH: ${HOW_TO_GET_REDIS}`);
      throw new Error(`redis-cli ${args.join(' ')} failed: ${error.message}\n${error.stdout ?? ''}`);
    },
  );
}

const clusterHealthy = async (port: number) =>
  withConnection(port, async (conn) => {
    const info = String(await conn.cluster('INFO'));
    return infoField(info, 'cluster_state') === 'ok' && infoField(info, 'cluster_slots_ok') === '16384';
  });

const roleOf = async (port: number): Promise<'master' | 'replica'> =>
  withConnection(port, async (conn) => ((await conn.role())[0] === 'master' ? 'master' : 'replica'));

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
        role: await roleOf(port),
      })),
    );
  };

  try {
    const ports = await Promise.all(
      Array.from({ length: 3 * (1 + replicas) }, () => fleet.launch(clusterArgs, () => freePort(true))),
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
      (await Promise.all(ports.map(clusterHealthy))).every(Boolean),
    );
    await refreshRoles();
    await waitFor('every replica to finish its first sync', 15_000, async () => {
      const replicaPorts = nodes.filter((node) => node.role === 'replica').map((node) => node.port);
      const links = await Promise.all(
        replicaPorts.map((port) => withConnection(port, (c) => c.info('replication'))),
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
          clientOpts,
        ),
      ),
    async killMaster(index: number) {
      const victim = nodes.filter((node) => node.role === 'master')[index];
      if (!victim) throw new RangeError(`killMaster(${index}): there is no live master at that index`);
      const victimId = String(await withConnection(victim.port, (conn) => conn.cluster('MYID')));
      await fleet.kill(victim.port);
      nodes = nodes.filter((node) => node !== victim);
      if (replicas === 0) return;
      // Until a node has flagged the victim as failed, its "ok" state is the stale one from before.
      const flagged = (clusterNodes: string) => {
        const line = clusterNodes.split('\n').find((entry) => entry.startsWith(`${victimId} `));
        return line?.split(' ')[2]?.split(',').includes('fail') === true;
      };
      await waitFor(
        `a replica to take over from the master killed on port ${victim.port}`,
        30_000,
        async () => {
          const views = await Promise.all(
            nodes.map(async ({ port }) => {
              const clusterNodes = String(await withConnection(port, (conn) => conn.cluster('NODES')));
              return flagged(clusterNodes) && (await clusterHealthy(port));
            }),
          );
          return views.every(Boolean);
        },
      );
      await refreshRoles();
    },
    async commandCount(cmd: string) {
      const counts = await Promise.all(nodes.map((node) => commandCalls(node.port, cmd)));
      return counts.reduce((sum, count) => sum + count, 0);
    },
    async resetStats() {
      await Promise.all(nodes.map((node) => withConnection(node.port, (conn) => conn.config('RESETSTAT'))));
    },
    stop: () => fleet.stop(),
  };
}

/** One master, one replica and 3 sentinels monitoring them as "mymaster". */
export async function startSentinel(): Promise<SentinelSetup> {
  const fleet = new Fleet('sentinel');
  const sentinels: { host: string; port: number }[] = [];
  const masterName = 'mymaster';
  const askSentinel = <T>(port: number, ...args: string[]) =>
    withConnection(port, (conn) => conn.call('SENTINEL', ...args) as Promise<T>);
  const masterSeenBy = async (port: number) => {
    const [host, masterPort] = await askSentinel<[string, string]>(
      port,
      'GET-MASTER-ADDR-BY-NAME',
      masterName,
    );
    return { host, port: Number(masterPort) };
  };
  const currentMaster = () => {
    const first = sentinels[0];
    if (!first) throw new Error('no sentinel is running');
    return masterSeenBy(first.port);
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
    const masterPort = await fleet.launch(() => REPLICATION_ARGS);
    const replicaPort = await fleet.launch(() => [
      ...REPLICATION_ARGS,
      '--replicaof',
      HOST,
      String(masterPort),
    ]);
    // Sentinels learn replicas from the master's INFO, polled every 10 s: start them once the replica is in.
    await waitFor('the replica to sync with the master', 15_000, async () => {
      const info = await withConnection(replicaPort, (conn) => conn.info('replication'));
      return infoField(info, 'master_link_status') === 'up';
    });
    for (let i = 0; i < 3; i++) {
      sentinels.push({ host: HOST, port: await fleet.launch(sentinelConf(masterPort), undefined, true) });
    }
    await waitFor('the sentinels to know the master, the replica and each other', 20_000, async () => {
      const healthy = await Promise.all(
        sentinels.map(async ({ port }) => {
          const replicaList = await askSentinel<string[][]>(port, 'REPLICAS', masterName);
          const peers = await askSentinel<unknown[]>(port, 'SENTINELS', masterName);
          // A replica's flags are exactly "slave" once it is up and seen through the master.
          const up = replicaList.some((fields) => fields[fields.indexOf('flags') + 1] === 'slave');
          return up && peers.length === 2;
        }),
      );
      return healthy.every(Boolean);
    });
  } catch (error) {
    await fleet.stop();
    throw error;
  }

  return {
    sentinels,
    masterName,
    client: (opts: RedisOptions = {}) => fleet.track(new Redis({ sentinels, name: masterName, ...opts })),
    master: currentMaster,
    async killMaster() {
      const old = await currentMaster();
      if (!fleet.procs.has(old.port))
        throw new Error(`the master on port ${old.port} is not one this setup runs`);
      await fleet.kill(old.port);
      await waitFor(`the sentinels to promote a replica after killing port ${old.port}`, 30_000, async () => {
        const seen = await Promise.all(sentinels.map(({ port }) => masterSeenBy(port)));
        const next = seen[0];
        if (!next || seen.some((addr) => addr.port === old.port || addr.port !== next.port)) return false;
        return (await roleOf(next.port)) === 'master';
      });
    },
    stop: () => fleet.stop(),
  };
}
