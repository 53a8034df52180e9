// The limiter: matches rules to a request, asks the store for one all-or-nothing decision, reports outcomes:
// a façade over the parts in limiter/ and calls/paced-calls.ts (acquire and wrap).
import type { AcquireOptions, KeyOverride, OverrideOptions, WrapOptions } from '../calls/options.js';
import { PacedCalls } from '../calls/paced-calls.js';
import { describe } from '../errors.js';
import { identityOf } from '../keys/direct-key.js';
import type { RuleFacts } from '../rules/facts.js';
import type { EvalMode, Store, StoreChange } from '../stores/store.js';
import type {
  Acquired,
  Decision,
  LockInfo,
  Outcome,
  RequestInfo,
  Rule,
  RuleLimit,
  RuleStatus,
} from '../types.js';
import { Decider, DenyCache } from './decider.js';
import { EventEmitter } from './event-emitter.js';
import { type DebugLog, emitStoreError, type LimiterEvents } from './events.js';
import type { StoreHealth } from './failure-policy.js';
import { FailurePolicy } from './failure-policy.js';
import { Holdings } from './holdings.js';
import { KeyAdmin, overrideProbe } from './key-admin.js';
import { type LimiterObserver, Observers } from './observers.js';
import { OpBuilder, type RuleOp } from './op-builder.js';
import { type LimiterOptions, resolveLimiterOptions } from './options.js';
import { Reservations } from './reservations.js';
import { Settlements, settleCostError } from './settlements.js';

/** What `release` answers for a decision that holds no slot (any more): one settled promise, shared. */
const RELEASED: Promise<void> = Promise.resolve();

export class Limiter extends EventEmitter<LimiterEvents> {
  readonly #ops: OpBuilder;
  readonly #definitions: readonly Rule[];
  readonly #facts: readonly RuleFacts[];
  readonly #store: Store;
  readonly #policy: FailurePolicy;
  readonly #denyCache: DenyCache | undefined;
  readonly #reservations = new Reservations();
  readonly #observers = new Observers();
  readonly #decider: Decider;
  readonly #admin: KeyAdmin;
  readonly #paced: PacedCalls;
  readonly #log: DebugLog;
  /** Some rule needs outcomes, so allowed decisions keep their reservations. */
  readonly #needsOutcomes: boolean;
  /** Only with a concurrency rule: the slots this process holds. */
  readonly #holdings: Holdings | undefined;
  /** Only with a `settle` rule: the estimates admitted decisions reserved. */
  readonly #settlements: Settlements | undefined;

  constructor(options: LimiterOptions) {
    super();
    const resolved = resolveLimiterOptions(options);
    const store = resolved.store;
    this.#store = store;
    this.#ops = new OpBuilder(
      resolved.rules,
      () => store.now(),
      overrideProbe(() => this.#policy, store),
    );
    this.#definitions = Object.freeze([...options.rules]);
    this.#facts = Object.freeze(resolved.rules.map((r) => r.facts));
    this.#needsOutcomes = resolved.rules.some((r) => r.facts.countsOutcomes);
    this.#policy = new FailurePolicy(store, { ...resolved, policy: resolved.onStoreError }, this.#observers);
    if (resolved.denyCacheMaxKeys !== undefined)
      this.#denyCache = new DenyCache(resolved.denyCacheMaxKeys, resolved.staleAfterMs);
    this.#log = resolved.log;
    const call = <T>(operation: string, promise: Promise<T>) => this.#policy.call(operation, promise);
    const failed = (error: unknown, operation: string) =>
      emitStoreError(this, this.#log, error, operation, 'none');
    const leases = resolved.rules.filter((r) => r.facts.holdsSlots).map((r) => r.store.sizeMs);
    // A slot this process freed wakes its own waiters at once (others hear it from the store).
    const freed = (rule: string, key: string) => this.#paced.freed(rule, key);
    // What other processes changed: a reset key's denial is forgotten (an empty rule: the store may have
    // missed changes, its subscriber reconnected: forget all), and freed slots wake the waiters.
    const changed = (change: StoreChange, rule: string, key: string) => {
      if (change === 'reset') this.#denyCache?.forgetReset(rule, key);
      freed(rule, key);
    };
    if (this.#denyCache !== undefined)
      store.onChange?.(changed).catch((error: unknown) => failed(error, 'onChange'));
    this.#holdings =
      leases.length === 0
        ? undefined
        : new Holdings(Math.floor(Math.min(...leases) / 3), {
            call,
            failed,
            freed,
            observers: this.#observers,
          });
    this.#settlements = resolved.rules.some((r) => r.settle)
      ? new Settlements({
          rebuild: (op, cost) => this.#ops.op(op.compiled, op.key, cost, op.limit, op.choice),
          call,
          failed,
          forget: (rule, key) => this.#denyCache?.delete(rule, key),
        })
      : undefined;
    // The parts each take what they need of these.
    const parts = {
      events: this,
      ops: this.#ops,
      store,
      policy: this.#policy,
      denyCache: this.#denyCache,
      reservations: this.#reservations,
      log: this.#log,
      needsOutcomes: this.#needsOutcomes,
      observers: this.#observers,
      holdings: this.#holdings,
      settlements: this.#settlements,
    };
    this.#decider = new Decider(parts);
    this.#admin = new KeyAdmin(parts);
    this.#paced = new PacedCalls({
      ops: this.#ops,
      decide: (rules, key, cost) => this.#decideOps('check', () => this.#ops.direct(rules, key, cost)),
      // A call that settled is done with its slots, whatever its outcome.
      report: (decision, outcome) =>
        Promise.all([this.report(decision, outcome), this.release(decision)]).then(() => undefined),
      release: (decision) => this.release(decision),
      slotPollMs: resolved.staleAfterMs,
      // Frees in other processes, once a call waits for a slot; heard live, every waiter tries once more
      // (a free announced before the subscription was made would be missed).
      listenFrees: () =>
        void store.onChange?.(changed, { frees: true }).then(
          () => freed('', ''),
          (error: unknown) => failed(error, 'onChange'),
        ),
    });
  }

