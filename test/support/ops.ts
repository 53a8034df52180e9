// Processes for the operator tests: the app (test/fixtures/ops-app.ts) and the real `ratekeeper` command.
import { type ChildProcess, spawn } from 'node:child_process';
import { once } from 'node:events';
import { createInterface } from 'node:readline';
import { runCli as runCommand } from '../../src/operators/cli/main.js';

const root = new URL('../..', import.meta.url).pathname;
export const CLI = ['--import', 'tsx', 'src/operators/cli/bin.ts'];

export interface AppProcess {
  readonly port: number;
  readonly child: ChildProcess;
  /** Sends `method path` as user `user`, resolves to the status. */
  hit(method: string, path: string, user: string): Promise<number>;
  stop(): Promise<void>;
}

/** Starts the ops app on the given Redis and prefix; resolves once it listens. */
export async function startApp(redisUrl: string, prefix: string, extra: string[] = []): Promise<AppProcess> {
  const child = spawn(
    process.execPath,
    ['--import', 'tsx', 'test/fixtures/ops-app.ts', redisUrl, prefix, ...extra],
    {
      cwd: root,
      stdio: ['pipe', 'pipe', 'inherit'],
    },
  );
  const lines = createInterface({ input: child.stdout as NodeJS.ReadableStream })[Symbol.asyncIterator]();
  const first = await lines.next();
  if (first.done) throw new Error('the app process ended before listening');
  const { port } = JSON.parse(String(first.value)) as { port: number };
  return {
    port,
    child,
    async hit(method, path, user) {
      const response = await fetch(`http://127.0.0.1:${port}${path}`, {
        method,
        headers: { 'x-user': user },
      });
      await response.arrayBuffer();
      return response.status;
    },
    async stop() {
      if (child.exitCode !== null) return;
      const exited = once(child, 'exit');
      child.stdin?.end();
      const timer = setTimeout(() => child.kill('SIGKILL'), 5000);
      await exited;
      clearTimeout(timer);
    },
  };
}

export interface CliRun {
  code: number | null;
  stdout: string;
  stderr: string;
}

/** Runs `ratekeeper <args>` to its end (no shell; REDIS_URL and RATEKEEPER_RULES only as `env` gives them). */
export async function runCli(args: string[], env: Record<string, string> = {}): Promise<CliRun> {
  const child = spawn(process.execPath, [...CLI, ...args], {
    cwd: root,
    env: { PATH: process.env.PATH ?? '', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (chunk: Buffer) => {
    stdout += chunk.toString();
  });
  child.stderr.on('data', (chunk: Buffer) => {
    stderr += chunk.toString();
  });
  // 'close', not 'exit': the output may still be arriving when the process has exited.
  const [code] = (await once(child, 'close')) as [number | null];
  return { code, stdout, stderr };
}

/**
 * The command's own run function in this process (what the bin calls, without the process around it): for
 * the many error cases, which would otherwise each start a process. Same arguments and result as `runCli`.
 */
export async function runCliInProcess(args: string[], env: Record<string, string> = {}): Promise<CliRun> {
  let stdout = '';
  let stderr = '';
  const code = await runCommand(args, { PATH: process.env.PATH ?? '', ...env }, root, {
    stdout: (text) => {
      stdout += text;
    },
    stderr: (text) => {
      stderr += text;
    },
    tty: false,
    interrupted: new Promise<void>(() => {}),
  });
  return { code, stdout, stderr };
}

export interface CliSession {
  readonly child: ChildProcess;
  /** The next stdout line that `accept` takes (lines before it are passed over); rejects after `ms`. */
  line(accept: (line: string) => boolean, ms?: number): Promise<string>;
  /** Everything written to stdout so far. */
  readonly output: () => string;
  /** Everything written to stderr so far. */
  readonly errors: () => string;
  /** Resolves to the exit status once the command has ended by itself. */
  readonly exited: Promise<number | null>;
  /** SIGINT (Ctrl-C); resolves to the exit status. */
  interrupt(): Promise<number | null>;
}

/**
 * Starts a long-running `ratekeeper <args>` (watch). `tty`: through a pseudo-terminal made by
 * util-linux `script`, so the command sees a terminal on stdout as an operator's shell gives it.
 */
export function startCli(args: string[], env: Record<string, string> = {}, tty = false): CliSession {
  const command = [process.execPath, ...CLI, ...args];
  const quoted = command.map((a) => `'${a.replaceAll("'", "'\\''")}'`).join(' ');
  const child = tty
    ? spawn('script', ['-qfec', `exec ${quoted}`, '/dev/null'], {
        cwd: root,
        env: { PATH: process.env.PATH ?? '', TERM: 'xterm', ...env },
        stdio: ['pipe', 'pipe', 'pipe'],
      })
    : spawn(process.execPath, [...CLI, ...args], {
        cwd: root,
        env: { PATH: process.env.PATH ?? '', ...env },
        stdio: ['ignore', 'pipe', 'pipe'],
      });
  let output = '';
  let pending = '';
  const lines: string[] = [];
  const waiters: Array<() => void> = [];
  child.stdout?.on('data', (chunk: Buffer) => {
    output += chunk.toString();
    pending += chunk.toString();
    const parts = pending.split(/\r?\n/);
    pending = parts.pop() ?? '';
    lines.push(...parts);
    for (const wake of waiters.splice(0)) wake();
  });
  let stderr = '';
  child.stderr?.on('data', (chunk: Buffer) => {
    stderr += chunk.toString();
  });
  const exited = once(child, 'close').then(([code]) => code as number | null);
  return {
    child,
    output: () => output,
    errors: () => stderr,
    exited,
    async line(accept, ms = 15_000) {
      const deadline = Date.now() + ms;
      for (;;) {
        while (lines.length > 0) {
          const next = lines.shift() as string;
          if (accept(next)) return next;
        }
        if (child.exitCode !== null) throw new Error(`the command ended (${child.exitCode}): ${stderr}`);
        const left = deadline - Date.now();
        if (left <= 0) throw new Error(`no such line within ${ms} ms; output so far:\n${output}\n${stderr}`);
        await new Promise<void>((resolve) => {
          const timer = setTimeout(resolve, left);
          waiters.push(() => {
            clearTimeout(timer);
            resolve();
          });
        });
      }
    },
    async interrupt() {
      // On the terminal, Ctrl-C as typed: the pty turns it into SIGINT for the command.
      if (child.exitCode === null) tty ? child.stdin?.write('\u0003') : child.kill('SIGINT');
      const timer = setTimeout(() => child.kill('SIGKILL'), 10_000);
      const code = await exited;
      clearTimeout(timer);
      return code;
    },
  };
}
