// Child processes started by the benchmark: tracked so that an exit, an exception or Ctrl-C stops them all.

import type { ChildProcess } from 'node:child_process';

const running = new Set<ChildProcess>();
let hooked = false;

function killAll(): void {
  for (const child of running) {
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
  }
  running.clear();
}

function hookExit(): void {
  if (hooked) return;
  hooked = true;
  // 'exit' handlers must be synchronous: kill() is, and the OS reaps the children.
  process.on('exit', killAll);
  for (const signal of ['SIGINT', 'SIGTERM', 'SIGHUP'] as const) {
    process.once(signal, () => {
      killAll();
      process.exit(130);
    });
  }
}

/** Registers a child so that it never outlives the benchmark. */
export function track(child: ChildProcess): ChildProcess {
  hookExit();
  running.add(child);
  child.once('exit', () => running.delete(child));
  return child;
}

/** Stops a tracked child: SIGTERM, then SIGKILL after `graceMs`. */
export async function stop(child: ChildProcess, graceMs = 2000): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  child.kill('SIGTERM');
  const timer = setTimeout(() => child.kill('SIGKILL'), graceMs);
  await exited;
  clearTimeout(timer);
  running.delete(child);
}
