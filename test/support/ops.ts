// Processes for the operator tests: the app (test/fixtures/ops-app.ts) and the real `ratekeeper` command.
import { type ChildProcess, spawn } from 'node:child_process';
import { once } from 'node:events';
import { createInterface } from 'node:readline';

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
