// Requests over several Cluster slots: decided slot group by slot group, earlier groups refunded when a later one denies.

import type { EvalMode, EvalResult, OpResult, Refund, StoreOp } from '../store.js';
import type { Batcher } from './batches.js';
import { REFUND_FIELDS, refundCall, renewCall } from './calls.js';
import type { KeySpace } from './check-call.js';
import { escapeIdentity } from './check-call.js';
import type { RedisConnection } from './connection/connection.js';
import type { RedisScript } from './function-library.js';
import { tagSlot } from './keys.js';
import { decidedAt, type ScriptTime } from './op-text.js';
import { integers, runScript } from './replies.js';

/** The indexes of the ops of one request whose keys share a slot: one script call. */
type Group = number[];

/**
 * A script call may only touch keys of one slot on a Cluster. A request whose identities land in
 * several slots is decided group by group, in op order: when one group denies, what the groups before
 * it consumed is refunded and the later groups are decided without consuming (their lockouts still
 * lock), so nothing is over-admitted and the answer is all-or-nothing overall. Refunds go out one call
 * per slot group too (a single group on a standalone server).
 */
export class SlotGroups {
  readonly #connection: RedisConnection;
  readonly #batcher: Batcher;
  readonly #refundScript: RedisScript;
  readonly #renewScript: RedisScript;
  readonly #space: KeySpace;

  constructor(
    connection: RedisConnection,
    batcher: Batcher,
    scripts: { refund: RedisScript; renew: RedisScript },
    space: KeySpace,
  ) {
    this.#connection = connection;
    this.#batcher = batcher;
    this.#refundScript = scripts.refund;
    this.#renewScript = scripts.renew;
    this.#space = space;
  }

  /** The slot every key of the request hashes to (0 on a standalone server); undefined when several. */
  slotOf(ops: readonly StoreOp[]): number | undefined {
    if (!this.#connection.cluster) return 0;
    let identity: string | undefined;
    let slot: number | undefined;
    for (const op of ops) {
      if (op.key === identity) continue;
      identity = op.key;
      const next = tagSlot(escapeIdentity(identity));
      if (slot !== undefined && next !== slot) return undefined;
      slot = next;
    }
    return slot;
  }

  /** A Cluster request over several slots: one call per slot, in op order (see the class). */
  async evaluate(ops: readonly StoreOp[], mode: EvalMode, time: ScriptTime): Promise<EvalResult> {
    const groups = this.#groups(ops);
    const results: OpResult[] = new Array(ops.length);
    let serverMs = 0;
    const decide = async (group: Group, consumeNothing: boolean) => {
      const out = await this.#batcher.sendAlone(
        group.map((i) => ops[i] as StoreOp),
        mode,
        consumeNothing,
        time,
      );
      serverMs ||= out.nowMs;
      group.forEach((i, k) => {
        results[i] = out.results[k] as OpResult;
      });
    };
    if (mode !== 'check') {
      await Promise.all(groups.map((group) => decide(group, false)));
    } else {
      for (let g = 0; g < groups.length; g++) {
        const group = groups[g] as Group;
        await decide(group, false);
        if (!group.some((i) => denies(ops[i] as StoreOp, results[i] as OpResult))) continue;
        await Promise.all([
          ...groups.slice(0, g).map((done) => this.#undo(ops, done, results, time)),
          ...groups.slice(g + 1).map((later) => decide(later, true)),
        ]);
        break;
      }
    }
    return { nowMs: decidedAt(time, serverMs), results };
  }

  /**
   * Gives reservations back (releases slots), no figures read: one call per slot group; one call and its
   * own promise alone on a single server (a release per request: no group made, no promise around it).
   * Resolves, per refund, whether what it gave back was still held (a slot not lapsed).
   */
  refund(refunds: readonly Refund[], time: ScriptTime): Promise<boolean[]> {
    if (!this.#connection.cluster) return this.#releaseGroup(refunds, time);
    const groups = this.#groups(refunds.map((r) => r.op));
    const held: boolean[] = new Array(refunds.length);
    return Promise.all(
      groups.map((group) =>
        this.#releaseGroup(
          group.map((i) => refunds[i] as Refund),
          time,
        ).then((answer) => {
          group.forEach((i, k) => {
            held[i] = answer[k] as boolean;
          });
        }),
      ),
    ).then(() => held);
  }

  /** One call of lua/refund.lua for refunds whose keys share a slot, no figures read: per refund, still held. */
  #releaseGroup(refunds: readonly Refund[], time: ScriptTime): Promise<boolean[]> {
    const { keys, args } = refundCall(this.#space, refunds, time, true);
    return runScript(this.#connection, this.#refundScript, keys, args).then((reply) =>
      integers(reply, refunds.length, 'refund').map((flag) => flag === 1),
    );
  }

  /** Renews held concurrency slots: one call per slot group; per slot, whether it was still held. */
  async renew(slots: readonly Refund[], time: ScriptTime): Promise<boolean[]> {
    const held: boolean[] = new Array(slots.length);
    await Promise.all(
      this.#groups(slots.map((s) => s.op)).map(async (group) => {
        const { keys, args } = renewCall(
          this.#space,
          group.map((i) => slots[i] as Refund),
          time,
        );
        const reply = integers(
          await runScript(this.#connection, this.#renewScript, keys, args),
          group.length,
          'renew',
        );
        group.forEach((i, k) => {
          held[i] = reply[k] === 1;
        });
      }),
    );
    return held;
  }

  /** Refunds what an admitted group consumed and reports its state as it is now (cost 0, receipt 0). */
  async #undo(ops: readonly StoreOp[], group: Group, results: OpResult[], time: ScriptTime): Promise<void> {
    const consumed = group.filter((i) => {
      const result = results[i] as OpResult;
      return result.allowed && !result.locked && (ops[i] as StoreOp).cost > 0;
    });
    if (consumed.length === 0) return;
    const refunds = consumed.map((i) => ({
      op: ops[i] as StoreOp,
      receipt: (results[i] as OpResult).receipt,
    }));
    const after = await this.#refundGroup(refunds, time);
    consumed.forEach((i, k) => {
      const at = k * REFUND_FIELDS;
      const [remaining, resetMs, count] = after.slice(at, at + REFUND_FIELDS) as [number, number, number];
      results[i] = { ...(results[i] as OpResult), remaining, resetMs, count, receipt: 0 };
    });
  }

  async #refundGroup(refunds: readonly Refund[], time: ScriptTime): Promise<number[]> {
    const { keys, args } = refundCall(this.#space, refunds, time);
    const reply = await runScript(this.#connection, this.#refundScript, keys, args);
    return integers(reply, refunds.length * REFUND_FIELDS, 'refund');
  }

  /** Standalone and Sentinel: one group, whatever the identities. Cluster: one per slot, in op order. */
  #groups(ops: readonly StoreOp[]): Group[] {
    if (!this.#connection.cluster) return [ops.map((_, i) => i)];
    const bySlot = new Map<number, Group>();
    ops.forEach((op, i) => {
      const slot = tagSlot(escapeIdentity(op.key));
      const group = bySlot.get(slot);
      if (group === undefined) bySlot.set(slot, [i]);
      else group.push(i);
    });
    return [...bySlot.values()];
  }
}

/** An enforced op that denies (dry-run ops never do). */
function denies(op: StoreOp, result: OpResult): boolean {
  return !result.allowed && !op.rule.dryRun;
}
