// Batching: the requests of one event-loop phase that one node can decide go out as one call of lua/check.lua.

import type { EvalMode, EvalResult, StoreOp } from '../store.js';
import type { KeySpace } from './check-call.js';
import { CheckCall } from './check-call.js';
import type { RedisConnection } from './connection/connection.js';
import type { RedisScript } from './function-library.js';
import { decidedAt, hasLockout, type ScriptTime } from './op-text.js';
import { decodeCheckReply, runScript } from './replies.js';
import { SlotMap } from './slot-map.js';

/** What settles a caller's promise, kept until the reply comes: the first of `resolve` or `reject` wins. */
export interface Settler<T> {
  resolve(value: T): void;
  reject(error: unknown): void;
}

/** A request waiting in a batch, and how to settle it. */
interface QueuedRequest {
  readonly ops: readonly StoreOp[];
  readonly mode: EvalMode;
  readonly time: ScriptTime;
  readonly slot: number;
  readonly into: Settler<EvalResult>;
}

/** Requests that go out together as one call of lua/check.lua. */
interface Batch {
  readonly requests: QueuedRequest[];
  readonly call: CheckCall;
  /** The slot of the first request, and whether another request is in another slot. */
  readonly slot: number;
  crossSlot: boolean;
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
 * Batches of one slot (or master) in Redis at once; further full batches wait here and go out as
 * replies come back. Redis writes its replies once it has run all it read from a connection, so an
 * unbounded pipeline (a burst of thousands of decisions) keeps it silent for the whole burst, which on
 * starved cores looks like a stopped server to the failure policy. Two keep Redis busy (it runs one
 * while this process reads the other's reply) and bound its silence to about two batches' work.
 */
const MAX_BATCHES_IN_FLIGHT = 2;

/**
 * What a Cluster node answers, inside the script, for a key of a slot it does not serve (the slot map
 * was stale, or the slot is being migrated): the request failed before writing anything.
 */
const NOT_LOCAL = /non local key|cluster is down|do not hash to the same slot/;
/** Runs `task` on a later turn of the event loop: `setImmediate` where the runtime has it, else a 0 ms timeout. */
export const nextTurn: (task: () => void) => void =
  typeof setImmediate === 'function' ? (task) => void setImmediate(task) : (task) => void setTimeout(task, 0);

/** What Redis before 7 (or a server refusing the flag) answers for the cross-slot script. */
const NO_CROSS_SLOT = /^ERR.*(compil|shebang|flag)/i;

/**
 * Collects requests into batches and sends each when the current phase of the event loop ends, or at
 * once when it is full; the script decides the requests of a batch in turn, each as if it were alone.
 * Standalone: one batch. Cluster: one per slot, and, for requests without a lockout, one per master
 * (the cross-slot script, Redis 7+), so that a Cluster, where distinct identities are in distinct
 * slots, batches as a single server does. A request of such a batch whose slot the node turns out
 * not to serve is sent again on its own, routed by its key as any call.
 */
export class Batcher {
  readonly #connection: RedisConnection;
  readonly #script: RedisScript;
  readonly #crossSlotScript: RedisScript;
  readonly #space: KeySpace;
  /** Cluster only: the master of each slot, to batch requests of several slots. */
  readonly #slots: SlotMap | undefined;
  #crossSlot: boolean;
  /** Batches being filled, by slot (a number) or by master (its address). */
  readonly #open = new Map<number | string, Batch>();
  /** Batches sent and not answered yet, by the key of `#open`. */
  readonly #inFlight = new Map<number | string, number>();
  /** Full batches waiting for one of their key's batches in flight to be answered, oldest first. */
  readonly #waiting = new Map<number | string, Batch[]>();
  #flushScheduled = false;
  readonly #flushOpen = () => {
    this.#flushScheduled = false;
    for (const [key, batch] of this.#open) this.#dispatch(key, batch);
    this.#open.clear();
  };

  constructor(
    connection: RedisConnection,
    script: RedisScript,
    crossSlotScript: RedisScript,
    space: KeySpace,
  ) {
    this.#connection = connection;
    this.#script = script;
    this.#crossSlotScript = crossSlotScript;
    this.#space = space;
    this.#slots = connection.cluster ? new SlotMap(connection) : undefined;
    this.#crossSlot = connection.cluster;
  }

  /**
   * Adds a request (all its keys in `slot`) to the batch of its slot, or of its slot's master; `into`
   * is settled with its result.
   */
  enqueue(
    slot: number,
    ops: readonly StoreOp[],
    mode: EvalMode,
    time: ScriptTime,
    into: Settler<EvalResult>,
  ): void {
    const key = this.#batchKey(slot, ops);
    if (this.#connection.isolatedRequests === true) {
      const alone = newBatch(slot);
      alone.requests.push({ ops, mode, time, slot, into });
      alone.call.add(this.#space, ops, mode, false, time);
      this.#send(alone);
      return;
    }
    let batch = this.#open.get(key);
    if (batch === undefined) {
      batch = newBatch(slot);
      this.#open.set(key, batch);
      if (!this.#flushScheduled) {
        this.#flushScheduled = true;
        nextTurn(this.#flushOpen);
      }
    }
    if (slot !== batch.slot) batch.crossSlot = true;
    batch.requests.push({ ops, mode, time, slot, into });
    batch.call.add(this.#space, ops, mode, false, time);
    if (batch.call.requests >= MAX_BATCH_REQUESTS || batch.call.ops >= MAX_BATCH_OPS) {
      this.#open.delete(key);
      this.#dispatch(key, batch);
    }
  }

  /** One call for one request alone, sent now (a Cluster group): results in op order. */
  sendAlone(
    ops: readonly StoreOp[],
    mode: EvalMode,
    consumeNothing: boolean,
    time: ScriptTime,
  ): Promise<EvalResult> {
    this.flush();
    const batch = newBatch(0);
    const promise = queue(batch, ops, mode, time, 0);
    batch.call.add(this.#space, ops, mode, consumeNothing, time);
    this.#send(batch);
    return promise;
  }

  /**
   * Sends the open batches now. Called ahead of every other command, so that commands go out in the
   * order they were asked for (a reset right after a check applies after it, as without batching).
   */
  flush(): void {
    for (const [key, waiting] of this.#waiting) {
      this.#waiting.delete(key);
      for (const batch of waiting) this.#send(batch);
    }
    if (this.#open.size === 0) return;
    for (const batch of this.#open.values()) this.#send(batch);
    this.#open.clear();
  }

  /** Sends `batch` now when fewer than MAX_BATCHES_IN_FLIGHT of its key are in Redis, else after them. */
  #dispatch(key: number | string, batch: Batch): void {
    const inFlight = this.#inFlight.get(key) ?? 0;
    if (inFlight >= MAX_BATCHES_IN_FLIGHT) {
      const waiting = this.#waiting.get(key);
      if (waiting === undefined) this.#waiting.set(key, [batch]);
      else waiting.push(batch);
      return;
    }
    this.#inFlight.set(key, inFlight + 1);
    this.#send(batch, () => {
      const left = (this.#inFlight.get(key) ?? 1) - 1;
      if (left === 0) this.#inFlight.delete(key);
      else this.#inFlight.set(key, left);
      const waiting = this.#waiting.get(key);
      const next = waiting?.shift();
      if (waiting?.length === 0) this.#waiting.delete(key);
      if (next !== undefined) this.#dispatch(key, next);
    });
  }

  /** Stops the slot map's pending read. */
  close(): void {
    this.#slots?.close();
  }

  /**
   * The slot, or on a Cluster the master of the slot when it is known and the request may share a
   * call with other slots: it has no lockout, whose lock index a cross-slot call would write without
   * having read it first (see lua/check.lua).
   */
  #batchKey(slot: number, ops: readonly StoreOp[]): number | string {
    if (!this.#crossSlot || this.#slots === undefined) return slot;
    // A request with a lockout, or reading a rule-wide limit (the one rule-limits hash of a call is its
    // slot's), stays in its slot's batch.
    for (let i = 0; i < ops.length; i++) {
      const rule = (ops[i] as StoreOp).rule;
      if (hasLockout(rule) || this.#space.overrides?.readsRuleLimit(rule.name) === true) return slot;
    }
    return this.#slots.masterOf(slot) ?? slot;
  }

  /**
   * One script call for the whole batch; a failed call rejects every request in it. `answered` runs
   * as the reply (or the failure) comes back, before the requests are settled, so that the next batch
   * is on its way to Redis while this one's decisions are made.
   */
  #send(batch: Batch, answered?: () => void): void {
    const { requests, call } = batch;
    const crossSlot = batch.crossSlot;
    const reply = crossSlot
      ? runScript(this.#connection, this.#crossSlotScript, call.keys.slice(0, 1), crossSlotArgs(call))
      : runScript(this.#connection, this.#script, call.allKeys(), call.args());
    if (answered !== undefined) reply.then(answered, answered);
    reply.then(
      (reply) => {
        decodeCheckReply(
          reply,
          requests.length,
          (r) => (requests[r] as QueuedRequest).ops,
          (r) => (requests[r] as QueuedRequest).time,
          (r, results, serverMs) => {
            const request = requests[r] as QueuedRequest;
            if (!(results instanceof Error))
              request.into.resolve({ nowMs: decidedAt(request.time, serverMs), results });
            else if (crossSlot && NOT_LOCAL.test(results.message)) this.#again(request);
            else request.into.reject(results);
          },
        );
      },
      (error: unknown) => {
        if (crossSlot && error instanceof Error && NO_CROSS_SLOT.test(error.message)) {
          // Nothing ran: every request goes again, each to its own slot.
          this.#crossSlot = false;
          for (const request of requests) this.#again(request);
          return;
        }
        for (const request of requests) request.into.reject(error);
      },
    );
  }

  /** A request of a cross-slot call that its node could not decide: alone, routed by its own keys. */
  #again(request: QueuedRequest): void {
    this.#slots?.refresh();
    const batch = newBatch(request.slot);
    batch.requests.push(request);
    batch.call.add(this.#space, request.ops, request.mode, false, request.time);
    this.#send(batch);
  }
}

/** The cross-slot script's ARGV: the number of keys, the keys, then lua/check.lua's own ARGV. */
function crossSlotArgs(call: CheckCall): string[] {
  return [String(call.keys.length), ...call.keys, ...call.args()];
}

function newBatch(slot: number): Batch {
  return { requests: [], call: new CheckCall(), slot, crossSlot: false };
}

function queue(
  batch: Batch,
  ops: readonly StoreOp[],
  mode: EvalMode,
  time: ScriptTime,
  slot: number,
): Promise<EvalResult> {
  return new Promise<EvalResult>((resolve, reject) => {
    batch.requests.push({ ops, mode, time, slot, into: { resolve, reject } });
  });
}
