// Spawned redis-server processes: one per port, started until it answers, and a fleet that stops together.
import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { exited, makeTempDir, removeTempDir, track } from '../processes.js';
import { freePort, HOST } from './ports.js';
import { sleep, withConnection } from './probe.js';

/** Every spawned server: nothing persisted, and DEBUG allowed (tests use DEBUG SLEEP, DEBUG OBJECT ...). */
const BASE_ARGS = ['--save', '', '--appendonly', 'no', '--enable-debug-command', 'yes'];

/** Replicas sync at once rather than after the default 5 s wait for more replicas to join. */
export const REPLICATION_ARGS = ['--repl-diskless-sync', 'yes', '--repl-diskless-sync-delay', '0'];

/** `REDIS_SERVER_BIN` runs another build (a benchmark against a newer Redis, say). */
export const redisServerBinary = () => process.env.REDIS_SERVER_BIN ?? 'redis-server';

export const HOW_TO_GET_REDIS =
  'install redis-server (Debian/Ubuntu: apt-get install -y redis-server) or set REDIS_URL=redis://host:port';

const pauseCell = new Int32Array(new SharedArrayBuffer(4));

/** The process's one-letter state ('T' when stopped): from /proc on Linux, else from ps. */
function processState(pid: number): string {
  try {
    if (existsSync('/proc/self/stat')) {
      // "pid (comm) S ...": the comm may hold spaces and parentheses; the state follows the last ')'.
      const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
      return stat.slice(stat.lastIndexOf(')') + 2, stat.lastIndexOf(')') + 3);
    }
    return execFileSync('ps', ['-o', 'state=', '-p', String(pid)], { encoding: 'utf8' })
      .trim()
      .slice(0, 1);
  } catch {
    return ''; // no such process
  }
}

/** One redis-server process; `exited` settles when it is gone, whatever the reason. */
export class RedisProcess {
  readonly child: ChildProcess;
  readonly exited: Promise<void>;
  spawnError: Error | undefined;

  constructor(
    args: string[],
    readonly logFile: string,
  ) {
    this.child = track(spawn(redisServerBinary(), args, { stdio: 'ignore' }));
    this.child.once('error', (error) => {
      this.spawnError = error;
    });
    const failed = new Promise<void>((resolve) => this.child.once('error', () => resolve()));
    this.exited = Promise.race([exited(this.child), failed]);
  }

  get done(): boolean {
    return this.spawnError !== undefined || this.child.exitCode !== null || this.child.signalCode !== null;
  }

  get pid(): number {
    return this.child.pid ?? -1;
  }

  async kill(): Promise<void> {
    if (!this.done) this.child.kill('SIGKILL');
    await this.exited;
  }

  /**
   * SIGSTOP, returning only once the kernel reports the process stopped. A process stops itself when
   * it next runs, so on a busy machine it may go on for a few ms after kill() returns: a request sent
   * then can still be read (and, after SIGCONT, answered before anything sent while it was stopped).
   */
  pause(): void {
    this.child.kill('SIGSTOP');
    const deadline = Date.now() + 5000;
    for (let state = processState(this.pid); state !== 'T'; state = processState(this.pid)) {
      // Events do not run in this loop: a process that died shows as a zombie, or is gone.
      if (state === 'Z' || state === '' || this.done)
        throw new Error(`redis-server ${this.pid} exited instead of stopping`);
      if (Date.now() > deadline)
        throw new Error(`redis-server ${this.pid} did not stop within 5 s of SIGSTOP`);
      Atomics.wait(pauseCell, 0, 0, 1); // a 1 ms synchronous sleep, leaving the CPU to the process
    }
  }

  /** SIGCONT: unlike SIGSTOP, the sender itself makes the process runnable again before kill() returns. */
  resume(): void {
    this.child.kill('SIGCONT');
  }

  logTail(): string {
    if (!existsSync(this.logFile)) return '(no log)';
    return readFileSync(this.logFile, 'utf8').trim().split('\n').slice(-8).join('\n');
  }
}

/** Starts redis-server (or a sentinel) with `args` on `port` and resolves once it answers PING. */
async function launch(port: number, dir: string, args: string[], asSentinel: boolean): Promise<RedisProcess> {
  const logFile = join(dir, `redis-${port}.log`);
  const common = ['--port', String(port), '--bind', HOST, '--dir', dir, '--logfile', logFile];
  const proc = new RedisProcess(
    asSentinel ? [...args, '--sentinel', ...common] : [...common, ...BASE_ARGS, ...args],
    logFile,
  );
  const deadline = Date.now() + 10_000;
  while (Date.now() < deadline) {
    if (proc.done) {
      if (proc.spawnError)
        throw new Error(
          `cannot run ${redisServerBinary()} (${proc.spawnError.message}): ${HOW_TO_GET_REDIS}`,
        );
      throw new Error(`redis-server on port ${port} exited at startup:\n${proc.logTail()}`);
    }
    try {
      if ((await withConnection({ host: HOST, port }, (conn) => conn.ping())) === 'PONG') return proc;
    } catch {
      await sleep(50);
    }
  }
  await proc.kill();
  throw new Error(`redis-server on port ${port} did not answer PING within 10 s:\n${proc.logTail()}`);
}

/** What a fleet needs to start one more node. */
export interface LaunchOptions {
  /** The server's own arguments, given the port it will listen on. */
  args?: (port: number) => string[];
  /** Where to listen; default a free port (a fixed port is not retried when taken). */
  port?: () => Promise<number>;
  sentinel?: boolean;
}

/** Processes, clients and a temp dir that go away together on `stop()`. */
export class Fleet {
  readonly dir: string;
  readonly procs = new Map<number, RedisProcess>();
  readonly #closers = new Set<() => unknown>();

  constructor(kind: string) {
    this.dir = makeTempDir(kind);
  }

  /** Starts a node; retries with another port when one was taken between being found free and bound. */
  async launch({ args = () => [], port = () => freePort(), sentinel = false }: LaunchOptions = {}) {
    for (let attempt = 1; ; attempt++) {
      const chosen = await port();
      try {
        this.procs.set(chosen, await launch(chosen, this.dir, args(chosen), sentinel));
        return chosen;
      } catch (error) {
        const taken = error instanceof Error && error.message.includes('already in use');
        if (!taken || attempt === 5) throw error;
        await sleep(100);
      }
    }
  }

  async kill(port: number): Promise<void> {
    await this.procs.get(port)?.kill();
    this.procs.delete(port);
  }

  /** Runs `close` on `stop()`: clients of any library made for this fleet's servers. */
  onStop(close: () => unknown): void {
    this.#closers.add(close);
  }

  /**
   * An ioredis client closed on `stop()`. Its errors are swallowed, else ioredis prints "Unhandled
   * error event" each time a server dies; tests that want them add their own listener.
   */
  track<T extends { on(event: 'error', listener: () => void): unknown; disconnect(): void }>(client: T): T {
    client.on('error', () => {});
    this.onStop(() => client.disconnect());
    return client;
  }

  async stop(): Promise<void> {
    for (const close of this.#closers) await close();
    this.#closers.clear();
    await Promise.all([...this.procs.keys()].map((port) => this.kill(port)));
    removeTempDir(this.dir);
  }
}
