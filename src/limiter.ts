// The limiter: matches rules to a request, asks the store for one all-or-nothing decision, reports outcomes.
import { EventEmitter } from 'node:events';
import { Deadlines } from './deadlines.js';
import { decide, ruleResult } from './decision.js';
import { DenyCache } from './deny-cache.js';
import { parseDuration } from './duration.js';
import { describe, RateLimitConfigError, RateLimitRequestError, StoreTimeoutError } from './errors.js';
import { boundIdentity } from './keys.js';
import { assertCost, type CompiledRule, compileRules, DEFAULTS } from './rules.js';
import { MemoryStore } from './stores/memory-store.js';
import type { EvalMode, EvalResult, OpResult, Store, StoreOp } from './stores/store.js';
import type {
  Decision,
  Duration,
  LockInfo,
  Outcome,
  RequestInfo,
  Rule,
  RuleResult,
  RuleStatus,
} from './types.js';

export interface LimiterOptions {
  /** Where counts live. @default new MemoryStore() */
  store?: Store;
  rules: Rule[];
  /**
   * What a decision becomes when a shared store fails or is slower than `storeTimeout`: `'allow'` admits,
   * `'deny'` refuses, `'insurance'` decides on a per-process memory store until the store answers again.
   * @default 'insurance'
   */
  onStoreError?: 'allow' | 'deny' | 'insurance';
  /** After this long a store call counts as failed. Not applied to the memory store. @default 250 */
  storeTimeout?: Duration;
  /** After a store failure, decisions skip the store for this long before trying it again. @default 1000 */
  storeRetryInterval?: Duration;
  /**
   * Remember keys a shared store denied (locked, or no unit left) and answer them in-process until
   * they could pass. Not used with the memory store. @default true ({ maxKeys: 10000 })
   */
  denyCache?: boolean | { maxKeys?: number };
  /** IPv6 addresses are keyed by this prefix length (48-128). @default 64 */
  ipv6Subnet?: number;
  /** Log decisions and store failures: `true` writes to stderr, a function receives each line. Also `RATEKEEPER_DEBUG=1`. @default false */
  debug?: boolean | ((line: string) => void);
}

export interface LimitedEvent {
  rule: string;
  key: string;
  retryAfterMs: number;
  locked: boolean;
  /** True when answered from the local deny cache. */
  cached: boolean;
}
export interface LockoutEvent {
  rule: string;
  key: string;
  durationMs: number;
  lockedUntil: number;
  level: number;
}
export interface UnlockEvent {
  rule: string;
  key: string;
}
export interface StoreErrorEvent {
  error: Error;
  operation: string;
  policy: 'allow' | 'deny' | 'insurance' | 'none';
}

/** The events a limiter emits; none carries the request body. */
export interface LimiterEvents {
  limited: [LimitedEvent];
  lockout: [LockoutEvent];
  unlock: [UnlockEvent];
  storeError: [StoreErrorEvent];
}

interface Reservation {
  store: Store;
  /** False when the failure policy admitted the request: nothing was consumed, so nothing is refunded. */
  consumed: boolean;
  items: Array<{ rule: CompiledRule; op: StoreOp; receipt: number }>;
}

export class Limiter extends EventEmitter<LimiterEvents> {
  readonly #rules: CompiledRule[];
  readonly #byName = new Map<string, CompiledRule>();
  readonly #store: Store;
  readonly #policy: 'allow' | 'deny' | 'insurance';
  /** `storeTimeout` for a shared store's calls; undefined for a local store. */
  readonly #deadlines: Deadlines | undefined;
  /** The store itself when it can decide synchronously (the memory store): no promise until the answer. */
  readonly #sync: MemoryStore | undefined;
  readonly #retryMs: number;
  readonly #denyCache: DenyCache | undefined;
  readonly #reservations = new WeakMap<Decision, Reservation>();
  readonly #log: ((line: string) => void) | undefined;
  /** Some rule needs outcomes, so allowed decisions keep their reservations. */
  readonly #needsOutcomes: boolean;
  #insurance: MemoryStore | undefined;
  #storeDownUntil = 0;

