// The PostgreSQL store's common request, batched: decisions of one fixed or calendar rule queued while
// the store's statements fill the pool, then sent together as one statement (sql/check-batch.sql).
import type { PoolCalls } from './postgres-pool.js';
import { keyBytes, readResults } from './postgres-protocol.js';
import type { EvalResult } from './store.js';
import type { StoreOp } from './store-ops.js';

/** At most this many decisions in one statement. */
const MAX_BATCH = 64;

/** One decision waiting for its batch. */
interface Waiter {
  key: string;
  resolve(result: EvalResult): void;
  reject(error: unknown): void;
}

/** The decisions waiting with one rule and the same numbers (check.sql's 13): they may share a statement. */
interface Lane {
  rule: string;
  nums: number[];
  waiters: Waiter[];
}

/**
 * Whether sql/check-batch.sql decides this request: one op, mode check, a fixed or calendar window, a cost
 * above 0 (a lockout too: it acts only on a denial or a row holding a lock, which check.sql decides
 * inside the statement). Anything else (several rules, the other window types, record, peek) is one call
 * of check.sql.
 */
export function batchable(ops: readonly StoreOp[], mode: string): boolean {
  if (ops.length !== 1 || mode !== 'check') return false;
  const op = ops[0] as StoreOp;
  return (op.rule.type === 'fixed' || op.rule.type === 'calendar') && op.cost > 0;
}

/**
 * Sends batchable decisions as statements of sql/check-batch.sql, at most `maxInFlight` (the pool's size) at
 * once: while that many are out, decisions wait and the next statement takes every one waiting for the same
 * rule and numbers (up to MAX_BATCH, each key once: a key already taken waits for the statement after).
 * Below that, a decision goes out alone at once, so batching adds no wait; under load, one statement, one
 * transaction and one round trip serve many decisions. Every decision of a statement settles with it: its
 * own answer, or the statement's error.
 */
export class CheckBatcher {
  readonly #calls: PoolCalls;
  readonly #text: string;
  readonly #name: string;
  readonly #maxInFlight: number;
  readonly #time: () => number | null;
  /** Lanes with decisions waiting, oldest first. */
  readonly #lanes = new Map<string, Lane>();
  #inFlight = 0;

  constructor(
    calls: PoolCalls,
    statement: { text: string; name: string },
    maxInFlight: number,
    time: () => number | null,
  ) {
    this.#calls = calls;
    this.#text = statement.text;
    this.#name = statement.name;
    this.#maxInFlight = Math.max(1, maxInFlight);
    this.#time = time;
  }

  /** Decides one batchable op (see `batchable`); `nums` are its 13 numbers (postgres-protocol.ts opArrays). */
  decide(op: StoreOp, nums: number[]): Promise<EvalResult> {
    return new Promise<EvalResult>((resolve, reject) => {
      const shape = `${op.rule.name}\0${nums.join(',')}`;
      let lane = this.#lanes.get(shape);
      if (lane === undefined) {
        lane = { rule: op.rule.name, nums, waiters: [] };
        this.#lanes.set(shape, lane);
      }
      lane.waiters.push({ key: op.key, resolve, reject });
      this.#pump();
    });
  }

  /** Sends statements while fewer than maxInFlight are out and decisions wait. */
  #pump(): void {
    while (this.#inFlight < this.#maxInFlight && this.#lanes.size > 0) {
      const [shape, lane] = this.#lanes.entries().next().value as [string, Lane];
      // The lane goes to the back: lanes take turns.
      this.#lanes.delete(shape);
      const taken: Waiter[] = [];
      const left: Waiter[] = [];
      const keys = new Set<string>();
      for (const waiter of lane.waiters) {
        if (taken.length < MAX_BATCH && !keys.has(waiter.key)) {
          keys.add(waiter.key);
          taken.push(waiter);
        } else {
          left.push(waiter);
        }
      }
      if (left.length > 0) this.#lanes.set(shape, { ...lane, waiters: left });
      this.#send(lane, taken);
    }
  }

  #send(lane: Lane, taken: Waiter[]): void {
    this.#inFlight++;
    this.#calls
      .query({
        name: this.#name,
        text: this.#text,
        values: [this.#time(), lane.rule, taken.map((waiter) => keyBytes(waiter.key)), lane.nums],
        rowMode: 'array',
      })
      .then(
        (rows) => {
          const replies = (rows[0] as unknown[] | undefined)?.[0];
          if (!Array.isArray(replies) || replies.length !== taken.length) {
            const error = new Error(
              `ratekeeper: unexpected reply from PostgreSQL check batch: ${String(replies).slice(0, 200)}`,
            );
            for (const waiter of taken) waiter.reject(error);
            return;
          }
          for (const [i, waiter] of taken.entries()) {
            try {
              waiter.resolve(readResults(replies[i], 1));
            } catch (error) {
              waiter.reject(error);
            }
          }
        },
        (error: unknown) => {
          for (const waiter of taken) waiter.reject(error);
        },
      )
      .finally(() => {
        this.#inFlight--;
        this.#pump();
      });
  }
}
