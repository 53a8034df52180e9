// Child processes and temp dirs of tests and benchmarks: none outlives this process, however it ends.
import { type ChildProcess, spawn } from 'node:child_process';
import { once } from 'node:events';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';

const children = new Set<ChildProcess>();
const tempDirs = new Set<string>();
let hooked = false;

const running = (child: ChildProcess) => child.exitCode === null && child.signalCode === null;

function cleanupSync(): void {
  for (const child of children) if (running(child)) child.kill('SIGKILL');
  children.clear();
  for (const dir of tempDirs) rmSync(dir, { recursive: true, force: true });
  tempDirs.clear();
}

function hookExit(): void {
  if (hooked) return;
  hooked = true;
  // 'exit' listeners must be synchronous: kill() is, and the OS reaps the children.
  process.once('exit', cleanupSync);
  for (const signal of ['SIGINT', 'SIGTERM', 'SIGHUP'] as const) {
    process.once(signal, () => {
      cleanupSync();
      // Nobody else handles it: die of the signal as the process would have without this hook.
      if (process.listenerCount(signal) === 0) process.kill(process.pid, signal);
    });
  }
}

/** Registers a child so that it is SIGKILLed when this process exits or is interrupted. */
export function track<T extends ChildProcess>(child: T): T {
  hookExit();
  children.add(child);
  // A child that failed to spawn emits 'error' and never 'exit'.
  for (const event of ['exit', 'error'] as const) child.once(event, () => children.delete(child));
  return child;
}

/** Resolves once the child has exited, whatever the reason (at once if it already has). */
export function exited(child: ChildProcess): Promise<void> {
  if (!running(child)) return Promise.resolve();
  return new Promise((resolve) => child.once('exit', () => resolve()));
}

/** Stops a child: SIGTERM, then SIGKILL after `graceMs`; resolves once it has exited. */
export async function stopChild(child: ChildProcess, graceMs = 2000): Promise<void> {
  if (!running(child)) return;
  const gone = exited(child);
  child.kill('SIGTERM');
  const timer = setTimeout(() => child.kill('SIGKILL'), graceMs);
  await gone;
  clearTimeout(timer);
  children.delete(child);
}

/** A fresh temp dir `ratekeeper-<kind>-*`, removed by `removeTempDir` or when this process exits. */
export function makeTempDir(kind: string): string {
  hookExit();
  const dir = mkdtempSync(join(tmpdir(), `ratekeeper-${kind}-`));
  tempDirs.add(dir);
  return dir;
}

export function removeTempDir(dir: string): void {
  rmSync(dir, { recursive: true, force: true });
  tempDirs.delete(dir);
}

/** A worker process spoken to a line at a time: each line asked is answered with one line of JSON. */
export interface LineWorker {
  ask(line: string): Promise<Record<string, unknown>>;
  /** Sends `quit` and waits for the process to exit. */
  quit(): Promise<void>;
}

/** Starts `fixture` (a TypeScript file run by tsx) with `args`; resolves once it printed `ready`. */
export async function startLineWorker(fixture: string, args: readonly string[]): Promise<LineWorker> {
  const child: ChildProcess = track(
    spawn(process.execPath, ['--import', 'tsx', fixture, ...args], { stdio: ['pipe', 'pipe', 'inherit'] }),
  );
  const lines = createInterface({ input: child.stdout as NodeJS.ReadableStream })[Symbol.asyncIterator]();
  const next = async () => {
    const { value, done } = await lines.next();
    if (done) throw new Error(`the worker process ${fixture} ended`);
    return String(value);
  };
  const first = await next();
  if (first !== 'ready') throw new Error(`the worker process ${fixture} said '${first}' before 'ready'`);
  return {
    async ask(line) {
      child.stdin?.write(`${line}\n`);
      return JSON.parse(await next()) as Record<string, unknown>;
    },
    async quit() {
      if (child.exitCode !== null) return;
      const exited = once(child, 'exit');
      child.stdin?.end('quit\n');
      await exited;
    },
  };
}