  constructor(options: LimiterOptions) {
    super();
    if (options === null || typeof options !== 'object') {
      throw new RateLimitConfigError(
        'ERR_OPTION',
        `createLimiter: options must be an object with rules, got ${describe(options)}`,
      );
    }
    const ipv6Subnet = options.ipv6Subnet ?? DEFAULTS.ipv6Subnet;
    if (!Number.isInteger(ipv6Subnet) || ipv6Subnet < 48 || ipv6Subnet > 128) {
      throw new RateLimitConfigError(
        'ERR_OPTION',
        `ipv6Subnet must be an integer from 48 to 128, got ${describe(ipv6Subnet)}`,
      );
    }
    this.#rules = compileRules(options.rules, { ipv6Subnet });
    for (const rule of this.#rules) this.#byName.set(rule.name, rule);
    this.#needsOutcomes = this.#rules.some((r) => r.countOn !== 'all' || r.resetOnSuccess);
    this.#store = options.store ?? new MemoryStore();
    const policy = options.onStoreError ?? 'insurance';
    if (!['allow', 'deny', 'insurance'].includes(policy)) {
      throw new RateLimitConfigError(
        'ERR_OPTION',
        `onStoreError must be 'allow', 'deny' or 'insurance', got ${describe(policy)}`,
      );
    }
    this.#policy = policy;
    const timeoutMs = optionMs('storeTimeout', options.storeTimeout, 250);
    this.#deadlines = this.#store.local
      ? undefined
      : new Deadlines(timeoutMs, (ms) => new StoreTimeoutError(`store did not answer within ${ms} ms`));
    // Duck-typed: a MemoryStore from the other module format (ESM/CJS) decides synchronously too.
    const sync = this.#store as Partial<MemoryStore>;
    this.#sync =
      this.#store.local && typeof sync.evaluateSync === 'function' ? (sync as MemoryStore) : undefined;
    this.#retryMs = optionMs('storeRetryInterval', options.storeRetryInterval, 1000);
    const cache = options.denyCache ?? true;
    if (cache !== false && !this.#store.local) {
      const maxKeys = cache === true ? 10_000 : (cache.maxKeys ?? 10_000);
      if (!Number.isSafeInteger(maxKeys) || maxKeys < 1) {
        throw new RateLimitConfigError(
          'ERR_OPTION',
          `denyCache.maxKeys must be a positive integer, got ${describe(maxKeys)}`,
        );
      }
      this.#denyCache = new DenyCache(maxKeys);
      // An empty rule name: the store may have missed resets (its subscriber reconnected), forget all.
      this.#store.onReset?.((rule, key) =>
        rule === '' ? this.#denyCache?.clear() : this.#denyCache?.delete(rule, key),
      );
    }
    const debug = options.debug ?? process.env.RATEKEEPER_DEBUG === '1';
    this.#log = debug === true ? (line) => process.stderr.write(`ratekeeper ${line}\n`) : debug || undefined;
  }

  /** The rule names, in order. */
  get ruleNames(): string[] {
    return this.#rules.map((r) => r.name);
  }

