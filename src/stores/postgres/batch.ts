// The PostgreSQL store's common request, batched: decisions of one fixed or calendar rule queued while
// the store's statements fill the pool, then sent together as one statement (sql/check-batch.sql).

import { windowKind } from '../../algorithms/index.js';
import type { EvalResult } from '../store.js';
import type { StoreOp } from '../store-ops.js';
import type { PoolCalls } from './pool.js';
import { keyBytes, readResults } from './protocol.js';

/** At most this many decisions in one statement. */
const MAX_BATCH = 64;

/** One decision waiting for its batch. */
interface Waiter {
  rule: string;
  key: string;
  nums: number[];
  resolve(result: EvalResult): void;
  reject(error: unknown): void;
}

/**
 * Decisions that may share a statement: of check-batch.sql, those of one rule with the same numbers
 * (check.sql's 13); of check-many.sql, any.
 */
interface Lane {
  statement: 'window' | 'many';
  waiters: Waiter[];
}

/** The statements the batcher sends (rendered sql/check-batch.sql and sql/check-many.sql), with their names. */
export interface BatchStatements {
  window: { text: string; name: string };
  many: { text: string; name: string };
}

/**
 * Which statement decides this request batched: check-batch.sql ('window') for one op of a counter
 * window (WindowKind.counter: fixed, calendar), mode check, a cost above 0 (a lockout too: it acts only on a denial or a row holding
 * a lock, which check.sql decides inside the statement); check-many.sql ('many') for one op of the other
 * types but concurrency in mode check (one check.sql call each, in one statement). Anything else
 * (several rules, concurrency, record, peek) is one call of check.sql: undefined.
 */
export function batchable(ops: readonly StoreOp[], mode: string): 'window' | 'many' | undefined {
  if (ops.length !== 1 || mode !== 'check') return undefined;
  const op = ops[0] as StoreOp;
  const kind = windowKind(op.rule.type);
  if (kind.counter) return op.cost > 0 ? 'window' : undefined;
  return kind.holdsSlots ? undefined : 'many';
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
  readonly #statements: BatchStatements;
  readonly #maxInFlight: number;
  readonly #time: () => number | null;
  /** Lanes with decisions waiting, oldest first. */
  readonly #lanes = new Map<string, Lane>();
  #inFlight = 0;

  constructor(calls: PoolCalls, statements: BatchStatements, maxInFlight: number, time: () => number | null) {
    this.#calls = calls;
    this.#statements = statements;
    this.#maxInFlight = Math.max(1, maxInFlight);
    this.#time = time;
  }

  /** Decides one batchable op with the statement `batchable` named; `nums` are its 13 numbers (opArrays). */
  decide(op: StoreOp, nums: number[], statement: 'window' | 'many'): Promise<EvalResult> {
    return new Promise<EvalResult>((resolve, reject) => {
      const shape = statement === 'many' ? '' : `${op.rule.name}\0${nums.join(',')}`;
      let lane = this.#lanes.get(shape);
      if (lane === undefined) {
        lane = { statement, waiters: [] };
        this.#lanes.set(shape, lane);
      }
      lane.waiters.push({ rule: op.rule.name, key: op.key, nums, resolve, reject });
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
        const id = `${waiter.rule}\0${waiter.key}`;
        if (taken.length < MAX_BATCH && !keys.has(id)) {
          keys.add(id);
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
    const keys = taken.map((waiter) => keyBytes(waiter.key));
    const first = taken[0] as Waiter;
    const statement = this.#statements[lane.statement];
    this.#calls
      .query({
        name: statement.name,
        text: statement.text,
        values:
          lane.statement === 'window'
            ? [this.#time(), first.rule, keys, first.nums]
            : [
                this.#time(),
                taken.map((waiter) => waiter.rule),
                keys,
                taken.flatMap((waiter) => waiter.nums),
              ],
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
