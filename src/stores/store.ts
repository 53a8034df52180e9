// The store contract: what the memory store and the Redis store both implement, step for step.
import type { LockInfo, WindowType } from '../types.js';

/** A rule as a store sees it: normalized, durations in ms, defaults filled in (see rules.ts). */
export interface StoreRule {
  readonly name: string;
  readonly type: WindowType;
  readonly limit: number;
  /** Window length in ms; 0 for calendar windows (their periods come with each op). */
  readonly sizeMs: number;
  /** Sliding counter: number of buckets. 0 for other types. */
  readonly buckets: number;
  /** Token bucket and GCRA capacity (`burst ?? limit`). 0 for other types. */
  readonly burst: number;
  readonly lockout: StoreLockout | undefined;
  readonly dryRun: boolean;
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
  /** Calendar windows: end of the current period and of the one after it, epoch ms (store clock). */
  readonly periodEndMs?: number;
  readonly nextPeriodEndMs?: number;
}

/**
 * - `check`: decide every op; if none (that is enforced) denies, consume all that allow; else consume
 *   nothing, but lock each enforced lockout rule that was exceeded.
 * - `peek`: the same answer as `check`, nothing written.
 * - `record`: always add the cost, even past the limit; lock (if configured) once the total exceeds it.
 */
export type EvalMode = 'check' | 'peek' | 'record';

export interface OpResult {
  allowed: boolean;
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

export interface EvalResult {
  /** The store's time for this evaluation, epoch ms. */
  nowMs: number;
  results: OpResult[];
}

export interface Refund {
  readonly op: StoreOp;
  readonly receipt: number;
}

export interface Store {
  /** True for stores inside this process (no deny cache or insurance needed in front of them). */
  readonly local: boolean;
  /** The store's current time in epoch ms: the clock calendar periods are computed on. */
  now(): number;
  /** Decide all ops together (all consume or none does), see `EvalMode`. */
  evaluate(ops: readonly StoreOp[], mode: EvalMode): Promise<EvalResult>;
  /** Give reservations back (an outcome that does not count). Never goes below empty. */
  refund(refunds: readonly Refund[]): Promise<void>;
  /** Clear the counted state of a rule for a key (resetOnSuccess); the lock and level stay. */
  clear(rule: StoreRule, key: string): Promise<void>;
  /** Clear count, lock and level. Resolves true when the key was locked. */
  reset(rule: StoreRule, key: string): Promise<boolean>;
  /** Keys of a rule locked now, soonest unlock first, at most `limit`. */
  locked(rule: StoreRule, limit: number): Promise<LockInfo[]>;
  /**
   * Stores shared between processes call `listener` when any process resets a key, so local caches
   * (the deny cache) can forget it; `('', '')` means resets may have been missed (the subscriber
   * reconnected): forget everything.
   */
  onReset?(listener: (rule: string, key: string) => void): void;
  close(): Promise<void>;
}
