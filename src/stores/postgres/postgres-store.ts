// The PostgreSQL store: limits shared by every process through PostgreSQL, each request decided by one function call.
import { windowKind } from '../../algorithms/index.js';
import { assertKnownFields } from '../../config/known-fields.js';
import { mustBe, refuse } from '../../config/refuse.js';
import { POSTGRES_STORE_DEFAULTS } from '../../defaults.js';
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
import { batchable, CheckBatcher } from './batch.js';
import { PostgresClock } from './clock.js';
import { announceReturned, ResetSubscription } from './notify.js';
import { isPool, PoolCalls, type PostgresPool } from './pool.js';
import { announcement, keyBytes, opArrays, readResults } from './protocol.js';
import { ensureSchema } from './schema.js';
import { type PostgresNames, postgresNames, statementSql } from './sql.js';
import { Sweeper } from './sweep.js';

export type { PostgresPool } from './pool.js';

export interface PostgresStoreOptions {
  /**
   * A pg (node-postgres 8) `Pool`, the app's own: each decision checks a connection out for one function
   * call. The store never ends it. The store's LISTEN connection (resets heard from other processes) is
   * one more connection, made with the pool's settings.
   */
  pool: PostgresPool;
  /** The schema of the store's tables and functions, created on first use when missing. @default 'ratekeeper' */
  schema?: string;
  /** Starts the name of every table and function, so that several stores share a schema. @default 'rk_' */
  tablePrefix?: string;
  /** Replaces the database server's clock (epoch ms), for tests; sent with every call. @default the server's clock_timestamp() */
  clock?: () => number;
  /** How often the offset to the server's clock (for calendar periods) is read again. @default 60000 */
  clockSyncIntervalMs?: number;
  /** How often the background sweep deletes expired rows, one batch at a time. @default 1000 */
  sweepIntervalMs?: number;
  /** Rows the sweep looks at per step. @default 1000 */
  sweepBatch?: number;
  /**
   * How many batched statements (requests of one rule, mode check, concurrency aside) may be out at
   * once, at most the pool's `max`; requests beyond wait and share the next statement. @default 4
   */
  statementsInFlight?: number;
  /**
   * Leasing for hot keys: blocks of a hot key's units reserved in one call and admitted from without a
   * round trip, exactly (docs/exactness.md, "Leasing"). `true` takes the defaults. @default false
   */
  leasing?: boolean | LeasingOptions;
}

const FIELDS = [
  'pool',
  'schema',
  'tablePrefix',
  'clock',
  'clockSyncIntervalMs',
  'sweepIntervalMs',
  'sweepBatch',
  'statementsInFlight',
  'leasing',
] as const;

/** The announcements of the concurrency keys some of `refunds` release slots of (each key once). */
function frees(refunds: readonly Refund[]): string[] {
  const out = new Set<string>();
  for (const { op } of refunds)
    if (windowKind(op.rule.type).holdsSlots) out.add(announcement(op.rule.name, op.key, false));
  return [...out];
}

/**
 * Keeps limits in PostgreSQL so that every process and machine sharing the database shares them. Each
 * request is one call of the store's `check` function (sql/check.sql), which decides all its rules
 * together, all or nothing, on the database server's clock, locking the rows of its keys in one order.
 * The tables and functions are created on first use when the role may (else apply `npx ratekeeper sql`).
 * @example
 * const store = new PostgresStore({ pool: new pg.Pool({ connectionString: process.env.DATABASE_URL }) });
 * const limiter = createLimiter({ store, rules });
 */
export class PostgresStore implements Store {
  readonly local = false;
  /** Whether PostgreSQL is slow or gone: see the failure policy. */
  readonly liveness: StoreLiveness;
  readonly #calls: PoolCalls;
  readonly #names: PostgresNames;
  readonly #clock: PostgresClock;
  readonly #sweeper: Sweeper;
  readonly #subscription: ResetSubscription;
  /** Releases of concurrency slots announced by any process: listened to once a call waits for a slot. */
  #frees: ResetSubscription | undefined;
  /** `onChange` listeners, told of what the subscriptions hear. */
  readonly #changeListeners = new Set<StoreChangeListener>();
  readonly #pool: PostgresPool;
  readonly #checkText: string;
  readonly #checkName: string;
  readonly #batcher: CheckBatcher;
  #ready: Promise<void> | undefined;
  /** Blocks of hot keys' units (the `leasing` option); undefined when off. */
  readonly #leases: Leases | undefined;
  /** With `leasing` only: a decision answered from its keys' blocks and pools; else undefined (`evaluate`). */
  readonly evaluateSync?: (ops: readonly StoreOp[], mode: EvalMode) => EvalResult | undefined;

