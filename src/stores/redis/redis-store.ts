// The Redis store: limits shared by every process through Redis (standalone, Sentinel or Cluster), decided in Lua.

import { windowKind } from '../../algorithms/index.js';
import { assertKnownFields, fieldsOf } from '../../config/known-fields.js';
import { mustBe, refuse } from '../../config/refuse.js';
import { REDIS_STORE_DEFAULTS } from '../../defaults.js';
import type { LockInfo, RuleLimit } from '../../types.js';
import { Leases } from '../leasing/leases.js';
import { type LeasingOptions, leasingSettings } from '../leasing/leasing-options.js';
import type {
  EvalMode,
  EvalResult,
  HeldSlot,
  Refund,
  Store,
  StoreChangeListener,
  StoreLiveness,
  StoreOp,
  StoreRule,
} from '../store.js';
import { Batcher, nextTurn, type Settler } from './batches.js';
import { type KeySpace, opKeys } from './check-call.js';
import { connectionOf, type RedisClient } from './client.js';
import { SlotGroups } from './cluster-groups.js';
import type { RedisConnection } from './connection/connection.js';
import { Frees } from './frees.js';
import { loadScripts } from './function-library.js';
import { readHolders } from './holders.js';
import { readLocks } from './lock-index.js';
import { isGrouped, RedisClock, type ScriptTime } from './op-text.js';
import { Overrides } from './overrides.js';
import { Resets } from './resets.js';

export interface RedisStoreOptions {
  /**
   * The Redis client, whose kind the store finds by itself: an ioredis (5, 6) or iovalkey `Redis`
   * (standalone, or Sentinel through its `sentinels` option) or `Cluster`; a node-redis (`redis` 5, 6)
   * client from `createClient`, `createCluster` or `createSentinel`, connected (`await client.connect()`);
   * or an @upstash/redis `Redis` (Redis over HTTP, for edge runtimes: no subscription, see `liveness.staleAfterMs`).
   * The store never opens or closes it. Fail-fast settings (ioredis `enableOfflineQueue: false`,
   * node-redis `disableOfflineQueue: true`) let the limiter's `onStoreError` policy act at once during
   * an outage, and a fault then names its cause (ECONNREFUSED, ENOTFOUND, WRONGPASS).
   */
  client: RedisClient;
  /** Prefix of every key and of the reset channel; must not contain `{` or `}`. @default 'rk' */
  prefix?: string;
  /** Replaces the Redis server's clock (epoch ms), for tests; sent to every script. @default the server's TIME */
  clock?: () => number;
  /** How often the offset to the server's clock (for calendar periods) is read again. @default 60000 */
  clockSyncIntervalMs?: number;
  /**
   * An @upstash/redis client only (Redis over HTTP): the longest one request may take, the client's own
   * retries included, before it is aborted and the decisions in it fail into `onStoreError`. @default 5000
   */
  requestTimeoutMs?: number;
  /**
   * Leasing for hot keys: blocks of a hot key's units reserved in one call and admitted from without a
   * round trip, exactly (docs/exactness.md, "Leasing"). `true` takes the defaults. @default false
   */
  leasing?: boolean | LeasingOptions;
}

/**
 * Keeps limits in Redis so that every process and machine shares them. Requests whose keys share a
 * slot are decided by lua/check.lua (all their rules, all-or-nothing); those made in the same turn of
 * the event loop go out together as one script call that decides them in turn, each as if it were
 * alone. The Redis server's clock is the time unless `clock` is given.
 * @example
 * const store = new RedisStore({ client: new Redis(process.env.REDIS_URL) });
 * const limiter = createLimiter({ store, rules });
 */
const REDIS_STORE_FIELDS = fieldsOf<RedisStoreOptions>({
  client: true,
  prefix: true,
  clock: true,
  clockSyncIntervalMs: true,
  requestTimeoutMs: true,
  leasing: true,
});

/** Refunds sent together: at most this many per call (as decisions, 32 per call). */
const MAX_REFUNDS_PER_CALL = 32;

interface PendingRefunds {
  readonly refunds: Refund[];
  readonly time: ScriptTime;
  /** Each caller's settler, and in `sizes` the number of its refunds: its share of the answer, in order. */
  readonly waiters: Array<Settler<boolean[]>>;
  readonly sizes: number[];
}

