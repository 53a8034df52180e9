// Hot-key runs: app processes (test/fixtures/hot-key-worker.ts) hitting one key together, one of them
// perhaps killed partway. Used by the leasing tests and by `npm run bench -- hot-key`.
import { type ChildProcess, fork } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { HotKeyRun, HotKeyTally } from '../fixtures/hot-key-worker.js';
import { makeTempDir, removeTempDir, stopChild, track } from './processes.js';

export type { HotKeyRun, HotKeyTally } from '../fixtures/hot-key-worker.js';

/** One worker process, answering one message at a time. */
class Worker {
  readonly child: ChildProcess;
  #next: ((answer: Record<string, unknown>) => void) | undefined;
  #failed: ((error: Error) => void) | undefined;
  readonly up: Promise<unknown>;

  constructor() {
    const file = fileURLToPath(new URL('../fixtures/hot-key-worker.ts', import.meta.url));
    this.child = track(
      fork(file, [], { execArgv: ['--import', 'tsx'], stdio: ['ignore', 'inherit', 'inherit', 'ipc'] }),
    );
    this.up = this.#answer();
    this.child.on('message', (answer: Record<string, unknown>) => this.#next?.(answer));
    this.child.on('exit', (code, signal) => this.#failed?.(new Error(`worker exited (${signal ?? code})`)));
  }

  #answer(): Promise<Record<string, unknown>> {
    return new Promise((resolve, reject) => {
      this.#next = (answer) => (answer.error ? reject(new Error(String(answer.error))) : resolve(answer));
      this.#failed = reject;
    });
  }

  ask(message: object): Promise<Record<string, unknown>> {
    const answer = this.#answer();
    this.child.send(message);
    return answer;
  }
}

/**
 * The tallies of one run of `count` processes (`kill`: the first kills itself `afterMs` from the start, or at
 * its admission number `afterAdmitted`, holding what it leased); `ready` is
 * awaited once every process is prepared and warmed up, before the run starts.
 */
export async function runHotKey(
  run: HotKeyRun,
  count: number,
  kill?: { afterMs: number } | { afterAdmitted: number },
  ready?: () => Promise<unknown>,
): Promise<HotKeyTally[]> {
  const dir = makeTempDir('hot-key');
  const workers = Array.from({ length: count }, () => new Worker());
  try {
    await Promise.all(workers.map((w) => w.up));
    const tallyFile = join(dir, 'killed.json');
    await Promise.all(
      workers.map((w, i) =>
        w.ask({
          type: 'prepare',
          run:
            i === 0 && kill !== undefined
              ? {
                  ...run,
                  tallyFile,
                  ...('afterMs' in kill
                    ? { killAfterMs: kill.afterMs }
                    : { killAfterAdmitted: kill.afterAdmitted }),
                }
              : run,
        }),
      ),
    );
    // Every process warmed up: what is counted from here is the run's (`ready`: the store's calls).
    await ready?.();
    const tallies = await Promise.all(
      workers.map((w, i) =>
        w.ask({ type: 'go' }).then(
          (t) => t as unknown as HotKeyTally,
          (error: unknown) => {
            if (i === 0 && kill !== undefined)
              return JSON.parse(readFileSync(tallyFile, 'utf8')) as HotKeyTally;
            throw error;
          },
        ),
      ),
    );
    await Promise.all(
      workers.map((w, i) => (i === 0 && kill !== undefined ? undefined : w.ask({ type: 'close' }))),
    );
    return tallies;
  } finally {
    await Promise.all(workers.map((w) => stopChild(w.child, 2000)));
    removeTempDir(dir);
  }
}

/** Sums of the tallies. */
export function totals(tallies: readonly HotKeyTally[]) {
  return {
    admitted: tallies.reduce((s, t) => s + t.admitted, 0),
    decisions: tallies.reduce((s, t) => s + t.decisions, 0),
    decisionsToLastAdmit: tallies.reduce((s, t) => s + t.decisionsToLastAdmit, 0),
    lastAdmitMs: Math.max(...tallies.map((t) => t.lastAdmitMs)),
    statements: tallies.reduce((s, t) => s + t.statements, 0),
    storeErrors: tallies.reduce((s, t) => s + t.storeErrors, 0),
    firstStoreError: tallies.find((t) => t.firstStoreError !== null)?.firstStoreError ?? null,
  };
}
