// A standalone Redis server for tests and benchmarks: spawned (killable, restartable, pausable) or external.
import { Redis, type RedisOptions } from 'ioredis';
import { HOST } from './ports.js';
import { commandCalls, type NodeAddress, resetStats, serverVersion, withConnection } from './probe.js';
import { Fleet } from './redis-process.js';

/** A Redis server for one suite; the process controls work only on a server this process spawned. */
export interface RedisServer extends NodeAddress {
  readonly url: string;
  /** redis_version as the server reported it at start. */
  readonly version: string;
  readonly pid: number;
  /** SIGKILL the server, wait for it to exit, disconnect every client made by `client()`. */
  stop(): Promise<void>;
  kill(): Promise<void>;
  /**
   * A fresh process on the same port: loaded scripts are gone, and so is the data unless `keepData`
   * (then the server is shut down with SHUTDOWN SAVE and loads its snapshot, as after a maintenance
   * restart); clients reconnect.
   */
  restart(opts?: { keepData?: boolean }): Promise<void>;
  /** SIGSTOP, returning once the process is stopped: connections stay open and nothing answers. */
  pause(): void;
  resume(): void;
  /** An ioredis client of this server, disconnected on `stop()`; for another library use host and port. */
  client(opts?: RedisOptions): Redis;
  /** Calls of `cmd` (e.g. 'evalsha', 'script|load') since start or `resetStats()`, from INFO commandstats. */
  commandCount(cmd: string): Promise<number>;
  resetStats(): Promise<void>;
}

function needsSpawned(what: string): Error {
  return new Error(
    `${what} needs a redis-server this process spawned; the shared server from getRedis() ` +
      '(REDIS_URL, testcontainers or spawned) must not be stopped, paused or restarted: use startRedis()',
  );
}

/** A server; without a fleet it is not ours (an external URL, a container, or the shared one). */
export class Server implements RedisServer {
  readonly url: string;

  constructor(
    readonly host: string,
    readonly port: number,
    readonly version: string,
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
    // ioredis 6 declares replyMapping optional without undefined: a RedisOptions is not one as is.
    const options = opts as RedisOptions & { replyMapping?: 'legacy' };
    if (!this.fleet) return new Redis(this.url, options).on('error', () => {});
    return this.fleet.track(new Redis({ host: this.host, port: this.port, ...options }));
  }

  async stop(): Promise<void> {
    await this.ownFleet('stop()').stop();
  }

  kill(): Promise<void> {
    return this.stop();
  }

  async restart(opts: { keepData?: boolean } = {}): Promise<void> {
    const fleet = this.ownFleet('restart()');
    if (opts.keepData) {
      // The server exits without a reply: the connection closing is the answer.
      await withConnection(this, (conn) => conn.shutdown('SAVE')).catch(() => {});
      await this.proc('restart()').exited;
    }
    await fleet.kill(this.port);
    await fleet.launch({ args: () => this.args, port: async () => this.port });
  }

  pause(): void {
    this.proc('pause()').pause();
  }

  resume(): void {
    this.proc('resume()').resume();
  }

  commandCount(cmd: string): Promise<number> {
    return commandCalls(this, cmd);
  }

  resetStats(): Promise<void> {
    return resetStats(this);
  }

  private ownFleet(what: string): Fleet {
    if (!this.fleet) throw needsSpawned(what);
    return this.fleet;
  }

  private proc(what: string) {
    const proc = this.ownFleet(what).procs.get(this.port);
    if (!proc) throw new Error(`${what}: the redis-server on port ${this.port} was stopped`);
    return proc;
  }
}

/** A redis-server of its own on a free port, with `args` added to its command line; the caller stops it. */
export async function startRedis(opts: { args?: string[] } = {}): Promise<RedisServer> {
  const args = opts.args ?? [];
  const fleet = new Fleet('redis');
  try {
    const port = await fleet.launch({ args: () => args });
    return new Server(HOST, port, await serverVersion({ host: HOST, port }), fleet, args);
  } catch (error) {
    await fleet.stop();
    throw error;
  }
}