  constructor(options: PostgresStoreOptions) {
    if (!isPool(options?.pool)) {
      refuse('ERR_OPTION', 'PostgresStore', mustBe('pool', 'a pg Pool (new pg.Pool(...))', options?.pool));
    }
    assertKnownFields(options, FIELDS, 'PostgresStore');
    const defaults = POSTGRES_STORE_DEFAULTS;
    this.#names = postgresNames(
      options.schema ?? defaults.schema,
      options.tablePrefix ?? defaults.tablePrefix,
    );
    if (options.clock !== undefined && typeof options.clock !== 'function') {
      refuse('ERR_OPTION', 'PostgresStore', mustBe('clock', 'a function returning epoch ms', options.clock));
    }
    const positive = (
      field: 'clockSyncIntervalMs' | 'sweepIntervalMs' | 'sweepBatch' | 'statementsInFlight',
    ) => {
      const value = options[field] ?? defaults[field];
      // Timers take at most 2^31 - 1 ms (a longer one would fire at once); counts have the same bound.
      if (!Number.isSafeInteger(value) || value < 1 || value > 2 ** 31 - 1) {
        refuse('ERR_OPTION', 'PostgresStore', mustBe(field, 'an integer from 1 to 2147483647', value));
      }
      return value;
    };
    const calls = new PoolCalls(options.pool);
    this.#calls = calls;
    this.liveness = calls;
    this.#clock = new PostgresClock(calls, options.clock, positive('clockSyncIntervalMs'));
    this.#checkText = `SELECT ${this.#names.qualified('check')}($1, $2, $3, $4, $5)`;
    this.#checkName = `${this.#names.channel}_check`;
    this.#batcher = new CheckBatcher(
      calls,
      {
        window: { text: statementSql(this.#names, 'check-batch'), name: `${this.#names.channel}_batch` },
        many: { text: statementSql(this.#names, 'check-many'), name: `${this.#names.channel}_many` },
      },
      Math.min(positive('statementsInFlight'), options.pool.options.max ?? 10),
      () => this.#clock.callTime(),
    );
    this.#sweeper = new Sweeper(calls, this.#names, {
      intervalMs: positive('sweepIntervalMs'),
      batch: positive('sweepBatch'),
      time: () => this.#clock.callTime(),
      ready: () => this.#whenReady(),
    });
    this.#subscription = new ResetSubscription(options.pool, this.#names.channel);
    this.#pool = options.pool;
    const leasing = leasingSettings(options.leasing, 'PostgresStore');
    this.#leases =
      leasing &&
      new Leases(
        {
          evaluate: (ops, mode) => this.#evaluate(ops, mode),
          refund: (refunds) => this.#refund(refunds),
          renew: (slots) => this.#renew(slots),
          now: () => this.now(),
          announce: (refunds) => announceReturned(this.#calls, this.#names.channel, refunds),
        },
        leasing,
        // Resets and limit changes announced by any process end the key's blocks (units given back do not).
        () => this.#subscription.listen((rule, key, o, back) => back || this.#leases?.forget(rule, key, o)),
      );
    if (this.#leases !== undefined) this.evaluateSync = this.#leases.answer.bind(this.#leases);
  }

  now(): number {
    return this.#clock.now();
  }

  /**
   * One call of the check function: every op of the request, all or nothing. A request of one rule in
   * mode check is batched instead (postgres-batch.ts): one fixed or calendar rule by sql/check-batch.sql,
   * sharing the statement with the others waiting for the same rule when the pool is busy; the other
   * types but concurrency by sql/check-many.sql, one check call each in a statement they share.
   */
  evaluate(ops: readonly StoreOp[], mode: EvalMode): Promise<EvalResult> {
    return this.#leases !== undefined ? this.#leases.evaluate(ops, mode) : this.#evaluate(ops, mode);
  }

  async #evaluate(ops: readonly StoreOp[], mode: EvalMode): Promise<EvalResult> {
    if (ops.length === 0) return { nowMs: this.now(), results: [] };
    await this.#whenReady();
    const { rules, keys, nums } = opArrays(ops);
    const batched = batchable(ops, mode);
    if (batched !== undefined) return this.#batcher.decide(ops[0] as StoreOp, nums, batched);
    const rows = await this.#calls.query({
      name: this.#checkName,
      text: this.#checkText,
      values: [mode, this.#clock.callTime(), rules, keys, nums],
      rowMode: 'array',
    });
    return readResults((rows[0] as unknown[] | undefined)?.[0], ops.length);
  }

