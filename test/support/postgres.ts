// Real PostgreSQL for tests and benchmarks: a throwaway server (initdb + postgres) on a free port, as redis.ts starts Redis.
import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import { chownSync, closeSync, openSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import pg from 'pg';
import { exited, makeTempDir, removeTempDir, track } from './processes.js';
import { freePort, HOST } from './redis/ports.js';
import { sleep } from './redis/probe.js';

export const HOW_TO_GET_POSTGRES =
  'install PostgreSQL (Debian/Ubuntu: apt-get install -y postgresql; initdb and postgres are found by `pg_config --bindir`)';

/** A PostgreSQL server for one suite; stop, restart and pause work only on one this process started. */
export interface PostgresServer {
  readonly host: string;
  readonly port: number;
  /** postgres://postgres@host:port/postgres */
  readonly url: string;
  /** A pool on this server (ended by `stop()`); `options` are pg's PoolConfig. */
  pool(options?: pg.PoolConfig): pg.Pool;
  /** Stops the server (SIGINT: a fast shutdown, or SIGQUIT: immediate, as a crash) and starts it again on its port, data kept. */
  restart(mode?: 'fast' | 'immediate'): Promise<void>;
  /** SIGSTOP the server and every backend: connections stay open and nothing answers. */
  pause(): void;
  resume(): void;
  stop(): Promise<void>;
}

/** The directory of initdb and postgres: `PG_BINDIR`, else what `pg_config --bindir` says. */
function binDir(): string {
  if (process.env.PG_BINDIR) return process.env.PG_BINDIR;
  try {
    return execFileSync('pg_config', ['--bindir'], { encoding: 'utf8' }).trim();
  } catch {
    throw new Error(`no pg_config on PATH: ${HOW_TO_GET_POSTGRES}`);
  }
}

/** initdb refuses to run as root: then the server runs as the `postgres` user, in a directory it owns. */
function runAs(): { uid: number; gid: number } | undefined {
  if (process.getuid?.() !== 0) return undefined;
  try {
    const uid = Number(execFileSync('id', ['-u', 'postgres'], { encoding: 'utf8' }).trim());
    const gid = Number(execFileSync('id', ['-g', 'postgres'], { encoding: 'utf8' }).trim());
    return { uid, gid };
  } catch {
    throw new Error('running as root, and there is no `postgres` user to run initdb and postgres as');
  }
}

/** Server settings for tests: no fsync (a test's data need not survive the machine), commits still durable to the OS. */
const SETTINGS = [
  '-c',
  'fsync=off',
  '-c',
  'full_page_writes=off',
  '-c',
  'max_connections=300',
  '-c',
  'unix_socket_directories=',
  '-c',
  'shared_buffers=64MB',
];

class Server implements PostgresServer {
  readonly host = HOST;
  readonly url: string;
  #child: ChildProcess | undefined;
  readonly #pools = new Set<pg.Pool>();

  constructor(
    readonly port: number,
    private readonly dir: string,
    private readonly bin: string,
    private readonly user: { uid: number; gid: number } | undefined,
  ) {
    this.url = `postgres://postgres@${HOST}:${port}/postgres`;
  }

  async start(): Promise<void> {
    const log = openSync(join(this.dir, 'server.log'), 'a');
    if (this.user) chownSync(join(this.dir, 'server.log'), this.user.uid, this.user.gid);
    const args = ['-D', join(this.dir, 'data'), '-p', String(this.port), '-c', `listen_addresses=${HOST}`];
    const child = track(
      spawn(join(this.bin, 'postgres'), [...args, ...SETTINGS], {
        stdio: ['ignore', log, log],
        ...(this.user ?? {}),
      }),
    );
    closeSync(log);
    this.#child = child;
    const deadline = Date.now() + 60_000;
    for (;;) {
      if (child.exitCode !== null || child.signalCode !== null) {
        throw new Error(`postgres exited at start: ${this.logTail()}`);
      }
      const probe = new pg.Client({ host: HOST, port: this.port, user: 'postgres', database: 'postgres' });
      probe.on('error', () => {});
      try {
        await probe.connect();
        await probe.query('SELECT 1');
        return;
      } catch (error) {
        if (Date.now() > deadline) throw new Error(`postgres did not answer: ${(error as Error).message}`);
      } finally {
        await probe.end().catch(() => {});
      }
      await sleep(50);
    }
  }

  logTail(): string {
    try {
      return readFileSync(join(this.dir, 'server.log'), 'utf8').slice(-2000);
    } catch {
      return '(no log)';
    }
  }

  pool(options: pg.PoolConfig = {}): pg.Pool {
    const pool = new pg.Pool({
      host: HOST,
      port: this.port,
      user: 'postgres',
      database: 'postgres',
      ...options,
    });
    // A server stopped on purpose ends idle clients: that is not a test failure.
    pool.on('error', () => {});
    this.#pools.add(pool);
    return pool;
  }

  async restart(mode: 'fast' | 'immediate' = 'fast'): Promise<void> {
    await this.#halt(mode === 'fast' ? 'SIGINT' : 'SIGQUIT');
    await this.start();
  }

  pause(): void {
    for (const pid of this.#pids()) signal(pid, 'SIGSTOP');
  }

  resume(): void {
    for (const pid of this.#pids()) signal(pid, 'SIGCONT');
  }

  async stop(): Promise<void> {
    await Promise.all([...this.#pools].map((pool) => pool.end().catch(() => {})));
    this.#pools.clear();
    await this.#halt('SIGQUIT');
    removeTempDir(this.dir);
  }

  async #halt(signal: NodeJS.Signals): Promise<void> {
    const child = this.#child;
    if (child === undefined) return;
    this.resume();
    const gone = exited(child);
    child.kill(signal);
    await gone;
    this.#child = undefined;
  }

  /** The postmaster and its children (the backends), from /proc. */
  #pids(): number[] {
    const main = this.#child?.pid;
    if (main === undefined) return [];
    const children = execFileSync('ps', ['-o', 'pid=', '--ppid', String(main)], { encoding: 'utf8' })
      .split('\n')
      .map((line) => Number(line.trim()))
      .filter((pid) => pid > 0);
    return [main, ...children];
  }
}

/** Signals a process; a backend that ended since it was listed (a pool just closed) is passed over. */
function signal(pid: number, name: NodeJS.Signals): void {
  try {
    process.kill(pid, name);
  } catch (error) {
    if ((error as { code?: string }).code !== 'ESRCH') throw error;
  }
}

/** A PostgreSQL server of its own (initdb in a temp dir, a free port); the caller stops it. */
export async function startPostgres(): Promise<PostgresServer> {
  const bin = binDir();
  const user = runAs();
  const dir = makeTempDir('postgres');
  if (user) chownSync(dir, user.uid, user.gid);
  try {
    execFileSync(
      join(bin, 'initdb'),
      ['-D', join(dir, 'data'), '-U', 'postgres', '-A', 'trust', '-E', 'UTF8', '--locale=C', '--no-sync'],
      { stdio: 'pipe', ...(user ?? {}) },
    );
  } catch (error) {
    removeTempDir(dir);
    const stderr = (error as { stderr?: Buffer }).stderr?.toString() ?? '';
    throw new Error(`initdb failed (${HOW_TO_GET_POSTGRES}): ${(error as Error).message} ${stderr}`);
  }
  const server = new Server(await freePort(), dir, bin, user);
  try {
    await server.start();
  } catch (error) {
    await server.stop().catch(() => {});
    throw error;
  }
  return server;
}

let shared: Promise<PostgresServer> | undefined;

/** The server suites share (they isolate themselves by schema); never stopped by them. */
export function getPostgres(): Promise<PostgresServer> {
  shared ??= startPostgres().catch((error: unknown) => {
    shared = undefined;
    throw error;
  });
  return shared;
}
