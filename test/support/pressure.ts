// Pressure for exactness checks: CPU-bound processes that oversubscribe the cores, and racing app processes
// (test/fixtures/pressure-worker.ts) that fire bursts at one key together. Used by tests and by the bench.
import { type ChildProcess, fork, spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import type { RaceAnswer, RaceRound } from '../fixtures/pressure-worker.js';
import { stopChild, track } from './processes.js';

/** Processes that each keep a core busy until stopped (an endless loop, no I/O). */
export class Burners {
  readonly #children: ChildProcess[];

  constructor(count: number) {
    this.#children = Array.from({ length: count }, () =>
      track(spawn(process.execPath, ['-e', 'for (;;) {}'], { stdio: 'ignore' })),
    );
  }

  async stop(): Promise<void> {
    await Promise.all(this.#children.map((child) => stopChild(child, 500)));
  }
}

interface Reply {
  id: number;
  answer?: unknown;
  error?: string;
}

/** One racing app process, asked over IPC. */
class Racer {
  readonly #child: ChildProcess;
  readonly #waiting = new Map<number, { resolve(value: unknown): void; reject(error: Error): void }>();
  readonly up: Promise<unknown>;
  #lastId = 0;

  constructor(label: string) {
    const file = fileURLToPath(new URL('../fixtures/pressure-worker.ts', import.meta.url));
    this.#child = track(
      fork(file, [], { execArgv: ['--import', 'tsx'], stdio: ['ignore', 'inherit', 'inherit', 'ipc'] }),
    );
    this.up = new Promise((resolve, reject) => this.#waiting.set(0, { resolve, reject }));
    this.#child.on('message', (reply: Reply) => {
      const waiter = this.#waiting.get(reply.id);
      this.#waiting.delete(reply.id);
      if (reply.error !== undefined) waiter?.reject(new Error(`${label}: ${reply.error}`));
      else waiter?.resolve(reply.answer);
    });
    this.#child.once('exit', (code, signal) => {
      for (const waiter of this.#waiting.values())
        waiter.reject(new Error(`${label} exited (${signal ?? code})`));
      this.#waiting.clear();
    });
  }

  ask(message: { type: 'prepare'; round: RaceRound } | { type: 'go' }): Promise<unknown> {
    const id = ++this.#lastId;
    return new Promise((resolve, reject) => {
      this.#waiting.set(id, { resolve, reject });
      this.#child.send({ ...message, id });
    });
  }

  stop(): Promise<void> {
    if (this.#child.connected) this.#child.disconnect();
    return stopChild(this.#child, 2000);
  }
}

/** Racing app processes, started once and reused round after round. */
export class Racers {
  readonly #racers: Racer[];

  constructor(count: number) {
    this.#racers = Array.from({ length: count }, (_, i) => new Racer(`racer ${i + 1}`));
  }

  /** Resolves once every process has loaded the library and can take a round. */
  async up(): Promise<void> {
    await Promise.all(this.#racers.map((racer) => racer.up));
  }

  /**
   * One round: every process prepares (`beforeGo` runs once all are ready: flush the scripts for a cold
   * start), then all fire their burst at once. The answers, one per process.
   */
  async race(round: RaceRound, beforeGo: () => Promise<void> = async () => {}): Promise<RaceAnswer[]> {
    await Promise.all(this.#racers.map((racer) => racer.ask({ type: 'prepare', round })));
    await beforeGo();
    return (await Promise.all(this.#racers.map((racer) => racer.ask({ type: 'go' })))) as RaceAnswer[];
  }

  async stop(): Promise<void> {
    await Promise.all(this.#racers.map((racer) => racer.stop()));
  }
}