  /**
   * Gives reservations back and releases slots, in one call (sql/refund.sql give_back): per refund, whether
   * what it gave back was still held (a released slot not lapsed or reset).
   */
  refund(refunds: readonly Refund[]): Promise<boolean[]> {
    return (this.#leases?.refund(refunds) as Promise<boolean[]> | undefined) ?? this.#refund(refunds);
  }

  async #refund(refunds: readonly Refund[]): Promise<boolean[]> {
    if (refunds.length === 0) return [];
    await this.#whenReady();
    const { rules, keys, nums } = opArrays(refunds.map((refund) => refund.op));
    const rows = await this.#call('give_back', [
      rules,
      keys,
      nums,
      refunds.map((refund) => refund.receipt),
      frees(refunds),
    ]);
    const held = (rows[0] as { give_back?: unknown } | undefined)?.give_back;
    if (!Array.isArray(held) || held.length !== refunds.length) {
      throw new Error(
        `ratekeeper: unexpected reply from PostgreSQL give_back: ${String(held).slice(0, 200)}`,
      );
    }
    return held.map((h) => h === true);
  }

  /**
   * Renews held concurrency slots until a lease from now (database clock), in one call (sql/holders.sql):
   * per slot, whether every unit of it was still held.
   */
  renew(slots: readonly Refund[]): Promise<boolean[]> {
    return this.#leases?.renew(slots) ?? this.#renew(slots);
  }

  async #renew(slots: readonly Refund[]): Promise<boolean[]> {
    if (slots.length === 0) return [];
    await this.#whenReady();
    const { rules, keys, nums } = opArrays(slots.map((slot) => slot.op));
    const rows = await this.#call('renew', [rules, keys, nums, slots.map((slot) => slot.receipt)]);
    const held = (rows[0] as { renew?: unknown } | undefined)?.renew;
    if (!Array.isArray(held) || held.length !== slots.length) {
      throw new Error(`ratekeeper: unexpected reply from PostgreSQL renew: ${String(held).slice(0, 200)}`);
    }
    return held.map((h) => h === true);
  }

  /** The live slots of a concurrency key, oldest first, at most `limit` (operators' `status`). */
  async holders(rule: StoreRule, key: string, limit: number): Promise<HeldSlot[]> {
    if (!windowKind(rule.type).holdsSlots || !(limit > 0)) return [];
    await this.#whenReady();
    const rows = await this.#calls.query({
      text: `SELECT * FROM ${this.#names.qualified('holders')}($1, $2, $3, $4)`,
      values: [this.#clock.callTime(), rule.name, keyBytes(key), Math.min(Math.floor(limit), 2 ** 31 - 1)],
    });
    return rows.map((row) => {
      const { slot, until_ms } = row as { slot: string; until_ms: string };
      return { slot: Number(slot), untilMs: Number(until_ms) };
    });
  }

  /**
   * Clears count, lock and level, and tells every process sharing the schema and prefix (NOTIFY); with
   * `keepLock`, the count only, nobody told.
   */
  async reset(rule: StoreRule, key: string, options?: { keepLock?: boolean }): Promise<boolean> {
    this.#leases?.forget(rule.name, key);
    await this.#whenReady();
    if (options?.keepLock === true) {
      await this.#call('clear', [rule.name, keyBytes(key)]);
      return false;
    }
    const rows = await this.#call('reset', [rule.name, keyBytes(key), announcement(rule.name, key, false)]);
    return (rows[0] as { reset?: unknown } | undefined)?.reset === true;
  }

  /**
   * Sets (or, `limit` null, clears) the limit of one key of one rule, for every process from its next
   * decision; `key` null: the rule-wide limit (a row with an empty key hash, read by the same statements).
   * A key's window is a row of its own (sql/keys.sql override).
   */
  readonly override: NonNullable<Store['override']> = async (rule, key, limit, forMs, windowMs) => {
    await this.#leases?.forget(rule.name, key ?? '', true);
    await this.#whenReady();
    await this.#call('override', [
      rule.name,
      key === null ? null : keyBytes(key),
      limit,
      forMs ?? null,
      announcement(rule.name, key ?? '', true),
      windowMs ?? null,
    ]);
  };

  /** The rule-wide limits in force among `rules`, on the store's clock. */
  async limits(rules: readonly StoreRule[]): Promise<RuleLimit[]> {
    await this.#whenReady();
    const rows = await this.#calls.query({
      text: `SELECT * FROM ${this.#names.qualified('rule_limits')}($1, $2)`,
      values: [this.#clock.callTime(), rules.map((r) => r.name)],
    });
    return rows.map((row) => {
      const { rule, lim, until_ms } = row as { rule: string; lim: string; until_ms: string | null };
      return until_ms === null
        ? { rule, limit: Number(lim) }
        : { rule, limit: Number(lim), untilMs: Number(until_ms) };
    });
  }

  async locked(rule: StoreRule, limit: number): Promise<LockInfo[]> {
    await this.#whenReady();
    const rows = await this.#calls.query({
      text: `SELECT * FROM ${this.#names.qualified('locked')}($1, $2, $3)`,
      values: [this.#clock.callTime(), rule.name, Math.min(limit, 2 ** 31 - 1)],
    });
    return rows.map((row) => {
      const { key, until_ms, level, now_ms } = row as {
        key: Buffer;
        until_ms: string;
        level: number;
        now_ms: string;
      };
      const lockedUntil = Number(until_ms);
      return {
        rule: rule.name,
        key: key.toString('utf8'),
        remainingMs: lockedUntil - Number(now_ms),
        lockedUntil,
        level,
      };
    });
  }

  /**
   * Calls `listener` when any process resets a key or changes its override (LISTEN on a connection of
   * the store's own), and, with `frees`, frees slots of a concurrency key (the refund call's NOTIFY on
   * a channel of its own, LISTENed to on one more connection from then on); `('', '')` after a
   * listening connection was lost. Resolves once the channels asked for are listened to.
   */
  onChange(listener: StoreChangeListener, options?: { frees?: boolean }): Promise<void> {
    this.#changeListeners.add(listener);
    this.#subscription.listen(this.#heardReset);
    if (options?.frees !== true) return this.#subscription.live();
    this.#frees ??= new ResetSubscription(this.#pool, this.#names.freeChannel);
    this.#frees.listen(this.#heardFree);
    return Promise.all([this.#subscription.live(), this.#frees.live()]).then(() => undefined);
  }

  readonly #heardReset = (rule: string, key: string): void => {
    for (const listener of this.#changeListeners) listener('reset', rule, key);
  };

  readonly #heardFree = (rule: string, key: string): void => {
    for (const listener of this.#changeListeners) listener('free', rule, key);
  };

  /** One step of the background sweep, at once: resolves with the number of rows deleted. */
  sweep(): Promise<number> {
    return this.#sweeper.sweep();
  }

  /** Stops the clock sync, the sweep and the LISTEN connection; the pool stays open (it is the caller's). */
  async close(): Promise<void> {
    // Unused units of blocks go back before the store stops.
    await this.#leases?.close();
    this.#clock.stop();
    this.#sweeper.stop();
    this.#subscription.close();
    this.#frees?.close();
  }

  /** A call of one of the store's functions with the time first; its rows. */
  #call(fn: string, args: unknown[]): Promise<unknown[]> {
    const params = args.map((_, i) => `$${i + 2}`).join(', ');
    return this.#calls.query({
      text: `SELECT ${this.#names.qualified(fn)}($1, ${params}) AS ${fn}`,
      values: [this.#clock.callTime(), ...args],
    });
  }

  /** The schema installed (or found at this version) and the clock read, once; tried again after a failure. */
  #whenReady(): Promise<void> {
    this.#ready ??= (async () => {
      await ensureSchema(this.#calls, this.#names);
      await this.#clock.sync();
    })().catch((error: unknown) => {
      this.#ready = undefined;
      throw error;
    });
    return this.#ready;
  }
}
