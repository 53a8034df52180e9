// The store contract's data: a normalized rule, one op of it, and the answer for that op. The window
// algorithms work on these and import them as types only (the math imports no store); src/stores/store.ts,
// the Store interface, re-exports them. This file imports nothing.

/** The window types, one algorithm each (`leaky-bucket` in a rule is `gcra` here). */
export type WindowType =
  | 'fixed'
  | 'calendar'
  | 'sliding-log'
  | 'sliding'
  | 'token-bucket'
  | 'gcra'
  | 'concurrency';

/** A rule as the algorithms and stores see it: normalized, durations in ms, defaults filled in (see rules/compile.ts). */
export interface StoreRule {
  readonly name: string;
  readonly type: WindowType;
  /** Window length in ms; 0 for calendar windows (their periods come with each op); a concurrency slot's lease. */
  readonly sizeMs: number;
  /** Sliding counter: number of buckets. 0 for other types. */
  readonly buckets: number;
  /**
   * Token bucket and GCRA: the explicit `window.burst`, or 0 meaning "the op's effective limit" (an
   * override in force, else `StoreOp.limit`), so a per-request limit moves the capacity with it.
   * 0 for other types.
   */
  readonly burst: number;
  readonly lockout: StoreLockout | undefined;
  readonly dryRun: boolean;
  /**
   * Keep the rule's state beside the other grouped rules of the same identity, in one record per
   * identity: on Redis one string `<prefix>:{<identity>}` holding each grouped rule's state under its
   * name (lua/identity-record.lua), rather than a key of its own. Only fixed, calendar, token-bucket and gcra
   * rules are grouped (other types ignore it); the limiter sets it on those that share their `key`
   * form with another such rule (rules/compile.ts). The verdicts are the same either way; the memory
   * store and PostgreSQL keep one state per rule and identity and ignore it. Absent: false.
   */
  readonly grouped?: boolean;
  /**
   * A store may lease the rule's units to a process for a hot key (RedisStore and PostgresStore with
   * `leasing`): no lockout, not dry-run, counting every request (`countOn: 'all'`, no `resetOnSuccess`)
   * and no settled cost. Set by rules/compile.ts. Absent: false.
   */
  readonly leasable?: boolean;
}

export interface StoreLockout {
  readonly durationMs: number;
  readonly escalate: number;
  /** 0 means no cap. */
  readonly maxDurationMs: number;
  readonly forgetAfterMs: number;
}

/** One rule applied to one identity in one evaluation. */
export interface StoreOp {
  readonly rule: StoreRule;
  /** The identity string (already bounded in length by the core). */
  readonly key: string;
  /** Units this op costs: a non-negative safe integer. */
  readonly cost: number;
  /**
   * The limit asked for this op: the rule's number, or what its limit function returned for this
   * request (a positive safe integer). An override in force for the key wins over it (see `OpResult.limit`).
   * Algorithms read this, never a limit of the rule.
   */
  readonly limit: number;
  /** Calendar windows: end of the current period and of the one after it, epoch ms (store clock). */
  readonly periodEndMs?: number;
  readonly nextPeriodEndMs?: number;
}

/**
 * The answer for one op. An algorithm fills in the counting fields; the lock fields start at "not
 * locked" and the limit fields at 0 / false, and the store fills them in on the same object.
 */
export interface OpResult {
  allowed: boolean;
  /** The limit this op was decided on: the override in force for the key, else `StoreOp.limit`. */
  limit: number;
  /** True when an override set by `Store.override` decided the limit (or the window: `windowMs`). */
  overridden: boolean;
  /** The window size (ms) the key's override set, when one decided the op; absent otherwise. */
  windowMs?: number;
  /** Units left after this op (never negative). */
  remaining: number;
  resetMs: number;
  /** Denials: ms until the same op would be admitted; 0 when allowed. */
  retryAfterMs: number;
  locked: boolean;
  /** Units counted after this op (for token bucket and GCRA: units in use). */
  count: number;
  /** What `refund` needs to give this op's consumption back; 0 when nothing was consumed. */
  receipt: number;
  /** Escalation level remembered for this key (0 when none). */
  level: number;
  /** Epoch ms the current lock ends; 0 when not locked. */
  lockedUntil: number;
  /** True when this very evaluation placed the lock. */
  lockedNow: boolean;
}