  /** Each rule's nominal window in whole seconds (0 when it has none, as a cron calendar), for `RateLimit-Policy`'s `w`. */
  get ruleWindows(): Record<string, number> {
    return Object.fromEntries(this.#rules.map((r) => [r.name, r.windowSeconds]));
  }

  // The deciding methods are not `async`: on the memory store the answer is ready in the same turn, and
  // one settled promise is all they cost. A throw (a bad key or cost) is still a rejection, never sync.

  /** Evaluates every rule matching the request and consumes all of them, or none. */
  check(req: RequestInfo): Promise<Decision> {
    try {
      return this.#decide(this.#opsFor(req), 'check');
    } catch (error) {
      return Promise.reject(error);
    }
  }

  /** The answer `check` would give, changing nothing. */
  peek(req: RequestInfo): Promise<Decision> {
    try {
      return this.#decide(this.#opsFor(req), 'peek');
    } catch (error) {
      return Promise.reject(error);
    }
  }

  /** Applies one rule to a key directly (no matching, no key extraction). */
  consume(rule: string, key: string, cost = 1): Promise<Decision> {
    try {
      return this.#decide([this.#directOp(rule, key, cost)], 'check');
    } catch (error) {
      return Promise.reject(error);
    }
  }

  /** Counting, not limiting: always adds `amount`, and reports the windowed total. */
  record(rule: string, key: string, amount = 1): Promise<Decision> {
    try {
      return this.#decide([this.#directOp(rule, key, amount)], 'record');
    } catch (error) {
      return Promise.reject(error);
    }
  }

  /**
   * True when some rule counts only failures or successes, or resets on success: admitted decisions
   * then need `report`. When false, `report` never has anything to do and adapters skip it.
   */
  get needsOutcomes(): boolean {
    return this.#needsOutcomes;
  }

  /**
   * Tells the limiter how an admitted request ended: rules counting only failures (or successes) give
   * the reservation back, and `resetOnSuccess` rules clear their count on success. Once per decision.
   */
  async report(decision: Decision, outcome: Outcome): Promise<void> {
    if (outcome !== 'success' && outcome !== 'failure') {
      throw new TypeError(`report: outcome must be 'success' or 'failure', got ${describe(outcome)}`);
    }
    const reservation = this.#reservations.get(decision);
    if (reservation === undefined) return;
    this.#reservations.delete(decision);
    const { store, consumed, items } = reservation;
    const refunds: Reservation['items'] = [];
    const clears: Reservation['items'] = [];
    for (const item of items) {
      if (outcome === 'success' && item.rule.resetOnSuccess) clears.push(item);
      else if (consumed && item.rule.countOn !== 'all' && item.rule.countOn !== outcome) refunds.push(item);
    }
    try {
      const work = async () => {
        if (refunds.length > 0) await store.refund(refunds);
        for (const { rule, op } of clears) await store.clear(rule.store, op.key);
      };
      await this.#timed(work());
    } catch (error) {
      this.#storeError(error, 'report', 'none');
    }
  }

  /** Clears count, lock and escalation level of a rule for a key, in every process. */
  async reset(rule: string, key: string): Promise<void> {
    const compiled = this.#rule(rule);
    const identity = identityOf(key);
    this.#denyCache?.delete(compiled.name, identity);
    const [wasLocked, wasLockedLocally] = await Promise.all([
      this.#timed(this.#store.reset(compiled.store, identity)),
      this.#insurance?.reset(compiled.store, identity) ?? false,
    ]);
    if (wasLocked || wasLockedLocally)
      this.emit('unlock', { rule: compiled.name, key: identity } satisfies UnlockEvent);
  }

  /** Count, remaining, lock and level of a rule for a key; changes nothing. */
  async status(rule: string, key: string): Promise<RuleStatus> {
    const compiled = this.#rule(rule);
    const op = this.#op(compiled, identityOf(key), 0);
    const { nowMs, results } = await this.#timed(this.#store.evaluate([op], 'peek'));
    const r = results[0] as OpResult;
    return {
      rule: compiled.name,
      key: op.key,
      count: r.count,
      limit: compiled.store.limit,
      remaining: r.remaining,
      resetMs: Math.max(0, r.resetMs),
      locked: r.locked,
      lockRemainingMs: r.locked ? r.lockedUntil - nowMs : 0,
      level: r.level,
    };
  }

  /** Keys of a rule locked now, soonest unlock first. */
  async locked(rule: string, options: { limit?: number } = {}): Promise<LockInfo[]> {
    const compiled = this.#rule(rule);
    const limit = options.limit ?? 100;
    if (!Number.isSafeInteger(limit) || limit < 1 || limit > 10_000) {
      throw new RateLimitConfigError(
        'ERR_OPTION',
        `locked: limit must be an integer from 1 to 10000, got ${describe(limit)}`,
      );
    }
    return this.#timed(this.#store.locked(compiled.store, limit));
  }

  async close(): Promise<void> {
    await Promise.all([this.#store.close(), this.#insurance?.close()]);
  }

  /** A shared store's call under `storeTimeout`; the memory store answers in the same turn anyway. */
  #timed<T>(promise: Promise<T>): Promise<T> {
    return this.#deadlines === undefined ? promise : this.#deadlines.race(promise);
  }

  #rule(name: string): CompiledRule {
    const rule = this.#byName.get(name);
    if (rule === undefined) {
      throw new RateLimitConfigError(
        'ERR_UNKNOWN_RULE',
        `no rule named ${describe(name)}; rules are ${this.ruleNames.join(', ')}`,
      );
    }
    return rule;
  }

  #directOp(rule: string, key: string, cost: number): StoreOp {
    const compiled = this.#rule(rule);
    assertRequestCost(cost, compiled.name);
    return this.#op(compiled, identityOf(key), cost);
  }

  #op(rule: CompiledRule, key: string, cost: number): StoreOp {
    if (rule.periods === undefined) return { rule: rule.store, key, cost };
    const { endMs, nextEndMs } = rule.periods(this.#store.now());
    return { rule: rule.store, key, cost, periodEndMs: endMs, nextPeriodEndMs: nextEndMs };
  }

