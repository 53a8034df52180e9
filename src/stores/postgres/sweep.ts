// The PostgreSQL store's background sweep: expired rows removed a bounded batch at a time, on an unref'd timer.
import type { PoolCalls } from './pool.js';
import type { PostgresNames } from './sql.js';

/**
 * Every `intervalMs` one call of sql/keys.sql sweep: the next `batch` rows in key order are looked at and
 * those holding nothing live are deleted (rows a decision holds are skipped, never waited for); the next
 * tick goes on from there, and starts again at the beginning once it reaches the end. Decisions delete
 * the expired rows they meet themselves; the sweep removes the keys nobody asks about again, so the table
 * holds the keys active in the last window plus at most what the sweep has not reached yet. The timer
 * never holds the process open, a tick is skipped while the last one still runs, and `stop` ends it.
 */
export class Sweeper {
  readonly #calls: PoolCalls;
  readonly #text: string;
  readonly #batch: number;
  readonly #time: () => number | null;
  readonly #ready: () => Promise<void>;
  readonly #timer: NodeJS.Timeout;
  #afterRule = '';
  #afterKey: Buffer = Buffer.alloc(0);
  #running = false;

  constructor(
    calls: PoolCalls,
    names: PostgresNames,
    options: { intervalMs: number; batch: number; time: () => number | null; ready: () => Promise<void> },
  ) {
    this.#calls = calls;
    this.#text = `SELECT * FROM ${names.qualified('sweep')}($1, $2, $3, $4)`;
    this.#batch = options.batch;
    this.#time = options.time;
    this.#ready = options.ready;
    this.#timer = setInterval(() => void this.sweep().catch(() => {}), options.intervalMs);
    this.#timer.unref();
  }

  /** One step: resolves with the number of rows deleted. Runs on the timer; callable directly (tests). */
  async sweep(): Promise<number> {
    if (this.#running) return 0;
    this.#running = true;
    try {
      await this.#ready();
      const rows = await this.#calls.query({
        text: this.#text,
        values: [this.#time(), this.#batch, this.#afterRule, this.#afterKey],
      });
      const row = rows[0] as { deleted: number; next_rule: string | null; next_kh: Buffer | null };
      if (row.next_rule === null || row.next_kh === null) {
        this.#afterRule = '';
        this.#afterKey = Buffer.alloc(0);
      } else {
        this.#afterRule = row.next_rule;
        this.#afterKey = row.next_kh;
      }
      return row.deleted;
    } finally {
      this.#running = false;
    }
  }

  stop(): void {
    clearInterval(this.#timer);
  }
}
