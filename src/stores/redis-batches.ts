// Batching: the requests of one event-loop phase whose keys share a slot go out as one call of lua/check.lua.
import { decidedAt } from './redis-clock.js';
import type { RedisConnection } from './redis-connection.js';
import { CheckCall, decodeCheckReply, type KeySpace, type ScriptTime } from './redis-protocol.js';
import { type RedisScript, runScript } from './redis-scripts.js';
import type { EvalMode, EvalResult, StoreOp } from './store.js';

/** A request waiting in a batch, and how to settle it. */
interface QueuedRequest {
  readonly ops: readonly StoreOp[];
  readonly time: ScriptTime;
  resolve(result: EvalResult): void;
  reject(error: unknown): void;
}

/** Requests that go out together as one call of lua/check.lua (all their keys in one slot). */
interface Batch {
  readonly requests: QueuedRequest[];
  readonly call: CheckCall;
}

/**
 * A batch is sent as soon as it holds this many requests or ops, without waiting for the end of the
 * event-loop phase: under load two or more batches are then in flight, so that Redis runs one while
 * this process reads the last reply and fills the next (bench/RESULTS.md, history); and it bounds how
 * long one script run holds Redis.
 */
const MAX_BATCH_REQUESTS = 32;
const MAX_BATCH_OPS = 256;

/**
 * Collects requests into one batch per slot (one, slot 0, on a standalone server) and sends each when
 * the current phase of the event loop ends, or at once when it is full. The script decides the
 * requests of a batch in turn, each as if it were alone.
 */
export class Batcher {
  readonly #connection: RedisConnection;
  readonly #script: RedisScript;
  readonly #space: KeySpace;
  /** Batches being filled, by slot. */
  readonly #open = new Map<number, Batch>();
  #flushScheduled = false;
  readonly #flushOpen = () => {
    this.#flushScheduled = false;
    this.flush();
  };

  constructor(connection: RedisConnection, script: RedisScript, space: KeySpace) {
    this.#connection = connection;
    this.#script = script;
    this.#space = space;
  }

  /** Adds a request (all its keys in `slot`) to the batch of its slot. */
  enqueue(slot: number, ops: readonly StoreOp[], mode: EvalMode, time: ScriptTime): Promise<EvalResult> {
    let batch = this.#open.get(slot);
    if (batch === undefined) {
      batch = newBatch();
      this.#open.set(slot, batch);
      if (!this.#flushScheduled) {
        this.#flushScheduled = true;
        setImmediate(this.#flushOpen);
      }
    }
    const promise = queue(batch, ops, time);
    batch.call.add(this.#space, ops, mode, false, time);
    if (batch.call.requests >= MAX_BATCH_REQUESTS || batch.call.ops >= MAX_BATCH_OPS) {
      this.#open.delete(slot);
      this.#send(batch);
    }
    return promise;
  }

  /** One call for one request alone, sent now (a Cluster group): results in op order. */
  sendAlone(
    ops: readonly StoreOp[],
    mode: EvalMode,
    consumeNothing: boolean,
    time: ScriptTime,
  ): Promise<EvalResult> {
    this.flush();
    const batch = newBatch();
    const promise = queue(batch, ops, time);
    batch.call.add(this.#space, ops, mode, consumeNothing, time);
    this.#send(batch);
    return promise;
  }

  /**
   * Sends the open batches now. Called ahead of every other command, so that commands go out in the
   * order they were asked for (a reset right after a check applies after it, as without batching).
   */
  flush(): void {
    if (this.#open.size === 0) return;
    for (const batch of this.#open.values()) this.#send(batch);
    this.#open.clear();
  }

  /** One script call for the whole batch; a failed call rejects every request in it. */
  #send(batch: Batch): void {
    const { requests, call } = batch;
    runScript(this.#connection, this.#script, call.keys, call.args()).then(
      (reply) => {
        decodeCheckReply(
          reply,
          requests.length,
          (r) => (requests[r] as QueuedRequest).ops,
          (r, results, serverMs) => {
            const request = requests[r] as QueuedRequest;
            if (results instanceof Error) request.reject(results);
            else request.resolve({ nowMs: decidedAt(request.time, serverMs), results });
          },
        );
      },
      (error: unknown) => {
        for (const request of requests) request.reject(error);
      },
    );
  }
}

function newBatch(): Batch {
  return { requests: [], call: new CheckCall() };
}

function queue(batch: Batch, ops: readonly StoreOp[], time: ScriptTime): Promise<EvalResult> {
  return new Promise<EvalResult>((resolve, reject) => {
    batch.requests.push({ ops, time, resolve, reject });
  });
}