  /** The ops of every rule that matches the request and finds its key. Throws before anything is consumed. */
  #opsFor(req: RequestInfo): StoreOp[] {
    const ops: StoreOp[] = [];
    for (const rule of this.#rules) {
      let view = req;
      if (rule.matcher !== undefined) {
        const params = rule.matcher(req.method, req.path);
        if (params === undefined) continue;
        for (const _ in params) {
          view = withParams(req, params);
          break;
        }
      }
      let key: string | undefined;
      try {
        key = rule.extract(view);
      } catch (error) {
        throw new RateLimitRequestError(
          'ERR_KEY_FUNCTION',
          `rule "${rule.name}": key function threw: ${(error as Error)?.message ?? error}`,
          {
            cause: error,
          },
        );
      }
      if (key === undefined) continue;
      let cost = rule.cost;
      if (typeof cost === 'function') {
        try {
          cost = cost(view);
        } catch (error) {
          throw new RateLimitRequestError(
            'ERR_COST',
            `rule "${rule.name}": cost function threw: ${(error as Error)?.message ?? error}`,
            {
              cause: error,
            },
          );
        }
        assertRequestCost(cost, rule.name);
      }
      ops.push(this.#op(rule, key, cost));
    }
    return ops;
  }

  #decide(ops: StoreOp[], mode: EvalMode): Promise<Decision> {
    if (ops.length === 0) return Promise.resolve(decide([]));
    const sync = this.#sync;
    if (sync !== undefined)
      return Promise.resolve(this.#conclude(ops, mode, sync, sync.evaluateSync(ops, mode), false));
    return this.#decideShared(ops, mode);
  }

  /**
   * A store that answers asynchronously: the deny cache first, then the store under the timeout; on
   * failure the policy answers.
   */
  async #decideShared(ops: StoreOp[], mode: EvalMode): Promise<Decision> {
    if (mode === 'check' && this.#denyCache !== undefined) {
      const nowMs = this.#store.now();
      for (const op of ops) {
        const cached = op.rule.dryRun ? undefined : this.#denyCache.get(op.rule.name, op.key, nowMs);
        if (cached === undefined) continue;
        const decision = decide([cached]);
        this.#emitLimited(cached, true);
        this.#log?.(`${mode} denied from the deny cache ${logRules([cached])}`);
        return decision;
      }
    }
    const store = this.#store;
    if (store.local) return this.#conclude(ops, mode, store, await store.evaluate(ops, mode), false);
    if (Date.now() >= this.#storeDownUntil) {
      let result: EvalResult | undefined;
      try {
        result = await this.#timed(store.evaluate(ops, mode));
      } catch (error) {
        this.#storeDownUntil = Date.now() + this.#retryMs;
        this.#storeError(error, mode, this.#policy);
      }
      if (result !== undefined) return this.#conclude(ops, mode, store, result, false);
    }
    return this.#fallback(ops, mode);
  }

  /**
   * The decision from the store's answer: events, reservations, the deny cache. `byPolicy`: 'allow'
   * or 'deny' answered, nothing was stored anywhere (the insurance store does store).
   */
  #conclude(ops: StoreOp[], mode: EvalMode, store: Store, result: EvalResult, byPolicy: boolean): Decision {
    const rules: RuleResult[] = new Array(ops.length);
    for (let i = 0; i < ops.length; i++) {
      const op = ops[i] as StoreOp;
      const r = result.results[i] as OpResult;
      rules[i] = ruleResult(op.rule.name, op.key, op.rule.limit, op.rule.dryRun, r);
      if (r.lockedNow) {
        this.emit('lockout', {
          rule: op.rule.name,
          key: op.key,
          durationMs: r.lockedUntil - result.nowMs,
          lockedUntil: r.lockedUntil,
          level: r.level,
        } satisfies LockoutEvent);
      }
    }
    const decision = decide(rules);
    if (mode === 'peek') return decision;
    if (decision.allowed) {
      if (this.#needsOutcomes && mode === 'check')
        this.#reserve(decision, store, !byPolicy, ops, result.results);
    } else {
      for (const r of rules) {
        if (r.allowed || r.dryRun) continue;
        this.#emitLimited(r, false);
        // Cache only the store's own denials nothing can pass: a lock, or a rule with no unit left until
        // resetMs whose count only time or reset can lower (outcome reports give reservations back).
        if (
          this.#denyCache !== undefined &&
          store === this.#store &&
          !byPolicy &&
          (r.locked || (r.remaining === 0 && this.#settled(r.rule)))
        ) {
          this.#denyCache.set(r, result.nowMs + (r.locked ? (r.retryAfterMs ?? 0) : r.resetMs));
        }
      }
    }
    this.#log?.(
      `${mode} ${decision.allowed ? 'allowed' : 'denied'}${byPolicy ? ` by onStoreError '${this.#policy}'` : ''} ${logRules(rules)}`,
    );
    return decision;
  }

  #reserve(decision: Decision, store: Store, consumed: boolean, ops: StoreOp[], results: OpResult[]): void {
    const items: Reservation['items'] = [];
    for (let i = 0; i < ops.length; i++) {
      const op = ops[i] as StoreOp;
      const r = results[i] as OpResult;
      const rule = this.#byName.get(op.rule.name) as CompiledRule;
      if (r.allowed && op.cost > 0 && (rule.countOn !== 'all' || rule.resetOnSuccess))
        items.push({ rule, op, receipt: r.receipt });
    }
    if (items.length > 0) this.#reservations.set(decision, { store, consumed, items });
  }

  /** True when a rule's count never shrinks through outcome reports. */
  #settled(rule: string): boolean {
    const compiled = this.#byName.get(rule);
    return compiled !== undefined && compiled.countOn === 'all' && !compiled.resetOnSuccess;
  }

  #emitLimited(r: RuleResult, cached: boolean): void {
    if (this.listenerCount('limited') === 0) return;
    this.emit('limited', {
      rule: r.rule,
      key: r.key,
      retryAfterMs: r.retryAfterMs ?? 0,
      locked: r.locked,
      cached,
    } satisfies LimitedEvent);
  }

  /** The failure policy's answer while the shared store is failing. */
  #fallback(ops: StoreOp[], mode: EvalMode): Decision {
    if (this.#policy === 'insurance') {
      this.#insurance ??= new MemoryStore();
      return this.#conclude(ops, mode, this.#insurance, this.#insurance.evaluateSync(ops, mode), false);
    }
    const allowed = this.#policy === 'allow';
    const results = ops.map(
      (op): OpResult => ({
        allowed,
        remaining: allowed ? op.rule.limit : 0,
        resetMs: 0,
        retryAfterMs: allowed ? 0 : this.#retryMs,
        locked: false,
        count: 0,
        receipt: 0,
        level: 0,
        lockedUntil: 0,
        lockedNow: false,
      }),
    );
    return this.#conclude(ops, mode, this.#store, { nowMs: Date.now(), results }, true);
  }

  #storeError(error: unknown, operation: string, policy: StoreErrorEvent['policy']): void {
    const err = error instanceof Error ? error : new Error(String(error));
    this.#log?.(`store error during ${operation} (${policy}): ${err.message}`);
    if (this.listenerCount('storeError') > 0)
      this.emit('storeError', { error: err, operation, policy } satisfies StoreErrorEvent);
  }
}

