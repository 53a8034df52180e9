// The limiter: matches rules to a request, asks the store for one all-or-nothing decision, reports outcomes.
// A façade over its parts: options (limiter-options.ts), request to ops (request-ops.ts), one decision's
// path (decider.ts), the failure policy (failure-policy.ts), reservations (reservations.ts), the deny
// cache (deny-cache.ts), events and the debug log (limiter-events.ts).
import { EventEmitter } from 'node:events';
import { assertWaitable, costNeverFits, TurnQueues } from './acquire.js';
import {
  type AcquireOptions,
  type OverrideOptions,
  overrideForMs,
  resolveAcquire,
  type WrapOptions,
} from './call-options.js';
import { Decider } from './decider.js';
import { LIMITER_DEFAULTS } from './defaults.js';
import { DenyCache } from './deny-cache.js';
import { describe, RateLimitConfigError } from './errors.js';
import { FailurePolicy } from './failure-policy.js';
import { assertKnownFields } from './known-fields.js';
import { type DebugLog, emitStoreError, type LimiterEvents, type UnlockEvent } from './limiter-events.js';
import { type LimiterOptions, resolveLimiterOptions } from './limiter-options.js';
import { overrideLimit } from './limits.js';
import { identityOf, OpBuilder, type RuleOp } from './request-ops.js';
import { Reservations } from './reservations.js';
import type { EvalMode, OpResult, Store } from './stores/store.js';
import type { Decision, LockInfo, Outcome, RequestInfo, Rule, RuleStatus } from './types.js';
import { wrapFunction } from './wrap.js';

export type {
  LimitedEvent,
  LimiterEvents,
  LockoutEvent,
  StoreErrorEvent,
  UnlockEvent,
} from './limiter-events.js';
export type { LimiterOptions } from './limiter-options.js';

export class Limiter extends EventEmitter<LimiterEvents> {
  readonly #ops: OpBuilder;
  readonly #definitions: readonly Rule[];
  readonly #store: Store;
  readonly #policy: FailurePolicy;
  readonly #denyCache: DenyCache | undefined;
  readonly #reservations = new Reservations();
  readonly #decider: Decider;
  /** Waiters of `acquire` and of wrapped functions with `wait`. */
  readonly #turns = new TurnQueues();
  readonly #log: DebugLog;
  /** Some rule needs outcomes, so allowed decisions keep their reservations. */
  readonly #needsOutcomes: boolean;