  /** The rules as given (validated), in order: for operator tools that show windows and limits. */
  get rules(): readonly Rule[] {
    return this.#definitions;
  }

  /**
   * What each rule is, in order: its window's type, name and capacity, whether its key reads the client
   * address or the body, counts outcomes, has a lockout. What adapters and tools read instead of raw rules.
   */
  get ruleFacts(): readonly RuleFacts[] {
    return this.#facts;
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
    // #decideOps's work written out: every request comes this way, and a closure per request is not free.
    let ops: RuleOp[] | Promise<RuleOp[]>;
    try {
      ops = this.#ops.forRequest(req);
    } catch (error) {
      return Promise.reject(error);
    }
    if (ops instanceof Promise) return ops.then((settled) => this.#decider.decide(settled, 'check'));
    return this.#decider.decide(ops, 'check');
  }

  /** The answer `check` would give, changing nothing. */
  peek(req: RequestInfo): Promise<Decision> {
    return this.#decideOps('peek', () => this.#ops.forRequest(req));
  }

  /**
   * Counting, not limiting, for a request: every matching rule adds its cost even past its limit, and the
   * decision reports each rule's windowed total (`count`; `allowed` false once a total exceeds its limit).
   * What `slowDown` decides its delays on.
   */
  recordRequest(req: RequestInfo): Promise<Decision> {
    return this.#decideOps('record', () => this.#ops.forRequest(req));
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
      await this.#policy.call('report', work);
    } catch (error) {
      emitStoreError(this, this.#log, error, 'report', 'none');
    }
  }

  /**
   * Frees the concurrency slots an admitted decision holds (from `check`, `consume`, `record`), in every
   * process sharing the store, at once. Idempotent: releasing a decision again, one that holds no slot, or
   * one whose slots lapsed or were reset, does nothing. A store fault is told as `storeError`; the release
   * is tried again at the next renewals, and the slots lapse after their lease anyway.
   */
  release(decision: Decision): Promise<void> {
    // Not an async function: the release's own promise, not one more around it, on every request that held
    // a slot. Anything thrown (not a decision) is still a rejection.
    try {
      return this.#holdings?.release(decision) ?? RELEASED;
    } catch (error) {
      return Promise.reject(error);
    }
  }

  /**
   * Stops renewing the concurrency slots an admitted decision holds, keeping them held: they lapse a
   * `lease` after their last renewal, unless `release` frees them first. The HTTP adapters call it for a
   * response begun by hand (its headers out) whose client went: its handler may still end it, or may
   * never (an SSE handler that stops writing when its client goes), and the slot must not outlive it.
   */
  letLapse(decision: Decision): void {
    this.#holdings?.letLapse(decision);
  }

  /**
   * Replaces the estimate that an admitted decision reserved on its `settle: true` rules (their `cost`) by
   * the actual `cost`, a non-negative integer: more is added now, even past the limit (later requests
   * wait until the window has paid the debt off), less gives the difference back to the window that
   * holds it (once the window has moved on, nothing: the estimate left with it). Once per decision: a
   * later settle changes nothing and resolves as the first. A denied decision, or one without `settle`
   * rules, resolves unchanged. Resolves to the decision with the settled rules' counts after the settle
   * (still admitted); a bad `cost` rejects with `RateLimitRequestError` (`ERR_COST`), changing nothing.
   * Unsettled, the estimate stands.
   */
  settle(decision: Decision, cost: number): Promise<Decision> {
    if (this.#settlements === undefined) {
      // Checked all the same: a bad cost is a bug whether or not a rule settles.
      const refused = settleCostError(cost);
      return refused === undefined ? Promise.resolve(decision) : Promise.reject(refused);
    }
    return this.#settlements.settle(decision, cost);
  }

  /**
   * Waits until the rule (or every rule named, together: all consume or none does) admits `cost` for
   * the key, then consumes it (a `check`): for pacing calls to an API with its own limit. Each try is
   * a decision of the store, so across processes nothing is admitted that `check` would not admit;
   * within a process the waiters of a key are served first come, first served. Rejects at once with
   * `RateLimitExceededError` when the earliest admission is later than `maxWait`, with
   * `RateLimitRequestError` (`ERR_QUEUE_FULL`) when `maxQueue` calls already wait, and with the
   * signal's reason (an `AbortError`) on abort; leaves no timer behind.
   */
  acquire(ruleOrRules: string | readonly string[], key: string, options?: AcquireOptions): Promise<Acquired> {
    return this.#paced.acquire(ruleOrRules, key, options);
  }

  /**
   * A function that decides the named rules together on a key from its arguments before calling `fn`;
   * a denied call throws `RateLimitExceededError` and `fn` is not called (with `maxWait`, it waits for
   * its turn first, as `acquire`). A call that returns is a success and one that throws a failure, for
   * rules that count outcomes. Rules, key and options are checked now.
   */
  wrap<This, A extends unknown[], R>(
    fn: (this: This, ...args: A) => R,
    options: WrapOptions<A>,
  ): (this: This, ...args: A) => Promise<Awaited<R>> {
    return this.#paced.wrap(fn, options);
  }

  /** Clears count, lock and escalation level of a rule for a key, in every process. */
  async reset(rule: string, key: string): Promise<void> {
    await this.#admin.reset(rule, key);
    // A concurrency key's slots are free now: calls waiting for one here try again.
    if (this.#holdings !== undefined) this.#paced.freed(rule, identityOf(key));
  }

  /**
   * Sets the limit of one key of one rule in every process sharing the store, from their next decision,
   * over the rule's limit (number or function); `null` clears it; `for`: it expires then; `reset` leaves it.
   * `{ limit?, window? }` (a `KeyOverride`) sets the key's window too, or only: a size of the rule's type,
   * from the key's next window on, over the rule's window and its function.
   */
  override(
    rule: string,
    key: string,
    limit: number | null | KeyOverride,
    options?: OverrideOptions,
  ): Promise<void> {
    return this.#admin.override(rule, key, limit, options);
  }

  /**
   * Sets the limit of every key of a rule (but keys with an override) in every process, read in each
   * decision's store call; `null` returns to the configured limit. `for`: it expires then.
   */
  setLimit(rule: string, limit: number | null, options?: OverrideOptions): Promise<void> {
    return this.#admin.setLimit(rule, limit, options);
  }

  /** The rule-wide limits in force, with when each ends. */
  limits(): Promise<RuleLimit[]> {
    return this.#admin.limits();
  }

  /** Count, remaining, the limit in force, lock and level of a rule for a key; changes nothing. */
  status(rule: string, key: string): Promise<RuleStatus> {
    return this.#admin.status(rule, key);
  }

  /** Keys of a rule locked now, soonest unlock first. */
  locked(rule: string, options: { limit?: number } = {}): Promise<LockInfo[]> {
    return this.#admin.locked(rule, options);
  }

  /**
   * Adds hooks called on every decision (with its mode and source: store, insurance, deny_cache,
   * policy), every shared-store call (operation, seconds, error) and every lock placed, for metrics.
   * Returns the function that removes them. Without observers the decision path pays nothing.
   */
  observe(observer: LimiterObserver): () => void {
    return this.#observers.add(observer);
  }

  /**
   * The store's state as the limiter has seen it (`'ok'` or `'down'`, since when, the last
   * fault), after asking the store itself when it can (`Store.ping`, under `storeTimeout`). The
   * memory store is `'ok'` unless its last decision threw.
   */
  health(): Promise<StoreHealth> {
    return this.#policy.checkHealth();
  }

  /** Closes the store; calls still waiting for a turn (`acquire`, `wrap` with `maxWait`) reject. */
  async close(): Promise<void> {
    this.#paced.close();
    this.#holdings?.close();
    await Promise.all([this.#store.close(), this.#policy.close()]);
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
