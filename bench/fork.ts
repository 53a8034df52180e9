// Child processes of the benchmark (exactness racers, HTTP servers): TypeScript through tsx, IPC messages.

import { type ChildProcess, fork } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { stopChild, track } from '../test/support/processes.js';

/**
 * tsx's loader for the child. Under mocha the bench modules run through tsx's CommonJS hook, whose
 * `import.meta` has no `resolve`: then the bare name, resolved from the working directory (the repo).
 */
function tsxLoader(): string {
  return typeof import.meta.resolve === 'function' ? import.meta.resolve('tsx') : 'tsx';
}

/** A message is a plain object with a `type`. */
export interface Message {
  type: string;
  [field: string]: unknown;
}

/** A forked bench module and a queue of the messages it sent. */
export class Child {
  private readonly queue: Message[] = [];
  private waiter: ((message: Message | Error) => void) | undefined;
  private exitError: Error | undefined;
  private lastId = 0;

  private constructor(
    readonly label: string,
    private readonly process: ChildProcess,
  ) {
    process.on('message', (message: Message) => this.deliver(message));
    process.once('exit', (code, signal) => {
      this.exitError = new Error(`${label} exited (${signal ?? code})`);
      this.waiter?.(this.exitError);
    });
    process.once('error', (error) => {
      this.exitError = error;
      this.waiter?.(error);
    });
  }

  /** Forks `bench/<module>.ts` under tsx, with `nodeArgs` (e.g. '--expose-gc') for its Node. */
  static start(module: string, label = module, nodeArgs: string[] = []): Child {
    const file = fileURLToPath(new URL(`./${module}.ts`, import.meta.url));
    const child = fork(file, [], {
      execArgv: [...nodeArgs, '--import', tsxLoader()],
      stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
      env: { ...process.env, NODE_ENV: 'production' },
    });
    return new Child(label, track(child));
  }

  private deliver(message: Message): void {
    const waiter = this.waiter;
    if (waiter) {
      this.waiter = undefined;
      waiter(message);
    } else {
      this.queue.push(message);
    }
  }

  send(message: Message): void {
    this.process.send(message);
  }

  /** The next message, or a rejection when the child dies or stays silent for `timeoutMs`. */
  next(timeoutMs: number): Promise<Message> {
    const queued = this.queue.shift();
    if (queued) return Promise.resolve(queued);
    if (this.exitError) return Promise.reject(this.exitError);
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        this.waiter = undefined;
        reject(new Error(`${this.label} sent nothing for ${timeoutMs} ms`));
      }, timeoutMs);
      this.waiter = (message) => {
        clearTimeout(timer);
        if (message instanceof Error) reject(message);
        else resolve(message);
      };
    });
  }

  /**
   * Sends `message` and waits for its answer (matched by id: a late answer to an earlier question
   * that timed out is skipped); an answer of type 'error' rejects with its text.
   */
  async ask(message: Message, timeoutMs: number): Promise<Message> {
    const id = ++this.lastId;
    this.send({ ...message, id });
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const answer = await this.next(Math.max(1, deadline - Date.now()));
      if (answer.id !== id) continue;
      if (answer.type === 'error') throw new Error(String(answer.message));
      return answer;
    }
  }

  async stop(): Promise<void> {
    if (this.process.connected) {
      this.process.send({ type: 'exit' });
      this.process.disconnect();
    }
    await stopChild(this.process, 3000);
  }
}

/** In a child: answers each message with what `handle` returns, or with `{ type: 'error' }`. */
export function serve(handle: (message: Message) => Promise<Message | undefined>): void {
  process.on('message', (message: Message) => {
    if (message.type === 'exit') {
      process.exit(0);
    }
    const id = message.id;
    handle(message).then(
      (answer) => answer && process.send?.({ ...answer, id }),
      (error: unknown) =>
        process.send?.({
          type: 'error',
          id,
          message: error instanceof Error ? error.message : String(error),
        }),
    );
  });
  process.on('disconnect', () => process.exit(0));
}