  constructor(options: LimiterOptions) {
    super();
    const resolved = resolveLimiterOptions(options);
    const store = resolved.store;
    this.#store = store;
    this.#ops = new OpBuilder(resolved.rules, () => store.now());
    this.#definitions = Object.freeze([...options.rules]);
    this.#needsOutcomes = resolved.rules.some((r) => r.countOn !== 'all' || r.resetOnSuccess);
    this.#policy = new FailurePolicy(
      store,
      resolved.onStoreError,
      resolved.storeTimeoutMs,
      resolved.storeRetryIntervalMs,
    );
    if (resolved.denyCacheMaxKeys !== undefined) {
      const cache = new DenyCache(resolved.denyCacheMaxKeys);
      this.#denyCache = cache;
      // An empty rule name: the store may have missed resets (its subscriber reconnected), forget all.
      store.onReset?.((rule, key) => (rule === '' ? cache.clear() : cache.delete(rule, key)));
    }
    this.#log = resolved.log;
    this.#decider = new Decider({
      events: this,
      store,
      policy: this.#policy,
      denyCache: this.#denyCache,
      reservations: this.#reservations,
      log: this.#log,
      needsOutcomes: this.#needsOutcomes,
    });
  }

  /** The rules as given (validated), in order: for operator tools that show windows and limits. */
  get rules(): readonly Rule[] {
    return this.#definitions;
  }

  /** The rule names, in order. */
  get ruleNames(): string[] {
    return this.#ops.rules.map((r) => r.name);
  }

  /** Each rule's nominal window in whole seconds (0 when it has none, as a cron calendar), for `RateLimit-Policy`'s `w`. */
  get ruleWindows(): Record<string, number> {
    return Object.fromEntries(this.#ops.rules.map((r) => [r.name, r.windowSeconds]));
  }

  /**
   * True when some rule counts only failures or successes, or resets on success: admitted decisions
   * then need `report`. When false, `report` never has anything to do and adapters skip it.
   */
  get needsOutcomes(): boolean {
    return this.#needsOutcomes;
  }

  /**
   * True while an admitted decision holds a reservation that `report` has not settled yet (a rule counts
   * outcomes and nobody reported this decision's). Adapters use it to tell whether an app reported itself.
   */
  awaitsReport(decision: Decision): boolean {
    return this.#reservations.pending(decision);
  }

  /**
   * The names of the rules whose `match` accepts a request with this method and path (whatever its key),
   * in rule order: which rules a URL falls under, for debugging and for the adapters' wiring warnings.
   */
  matchingRules(method: string, path: string): string[] {
    return this.#ops.matching(method, path);
  }

  /** Evaluates every rule matching the request and consumes all of them, or none. */
  check(req: RequestInfo): Promise<Decision> {
    return this.#decideOps('check', () => this.#ops.forRequest(req));
  }

  /** The answer `check` would give, changing nothing. */
  peek(req: RequestInfo): Promise<Decision> {
    return this.#decideOps('peek', () => this.#ops.forRequest(req));
  }

  /** Applies one rule to a key directly (no matching, no key extraction). */
  consume(rule: string, key: string, cost = 1): Promise<Decision> {
    return this.#decideOps('check', () => this.#ops.direct([rule], key, cost));
  }

  /** Counting, not limiting: always adds `amount`, and reports the windowed total. */
  record(rule: string, key: string, amount = 1): Promise<Decision> {
    return this.#decideOps('record', () => this.#ops.direct([rule], key, amount));
  }

  /**
   * Tells the limiter how an admitted request ended: rules counting only failures (or successes) give
   * the reservation back, and `resetOnSuccess` rules clear their count on success. Once per decision.
   */
  async report(decision: Decision, outcome: Outcome): Promise<void> {
    if (outcome !== 'success' && outcome !== 'failure') {
      throw new TypeError(`report: outcome must be 'success' or 'failure', got ${describe(outcome)}`);
    }
    const work = this.#reservations.settle(decision, outcome);
    if (work === undefined) return;
    try {
      await this.#policy.timed(work);
    } catch (error) {
      emitStoreError(this, this.#log, error, 'report', 'none');
    }
  }

  /**
   * Waits until the rule admits `cost` for the key, then consumes it (a `check`): for pacing calls to an
   * API with its own limit. Each try is a decision of the store, so across processes nothing is admitted
   * that `check` would not admit; within a process the waiters of a key are served first come, first
   * served. Rejects at once with `RateLimitExceededError` when the earliest admission is later than
   * `maxWait`, with the signal's reason (an `AbortError`) on abort; leaves no timer behind.
   */
  acquire(rule: string, key: string, options?: AcquireOptions): Promise<Decision> {
    try {
      const { cost, maxWaitMs, signal } = resolveAcquire(options);
      assertWaitable([this.#ops.rule(rule)], 'acquire');
      return this.#waitTurn([rule], identityOf(key), cost, maxWaitMs, signal);
    } catch (error) {
      return Promise.reject(error);
    }
  }

  /**
   * A function that decides the named rules together on a key from its arguments before calling `fn`;
   * a denied call throws `RateLimitExceededError` and `fn` is not called (with `wait`, it waits for its
   * turn first, as `acquire`). A call that returns is a success and one that throws a failure, for
   * rules that count outcomes. Rules, key and options are checked now.
   */
  wrap<This, A extends unknown[], R>(
    fn: (this: This, ...args: A) => R,
    options: WrapOptions<A>,
  ): (this: This, ...args: A) => Promise<Awaited<R>> {
    return wrapFunction(fn, options, {
      check: (rules, waits, where) => {
        const compiled = rules.map((name) => this.#ops.rule(name));
        if (waits) assertWaitable(compiled, where);
      },
      decide: (rules, key, cost) => this.#decideOps('check', () => this.#ops.direct(rules, key, cost)),
      waitTurn: (rules, key, cost, maxWaitMs) => this.#waitTurn(rules, key, cost, maxWaitMs, undefined),
      report: (decision, outcome) => this.report(decision, outcome),
    });
  }

  /** Clears count, lock and escalation level of a rule for a key, in every process. */
  async reset(rule: string, key: string): Promise<void> {
    const compiled = this.#ops.rule(rule);
    const identity = identityOf(key);
    this.#denyCache?.delete(compiled.name, identity);
    const [wasLocked, wasLockedLocally] = await Promise.all([
      this.#policy.timed(this.#store.reset(compiled.store, identity)),
      this.#policy.insurance?.reset(compiled.store, identity) ?? false,
    ]);
    if (wasLocked || wasLockedLocally)
      this.emit('unlock', { rule: compiled.name, key: identity } satisfies UnlockEvent);
  }

  /**
   * Sets the limit of one key of one rule in every process sharing the store, from their next
   * decision, over the rule's limit (number or function); `null` clears it. `for`: it expires then.
   * `reset` leaves it in place.
   */
  async override(rule: string, key: string, limit: number | null, options?: OverrideOptions): Promise<void> {
    const compiled = this.#ops.rule(rule);
    const identity = identityOf(key);
    const value = overrideLimit(limit, compiled.store);
    const forMs = overrideForMs(options);
    const store = this.#store;
    if (store.override === undefined) {
      throw new RateLimitConfigError(
        'ERR_OPTION',
        `override: the store (${store.constructor.name}) does not support overrides`,
      );
    }
    this.#denyCache?.delete(compiled.name, identity);
    await Promise.all([
      this.#policy.timed(store.override(compiled.store, identity, value, forMs)),
      this.#policy.insurance?.override(compiled.store, identity, value, forMs),
    ]);
  }

  /** Count, remaining, the limit in force, lock and level of a rule for a key; changes nothing. */
  async status(rule: string, key: string): Promise<RuleStatus> {
    const [op] = await this.#ops.direct([rule], key, 0);
    const { nowMs, results } = await this.#policy.timed(this.#store.evaluate([op as RuleOp], 'peek'));
    const r = results[0] as OpResult;
    return {
      rule: (op as RuleOp).rule.name,
      key: (op as RuleOp).key,
      count: r.count,
      limit: r.limit,
      overridden: r.overridden,
      remaining: r.remaining,
      resetMs: Math.max(0, r.resetMs),
      locked: r.locked,
      lockRemainingMs: r.locked ? r.lockedUntil - nowMs : 0,
      level: r.level,
    };
  }

  /** Keys of a rule locked now, soonest unlock first. */
  async locked(rule: string, options: { limit?: number } = {}): Promise<LockInfo[]> {
    const compiled = this.#ops.rule(rule);
    assertKnownFields(options, ['limit'], 'locked');
    const limit = options.limit ?? LIMITER_DEFAULTS.lockedListLimit;
    if (!Number.isSafeInteger(limit) || limit < 1 || limit > 10_000) {
      throw new RateLimitConfigError(
        'ERR_OPTION',
        `locked: limit must be an integer from 1 to 10000, got ${describe(limit)}`,
      );
    }
    return this.#policy.timed(this.#store.locked(compiled.store, limit));
  }

  /** Closes the store; calls still waiting for a turn (`acquire`, `wrap` with `wait`) reject. */
  async close(): Promise<void> {
    this.#turns.close();
    await Promise.all([this.#store.close(), this.#policy.close()]);
  }

  #waitTurn(
    rules: readonly string[],
    key: string,
    cost: number,
    maxWaitMs: number,
    signal: AbortSignal | undefined,
  ): Promise<Decision> {
    const compiled = rules.map((name) => this.#ops.rule(name));
    return this.#turns.take(
      `${rules.join(',')}\0${key}`,
      cost,
      maxWaitMs,
      signal,
      (units) => this.#decideOps('check', () => this.#ops.direct(rules, key, units)),
      (decision, units) => costNeverFits(compiled, decision, units),
    );
  }

  /**
   * Every deciding method: the ops are built first (a bad key or cost throws before anything is
   * consumed, as a rejection, never synchronously). Not `async`: on the memory store the answer is
   * ready in the same turn, and one settled promise is all a decision costs.
   */
  #decideOps(mode: EvalMode, build: () => RuleOp[] | Promise<RuleOp[]>): Promise<Decision> {
    let ops: RuleOp[] | Promise<RuleOp[]>;
    try {
      ops = build();
    } catch (error) {
      return Promise.reject(error);
    }
    // A promise only when a limit function gave one.
    if (ops instanceof Promise) return ops.then((settled) => this.#decider.decide(settled, mode));
    return this.#decider.decide(ops, mode);
  }
}

/** Builds a limiter: rules validated now (throws `RateLimitConfigError`), decisions later. */
export function createLimiter(options: LimiterOptions): Limiter {
  return new Limiter(options);
}
