// The Redis store: limits shared by every process through Redis (standalone, Sentinel or Cluster), decided in Lua.
import type { Cluster, Redis } from 'ioredis';
import { REDIS_STORE_DEFAULTS } from '../defaults.js';
import { RateLimitConfigError } from '../errors.js';
import { assertKnownFields } from '../known-fields.js';
import type { LockInfo } from '../types.js';
import { CheckCall, decodeResults, integers, OpTable, REFUND_FIELDS, unexpected } from './redis-codec.js';
import { escapeIdentity, lockIndexKey, opKeys, resetChannel, tagSlot } from './redis-keys.js';
import { loadScripts, type RedisScripts, runScript } from './redis-scripts.js';
import type { EvalMode, EvalResult, OpResult, Refund, Store, StoreOp, StoreRule } from './store.js';

export interface RedisStoreOptions {
  /**
   * An ioredis client: `Redis` (standalone, or Sentinel through its `sentinels` option) or `Cluster`.
   * The store never closes it. Fail-fast settings (`enableOfflineQueue: false`, a `commandTimeout`)
   * let the limiter's `onStoreError` policy act quickly during an outage.
   */
  client: Redis | Cluster;
  /** Prefix of every key and of the reset channel; must not contain `{` or `}`. @default 'rk' */
  prefix?: string;
  /** Replaces the Redis server's clock (epoch ms), for tests; sent to every script. @default the server's TIME */
  clock?: () => number;
  /** How often the offset to the server's clock (for calendar periods) is read again. @default 60000 */
  clockSyncIntervalMs?: number;
}

/** One script call: the indexes of the ops whose keys share a slot. */
type Group = number[];

/** A request waiting in a batch, and how to settle it. */
interface Pending {
  readonly ops: readonly StoreOp[];
  /** The injected clock's time, or '' for the server's. */
  readonly nowArg: string;
  resolve(result: EvalResult): void;
  reject(error: unknown): void;
}

/** Requests that go out together as one call of lua/check.lua (all their keys in one slot). */
interface Batch {
  readonly requests: Pending[];
  readonly call: CheckCall;
}

/**
 * A batch is sent as soon as it holds this many requests or ops, without waiting for the end of the
 * event-loop phase. Under load this keeps two or more batches in flight, so that Redis runs one while
 * this process reads the last reply and fills the next (measured: 64 decisions in flight go faster as
 * two batches of 32 than as one of 64); and it bounds how long one script run holds Redis.
 */
const MAX_BATCH_REQUESTS = 32;
const MAX_BATCH_OPS = 256;

/**
 * Keeps limits in Redis so that every process and machine shares them. Requests whose keys share a
 * slot are decided by lua/check.lua (all their rules, all-or-nothing); those made in the same turn of
 * the event loop go out together as one EVALSHA that decides them in turn, each as if it were alone.
 * The Redis server's clock is the time unless `clock` is given.
 * @example
 * const store = new RedisStore({ client: new Redis(process.env.REDIS_URL) });
 * const limiter = createLimiter({ store, rules });
 */