export class RedisStore implements Store {
  readonly local = false;
  /** The client's first connection, how long its calls have waited unanswered, and a PING: see the failure policy. */
  readonly liveness: StoreLiveness;
  readonly #connection: RedisConnection;
  readonly #space: KeySpace;
  readonly #clock: RedisClock;
  readonly #batcher: Batcher;
  readonly #groups: SlotGroups;
  readonly #resets: Resets;
  readonly #overrides: Overrides;
  /** Refunds asked for in this turn of the event loop, sent together (see refund). */
  #refunds: PendingRefunds | undefined;
  readonly #frees: Frees;
  /** `onChange` listeners, told of what the subscriptions hear. */
  readonly #changeListeners = new Set<StoreChangeListener>();
  /** Blocks of hot keys' units (the `leasing` option); undefined when off. */
  readonly #leases: Leases | undefined;
  /** With `leasing` only: a decision answered from its keys' blocks and pools; else undefined (`evaluate`). */
  readonly evaluateSync?: (ops: readonly StoreOp[], mode: EvalMode) => EvalResult | undefined;

  constructor(options: RedisStoreOptions) {
    const requestTimeoutMs = options?.requestTimeoutMs;
    if (
      requestTimeoutMs !== undefined &&
      (typeof requestTimeoutMs !== 'number' ||
        !Number.isSafeInteger(requestTimeoutMs) ||
        requestTimeoutMs < 1)
    )
      refuse(
        'ERR_OPTION',
        'RedisStore',
        mustBe('requestTimeoutMs', 'a positive whole number of ms', requestTimeoutMs),
      );
    const connection = connectionOf(
      options?.client,
      requestTimeoutMs ?? REDIS_STORE_DEFAULTS.requestTimeoutMs,
    );
    assertKnownFields(options, REDIS_STORE_FIELDS, 'RedisStore');
    if (connection.subscribe !== undefined && requestTimeoutMs !== undefined)
      refuse(
        'ERR_OPTION',
        'RedisStore',
        'requestTimeoutMs applies to an @upstash/redis client (Redis over HTTP) only; ioredis and ' +
          'node-redis take their own command timeouts',
      );
    const prefix = options.prefix ?? REDIS_STORE_DEFAULTS.prefix;
    if (typeof prefix !== 'string' || prefix === '' || /[{}]/.test(prefix))
      refuse('ERR_OPTION', 'RedisStore', mustBe('prefix', "a non-empty string without '{' or '}'", prefix));
    const scripts = loadScripts();
    this.#connection = connection;
    const { liveness } = connection;
    this.liveness = {
      connecting: () => liveness.connecting(),
      silentSinceMs: () => liveness.silentSinceMs(),
      // One round trip (PING): resolves when Redis answers, rejects with the cause when it does not.
      ping: async () => {
        await connection.send('PING', []);
      },
      // Over HTTP (@upstash/redis) no subscription hears other processes: answers are relied on this long.
      ...(connection.subscribe === undefined ? { staleAfterMs: REDIS_STORE_DEFAULTS.httpStaleAfterMs } : {}),
    };
    const space = { prefix, cluster: connection.cluster };
    this.#resets = new Resets(connection, scripts.reset, space);
    this.#frees = new Frees(connection, prefix);
    this.#overrides = new Overrides(connection, scripts.override, space, this.#resets);
    // The scripts' keys: the override keys of the rules that have had an override.
    this.#space = { ...space, overrides: this.#overrides.reads };
    this.#clock = new RedisClock(
      connection,
      options.clock,
      options.clockSyncIntervalMs ?? REDIS_STORE_DEFAULTS.clockSyncIntervalMs,
    );
    this.#batcher = new Batcher(connection, scripts.check, scripts.checkCrossSlot, this.#space);
    this.#groups = new SlotGroups(connection, this.#batcher, scripts, this.#space);
    const leasing = leasingSettings(options.leasing, 'RedisStore');
    this.#leases =
      leasing &&
      new Leases(
        {
          evaluate: (ops, mode) =>
            new Promise((resolve, reject) => this.#evaluate(ops, mode, { resolve, reject })),
          refund: (refunds) => new Promise((resolve, reject) => this.#refund(refunds, { resolve, reject })),
          renew: (slots) => this.#renew(slots),
          now: () => this.now(),
          announce: (refunds) => this.#resets.announceReturned(refunds),
        },
        leasing,
        // Resets and limit changes announced by any process end the key's blocks (units given back do not).
        () => this.#resets.listen((rule, key, o, back) => back || this.#leases?.forget(rule, key, o)),
      );
    if (this.#leases !== undefined) this.evaluateSync = this.#leases.answer.bind(this.#leases);
  }

  now(): number {
    return this.#clock.now();
  }

  /**
   * One script call when every op's keys share a slot (always on a standalone server), shared with
   * the other requests made in the same turn of the event loop. On a Cluster, a request over several
   * slots is decided group by group (SlotGroups): all-or-nothing overall.
   */
  evaluate(ops: readonly StoreOp[], mode: EvalMode): Promise<EvalResult> {
    if (this.#leases !== undefined) return this.#leases.evaluate(ops, mode);
    return new Promise((resolve, reject) => this.#evaluate(ops, mode, { resolve, reject }));
  }

  /** `evaluate`, settling `into`: the batch keeps each request's settler. */
  #evaluate(ops: readonly StoreOp[], mode: EvalMode, into: Settler<EvalResult>): void {
    try {
      // Refunds asked for before this decision go first: a slot released, then taken again.
      if (this.#refunds !== undefined) this.#sendRefunds();
      if (ops.length === 0) {
        into.resolve({ nowMs: this.now(), results: [] });
        return;
      }
      // An injected clock is read once, so every group of a Cluster request decides at the same time.
      const time = this.#clock.scriptTime();
      // A standalone server has one slot: only a Cluster's requests are grouped by theirs.
      const slot = this.#connection.cluster ? this.#groups.slotOf(ops) : 0;
      if (slot !== undefined) this.#batcher.enqueue(slot, ops, mode, time, into);
      else
        this.#groups.evaluate(ops, mode, time).then(
          (result) => into.resolve(result),
          (error: unknown) => into.reject(error),
        );
    } catch (error) {
      // A fault is a rejection, never a throw, as from an async method.
      into.reject(error);
    }
  }

  /**
   * Refunds (releases of concurrency slots among them) asked for in the same turn of the event loop go
   * in one call, at most MAX_REFUNDS_PER_CALL each (one per slot group on a Cluster), sent when the turn
   * ends or when a decision or another command is asked for after them, so commands still reach Redis
   * in the order they were asked for. No figures are read back: per refund, whether it was still held
   * (a release of slots that lapsed, or were reset, is false).
   */
  refund(refunds: readonly Refund[]): Promise<boolean[]> {
    if (this.#leases !== undefined) return this.#leases.refund(refunds) as Promise<boolean[]>;
    return new Promise((resolve, reject) => this.#refund(refunds, { resolve, reject }));
  }

  /** `refund`, settling `into`: the turn's pending refunds keep each caller's settler. */
  #refund(refunds: readonly Refund[], into: Settler<boolean[]>): void {
    if (refunds.length === 0) {
      into.resolve([]);
      return;
    }
    try {
      // Decisions asked for before go first; refunds waiting already stay, to go with this one.
      this.#batcher.flush();
      const time = this.#clock.scriptTime();
      let pending = this.#refunds;
      if (pending !== undefined && pending.time !== time) {
        this.#sendRefunds();
        pending = undefined;
      }
      if (pending === undefined) {
        const created: PendingRefunds = { refunds: [], time, waiters: [], sizes: [] };
        pending = created;
        this.#refunds = created;
        nextTurn(() => {
          if (this.#refunds === created) this.#sendRefunds();
        });
      }
      for (let i = 0; i < refunds.length; i++) pending.refunds.push(refunds[i] as Refund);
      pending.waiters.push(into);
      pending.sizes.push(refunds.length);
      if (pending.refunds.length >= MAX_REFUNDS_PER_CALL || this.#connection.isolatedRequests === true)
        this.#sendRefunds();
    } catch (error) {
      into.reject(error);
    }
  }

  /** Sends the refunds waiting for the end of the turn. */
  #sendRefunds(): void {
    const pending = this.#refunds;
    if (pending === undefined) return;
    this.#refunds = undefined;
    this.#groups.refund(pending.refunds, pending.time).then(
      (held) => {
        const { waiters, sizes } = pending;
        // A call of one caller (a release per request) is its whole answer.
        if (waiters.length === 1) (waiters[0] as Settler<boolean[]>).resolve(held);
        else
          for (let w = 0, at = 0; w < waiters.length; w++) {
            const size = sizes[w] as number;
            (waiters[w] as Settler<boolean[]>).resolve(held.slice(at, at + size));
            at += size;
          }
      },
      (error: unknown) => {
        for (const w of pending.waiters) w.reject(error);
      },
    );
  }

  /** Sends what is waiting (refunds, or open batches of decisions) ahead of another command. */
  #flush(): void {
    if (this.#refunds !== undefined) this.#sendRefunds();
    this.#batcher.flush();
  }

  renew(slots: readonly Refund[]): Promise<boolean[]> {
    return this.#leases?.renew(slots) ?? this.#renew(slots);
  }

  async #renew(slots: readonly Refund[]): Promise<boolean[]> {
    if (slots.length === 0) return [];
    this.#flush();
    return this.#groups.renew(slots, this.#clock.scriptTime());
  }

  async holders(rule: StoreRule, key: string, limit: number): Promise<HeldSlot[]> {
    if (!windowKind(rule.type).holdsSlots) return [];
    this.#flush();
    return readHolders(this.#connection, opKeys(this.#space.prefix, rule.name, key).count, limit, this.now());
  }

  /** With `keepLock`, the count only (a DEL of its key, or a grouped rule's state), nobody told. */
  async reset(rule: StoreRule, key: string, options?: { keepLock?: boolean }): Promise<boolean> {
    this.#leases?.forget(rule.name, key);
    this.#flush();
    if (options?.keepLock !== true) return this.#resets.reset(rule, key, this.#clock.scriptTime());
    // A grouped rule's state is one of its identity's record: the others stay.
    if (isGrouped(rule)) await this.#resets.clear(rule, key, this.#clock.scriptTime());
    else {
      const count = opKeys(this.#space.prefix, rule.name, key).count;
      await this.#connection.send('DEL', [count], count);
    }
    return false;
  }

  /**
   * Sets (or, `limit` null, clears) the limit of one key of one rule (and its window), for
   * `forMs` (store clock) or until cleared, in every process sharing the prefix from its next decision; their
   * deny caches forget the key. Decisions read it in their own script call; rules that never had one do not.
   */
  readonly override: NonNullable<Store['override']> = async (rule, key, limit, forMs, windowMs) => {
    await this.#leases?.forget(rule.name, key ?? '', true);
    this.#flush();
    if (key === null) await this.#overrides.setRule(rule.name, limit, forMs, this.#clock.scriptTime());
    else await this.#overrides.set(rule.name, key, limit, forMs, this.#clock.scriptTime(), windowMs);
  };

  /** The rule-wide limits in force among `rules` (key null in `override`): one read of the rule-limits hash. */
  limits(rules: readonly StoreRule[]): Promise<RuleLimit[]> {
    this.#flush();
    return this.#overrides.list(
      rules.map((r) => r.name),
      this.now(),
    );
  }

  locked(rule: StoreRule, limit: number): Promise<LockInfo[]> {
    this.#flush();
    return readLocks(this.#connection, this.#space, rule.name, limit, this.now());
  }

  /**
   * Subscribes (once, lazily, on a connection of its own) to resets, override changes and units given back
   * that any process announces, and, with `frees`, to the slots freed by releases (a channel of their own,
   * heard only by those that listen). After a reconnection the listener hears `('', '')`: what was
   * announced while the subscriber was away was missed. With `frees`, resolves once subscribed.
   */
  onChange(listener: StoreChangeListener, options?: { frees?: boolean }): Promise<void> {
    this.#changeListeners.add(listener);
    this.#resets.listen(this.#heardReset);
    if (options?.frees !== true) return Promise.resolve();
    return Promise.all([this.#resets.heard(), this.#frees.listen(this.#heardFree)]).then(() => undefined);
  }

  readonly #heardReset = (rule: string, key: string): void => {
    for (const listener of this.#changeListeners) listener('reset', rule, key);
  };

  readonly #heardFree = (rule: string, key: string): void => {
    for (const listener of this.#changeListeners) listener('free', rule, key);
  };

  /**
   * Sends the releases and refunds still waiting for the end of the turn and waits for them (a caller that
   * disconnects its client next would lose them), then stops the clock sync and the subscribers; the
   * client passed in stays open (it is the caller's).
   */
  async close(): Promise<void> {
    // Unused units of blocks go back first, with the refunds still waiting.
    const returned = this.#leases?.close();
    const pending = this.#refunds;
    if (pending !== undefined) {
      const sent = new Promise<void>((settle) => {
        pending.waiters.push({ resolve: () => settle(), reject: settle });
        pending.sizes.push(0);
      });
      this.#sendRefunds();
      await sent;
    }
    await returned;
    this.#clock.stop();
    this.#overrides.close();
    this.#resets.close();
    this.#frees.close();
    this.#batcher.close();
  }
}