/** Builds a limiter: rules validated now (throws `RateLimitConfigError`), decisions later. */
export function createLimiter(options: LimiterOptions): Limiter {
  return new Limiter(options);
}

/** Rules for the debug log; keys JSON-quoted, so a newline in an identity cannot forge a log line. */
function logRules(rules: readonly RuleResult[]): string {
  return rules.map((r) => `${r.rule}[${JSON.stringify(r.key)}]=${r.remaining}/${r.limit}`).join(' ');
}

/**
 * The request with the params a rule's `match` captured merged in. The spread keeps any extra field of
 * a plain request; the named fields are read explicitly, since the adapters' requests compute some
 * lazily (getters, which a spread skips).
 */
function withParams(req: RequestInfo, params: Record<string, unknown>): RequestInfo {
  return {
    ...req,
    method: req.method,
    path: req.path,
    ip: req.ip,
    headers: req.headers,
    query: req.query,
    params: { ...req.params, ...params },
    body: req.body,
    user: req.user,
  };
}

function identityOf(key: unknown): string {
  if (typeof key === 'number' && Number.isFinite(key)) return String(key);
  if (typeof key !== 'string' || key === '') {
    throw new RateLimitRequestError('ERR_KEY', `key must be a non-empty string, got ${describe(key)}`);
  }
  return boundIdentity(key);
}

function assertRequestCost(cost: unknown, rule: string): asserts cost is number {
  try {
    assertCost(cost, rule);
  } catch (error) {
    throw new RateLimitRequestError('ERR_COST', (error as Error).message);
  }
}

function optionMs(name: string, value: Duration | undefined, fallback: number): number {
  if (value === undefined) return fallback;
  return (
    parseDuration(value) ??
    (() => {
      throw new RateLimitConfigError(
        'ERR_DURATION',
        `${name} must be a duration such as '250ms' or 250, got ${describe(value)}`,
      );
    })()
  );
}