export class RedisStore implements Store {
  readonly local = false;
  readonly #client: Redis | Cluster;
  readonly #cluster: boolean;
  readonly #prefix: string;
  readonly #clock: (() => number) | undefined;
  readonly #scripts: RedisScripts;
  readonly #timer: NodeJS.Timeout | undefined;
  readonly #listeners = new Set<(rule: string, key: string) => void>();
  #subscriber: Redis | Cluster | undefined;
  /** Server time minus local time, ms, from the last TIME. */
  #offsetMs = 0;
  /** Last time handed out: the store's clock never runs backwards. */
  #lastNow = 0;
  /** Batches being filled, by slot (one, slot 0, on a standalone server), sent when the phase ends. */
  readonly #open = new Map<number, Batch>();
  #flushScheduled = false;
  readonly #flushOpen = () => {
    this.#flushScheduled = false;
    this.#flush();
  };

  constructor(options: RedisStoreOptions) {
    const client = options?.client as (Redis | Cluster) | undefined;
    if (typeof client?.evalsha !== 'function') {
      throw new RateLimitConfigError(
        'ERR_OPTION',
        'RedisStore: client must be an ioredis Redis or Cluster instance',
      );
    }
    assertKnownFields(options, ['client', 'prefix', 'clock', 'clockSyncIntervalMs'], 'RedisStore');
    const prefix = options.prefix ?? REDIS_STORE_DEFAULTS.prefix;
    if (typeof prefix !== 'string' || prefix === '' || /[{}]/.test(prefix)) {
      throw new RateLimitConfigError(
        'ERR_OPTION',
        `RedisStore: prefix must be a non-empty string without '{' or '}', got ${JSON.stringify(prefix)}`,
      );
    }
    this.#client = client;
    this.#cluster = (client as { isCluster?: boolean }).isCluster === true;
    this.#prefix = prefix;
    this.#clock = options.clock;
    this.#scripts = loadScripts();
    if (this.#clock === undefined) {
      void this.#syncClock();
      this.#timer = setInterval(
        () => void this.#syncClock(),
        options.clockSyncIntervalMs ?? REDIS_STORE_DEFAULTS.clockSyncIntervalMs,
      );
      this.#timer.unref();
    }
  }

  now(): number {
    const now = this.#clock !== undefined ? this.#clock() : Date.now() + this.#offsetMs;
    if (now > this.#lastNow) this.#lastNow = now;
    return this.#lastNow;
  }

  /**
   * One script call when every op's keys share a slot (always on a standalone server), shared with
   * the other requests made in the same turn of the event loop. On a Cluster, a request over several
   * slots is decided group by group in op order; when one denies, what the groups before it consumed
   * is refunded, so nothing is over-admitted and the answer is all-or-nothing overall.
   */
  async evaluate(ops: readonly StoreOp[], mode: EvalMode): Promise<EvalResult> {
    if (ops.length === 0) return { nowMs: this.now(), results: [] };
    // An injected clock is read once, so every group of a Cluster request decides at the same time.
    const nowArg = this.#nowArg();
    const slot = this.#slotOf(ops);
    const result =
      slot === undefined
        ? await this.#evaluateGroups(ops, mode, nowArg)
        : await this.#enqueue(slot, ops, mode, nowArg);
    if (result.results.some((r) => r.lockedNow)) await this.#indexLocks(ops, result.results, nowArg);
    return result;
  }

  /** A Cluster request over several slots: one call per slot, in op order. */
  async #evaluateGroups(ops: readonly StoreOp[], mode: EvalMode, nowArg: string): Promise<EvalResult> {
    const groups = this.#groups(ops);
    const results: OpResult[] = new Array(ops.length);
    let nowMs: number | undefined;
    const decide = async (group: Group, groupMode: EvalMode, consumeNothing: boolean) => {
      const out = await this.#check(ops, group, groupMode, consumeNothing, nowArg);
      nowMs ??= out.nowMs;
      group.forEach((i, k) => {
        results[i] = out.results[k] as OpResult;
      });
    };
    if (mode !== 'check') {
      await Promise.all(groups.map((group) => decide(group, mode, false)));
    } else {
      for (let g = 0; g < groups.length; g++) {
        const group = groups[g] as Group;
        await decide(group, 'check', false);
        if (!group.some((i) => denies(ops[i] as StoreOp, results[i] as OpResult))) continue;
        // Decide the later groups without consuming (their lockouts still lock) and undo the earlier ones.
        await Promise.all([
          ...groups.slice(0, g).map((done) => this.#undo(ops, done, results, nowArg)),
          ...groups.slice(g + 1).map((later) => decide(later, 'check', true)),
        ]);
        break;
      }
    }
    return { nowMs: nowArg !== '' ? Number(nowArg) : (nowMs as number), results };
  }

  async refund(refunds: readonly Refund[]): Promise<void> {
    if (refunds.length === 0) return;
    this.#flush();
    const ops = refunds.map((r) => r.op);
    await Promise.all(
      this.#groups(ops).map((group) =>
        this.#refundGroup(
          group.map((i) => refunds[i] as Refund),
          this.#nowArg(),
        ),
      ),
    );
  }

  async clear(rule: StoreRule, key: string): Promise<void> {
    this.#flush();
    await this.#client.del(opKeys(this.#prefix, rule.name, key).count);
  }

  async reset(rule: StoreRule, key: string): Promise<boolean> {
    this.#flush();
    const keys = opKeys(this.#prefix, rule.name, key);
    const reply = await runScript(this.#client, this.#scripts.reset, 2, [
      keys.count,
      keys.lock,
      this.#nowArg(),
    ]);
    const [wasLocked, level] = integers(reply, 2, 'reset');
    await Promise.all([
      level !== undefined && level > 0
        ? this.#client.zrem(lockIndexKey(this.#prefix, rule.name), `${level}:${key}`)
        : undefined,
      this.#client.publish(resetChannel(this.#prefix), JSON.stringify([rule.name, key])),
    ]);
    return wasLocked === 1;
  }

  async locked(rule: StoreRule, limit: number): Promise<LockInfo[]> {
    if (!(limit > 0)) return [];
    this.#flush();
    const nowMs = this.now();
    const count = Number.isFinite(limit) ? Math.floor(limit) : -1;
    const flat = await this.#client.zrangebyscore(
      lockIndexKey(this.#prefix, rule.name),
      `(${nowMs}`,
      '+inf',
      'WITHSCORES',
      'LIMIT',
      0,
      count,
    );
    const out: LockInfo[] = [];
    for (let i = 0; i + 1 < flat.length; i += 2) {
      const member = flat[i] as string;
      const lockedUntil = Number(flat[i + 1]);
      const colon = member.indexOf(':');
      out.push({
        rule: rule.name,
        key: member.slice(colon + 1),
        remainingMs: lockedUntil - nowMs,
        lockedUntil,
        level: Number(member.slice(0, colon)),
      });
    }
    return out;
  }

  /**
   * Subscribes (once, lazily, on a duplicate connection) to resets announced by any process. After a
   * reconnection `listener('', '')` is called: resets announced while the subscriber was away were
   * missed, so local caches should forget everything.
   */
  onReset(listener: (rule: string, key: string) => void): void {
    this.#listeners.add(listener);
    if (this.#subscriber !== undefined) return;
    const subscriber = this.#client.duplicate();
    const channel = resetChannel(this.#prefix);
    // It reconnects by itself; an 'error' without a listener would crash the process.
    subscriber.on('error', () => {});
    subscriber.on('message', (_channel: string, message: string) => {
      let parsed: unknown;
      try {
        parsed = JSON.parse(message);
      } catch {
        return;
      }
      if (!Array.isArray(parsed) || typeof parsed[0] !== 'string' || typeof parsed[1] !== 'string') return;
      for (const notify of this.#listeners) notify(parsed[0], parsed[1]);
    });
    // Subscribed on every 'ready', not once at creation: with the recommended enableOfflineQueue: false
    // a command sent before the connection is up fails at once, and the subscription would never be made.
    let subscribed = false;
    subscriber.on('ready', () => {
      subscriber.subscribe(channel).then(
        () => {
          if (subscribed) for (const notify of this.#listeners) notify('', '');
          subscribed = true;
        },
        () => {},
      );
    });
    if (subscriber.status === 'wait') subscriber.connect().catch(() => {});
    this.#subscriber = subscriber;
  }

  /** Stops the clock sync and the reset subscriber; the client passed in stays open (it is the caller's). */
  async close(): Promise<void> {
    if (this.#timer !== undefined) clearInterval(this.#timer);
    this.#listeners.clear();
    this.#subscriber?.disconnect();
    this.#subscriber = undefined;
  }

  /**
   * Adds a request to the batch of its slot. The batch goes out when the current phase of the event
   * loop ends (every request made meanwhile is in it), or at once when it is full.
   */
  #enqueue(slot: number, ops: readonly StoreOp[], mode: EvalMode, nowArg: string): Promise<EvalResult> {
    let batch = this.#open.get(slot);
    if (batch === undefined) {
      batch = newBatch();
      this.#open.set(slot, batch);
      if (!this.#flushScheduled) {
        this.#flushScheduled = true;
        setImmediate(this.#flushOpen);
      }
    }
    const promise = new Promise<EvalResult>((resolve, reject) => {
      (batch as Batch).requests.push({ ops, nowArg, resolve, reject });
    });
    batch.call.add(this.#prefix, ops, mode, false, nowArg);
    if (batch.requests.length >= MAX_BATCH_REQUESTS || batch.call.ops >= MAX_BATCH_OPS) {
      this.#open.delete(slot);
      this.#send(batch);
    }
    return promise;
  }

  /**
   * Sends the open batches now. Also called ahead of every other command, so that commands go out in
   * the order they were asked for (a reset right after a check applies after it, as without batching).
   */
  #flush(): void {
    if (this.#open.size === 0) return;
    for (const batch of this.#open.values()) this.#send(batch);
    this.#open.clear();
  }

  /** One EVALSHA for the whole batch; a failed call rejects every request in it. */
  #send(batch: Batch): void {
    const { requests, call } = batch;
    runScript(this.#client, this.#scripts.check, call.keys.length, call.args()).then(
      (reply) => {
        if (!Array.isArray(reply) || typeof reply[0] !== 'number') {
          const error = unexpected(reply, 'check');
          for (const request of requests) request.reject(error);
          return;
        }
        const serverMs = reply[0];
        let at = 1;
        for (let r = 0; r < requests.length; r++) {
          const request = requests[r] as Pending;
          const head: unknown = reply[at];
          if (typeof head === 'string') {
            // Redis's own message (e.g. "OOM command not allowed ..."), as a failed call would give it.
            request.reject(new Error(head));
            at++;
            continue;
          }
          const results: OpResult[] = new Array(request.ops.length);
          const next = decodeResults(reply, at, request.ops, results);
          if (next < 0) {
            // The reply has lost its shape: nothing after this point can be read either.
            const error = unexpected(reply, 'check');
            for (let rest = r; rest < requests.length; rest++) (requests[rest] as Pending).reject(error);
            return;
          }
          at = next;
          request.resolve({ nowMs: request.nowArg !== '' ? Number(request.nowArg) : serverMs, results });
        }
      },
      (error: unknown) => {
        for (const request of requests) request.reject(error);
      },
    );
  }

  /** One script call for the ops of `group` alone: results in group order. */
  #check(
    ops: readonly StoreOp[],
    group: Group,
    mode: EvalMode,
    consumeNothing: boolean,
    nowArg: string,
  ): Promise<EvalResult> {
    const groupOps = group.map((i) => ops[i] as StoreOp);
    this.#flush();
    const batch = newBatch();
    const promise = new Promise<EvalResult>((resolve, reject) => {
      batch.requests.push({ ops: groupOps, nowArg, resolve, reject });
    });
    batch.call.add(this.#prefix, groupOps, mode, consumeNothing, nowArg);
    this.#send(batch);
    return promise;
  }

  /** Refunds what an admitted group consumed and reports its state as it is now (cost 0, receipt 0). */
  async #undo(ops: readonly StoreOp[], group: Group, results: OpResult[], nowArg: string): Promise<void> {
    const consumed = group.filter((i) => {
      const result = results[i] as OpResult;
      return result.allowed && !result.locked && (ops[i] as StoreOp).cost > 0;
    });
    if (consumed.length === 0) return;
    const refunds = consumed.map((i) => ({
      op: ops[i] as StoreOp,
      receipt: (results[i] as OpResult).receipt,
    }));
    const after = await this.#refundGroup(refunds, nowArg);
    consumed.forEach((i, k) => {
      const at = k * REFUND_FIELDS;
      const [remaining, resetMs, count] = after.slice(at, at + REFUND_FIELDS) as [number, number, number];
      results[i] = { ...(results[i] as OpResult), remaining, resetMs, count, receipt: 0 };
    });
  }

  async #refundGroup(refunds: readonly Refund[], nowArg: string): Promise<number[]> {
    const keys: string[] = [];
    const ops = new OpTable();
    const body = [nowArg, String(refunds.length)];
    for (const { op, receipt } of refunds) {
      keys.push(opKeys(this.#prefix, op.rule.name, op.key).count);
      body.push(ops.ref(op).index, String(receipt));
    }
    const reply = await runScript(
      this.#client,
      this.#scripts.refund,
      keys.length,
      keys.concat(ops.fields(), body),
    );
    return integers(reply, refunds.length * REFUND_FIELDS, 'refund');
  }

  /**
   * Adds the locks this evaluation placed to their rules' lock indexes. The index lives in another
   * slot than the keys, hence a separate call; it runs only when a lock was placed (rare). It only
   * feeds `locked()`: a failure here must not turn a decision already made into a store error.
   */
  async #indexLocks(ops: readonly StoreOp[], results: readonly OpResult[], nowArg: string): Promise<void> {
    const byRule = new Map<string, string[]>();
    results.forEach((result, i) => {
      if (!result.lockedNow) return;
      const op = ops[i] as StoreOp;
      const args = byRule.get(op.rule.name) ?? [nowArg];
      args.push(String(result.lockedUntil), `${result.level}:${op.key}`);
      byRule.set(op.rule.name, args);
    });
    if (byRule.size === 0) return;
    await Promise.all(
      [...byRule].map(([rule, args]) =>
        runScript(this.#client, this.#scripts.lockIndex, 1, [
          lockIndexKey(this.#prefix, rule),
          ...args,
        ]).catch(() => {}),
      ),
    );
  }

  /** The slot every key of the request hashes to (0 on a standalone server); undefined when several. */
  #slotOf(ops: readonly StoreOp[]): number | undefined {
    if (!this.#cluster) return 0;
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

  /** Standalone and Sentinel: one group, whatever the identities. Cluster: one per slot, in op order. */
  #groups(ops: readonly StoreOp[]): Group[] {
    if (!this.#cluster) return [ops.map((_, i) => i)];
    const bySlot = new Map<number, Group>();
    ops.forEach((op, i) => {
      const slot = tagSlot(opKeys(this.#prefix, op.rule.name, op.key).tag);
      const group = bySlot.get(slot);
      if (group === undefined) bySlot.set(slot, [i]);
      else group.push(i);
    });
    return [...bySlot.values()];
  }

  /** The time a script uses: the injected clock's, or '' for the server's own TIME. */
  #nowArg(): string {
    return this.#clock !== undefined ? String(this.now()) : '';
  }

  /** Reads the server's clock, so calendar periods computed here follow it. Failures keep the last offset. */
  async #syncClock(): Promise<void> {
    try {
      const before = Date.now();
      const [seconds, micros] = await this.#client.time();
      const local = (before + Date.now()) / 2;
      this.#offsetMs = Math.round(Number(seconds) * 1000 + Number(micros) / 1000 - local);
    } catch {
      // The next sync tries again; until then the local clock plus the last offset stands in.
    }
  }
}

function newBatch(): Batch {
  return { requests: [], call: new CheckCall() };
}

/** An enforced op that denies (dry-run ops never do). */
function denies(op: StoreOp, result: OpResult): boolean {
  return !result.allowed && !op.rule.dryRun;
}
