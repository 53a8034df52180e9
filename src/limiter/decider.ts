// The path one decision takes: the deny cache, the store under the failure policy, then the answer folded
// into a Decision with its events, reservations, deny-cache entries and debug line; below, the deny cache.
import type { EvalMode, EvalResult, OpResult, Store, SyncStore } from '../stores/store.js';
import type { Decision, RuleResult } from '../types.js';
import { decide, ruleResult } from './decision.js';
import type { EventEmitter } from './event-emitter.js';
import {
  type DebugLog,
  emitLimited,
  emitLockout,
  emitStoreError,
  type LimiterEvents,
  logRules,
} from './events.js';
import type { AnswerSource, FailurePolicy, HealthState } from './failure-policy.js';
import type { Holdings } from './holdings.js';
import type { DecisionSource, Observers } from './observers.js';
import type { RuleOp } from './op-builder.js';
import type { Reservations } from './reservations.js';
import type { Settlements } from './settlements.js';

/** The limiter's parts a decision goes through. */
export interface DeciderParts {
  /** Where events go: the limiter itself. */
  events: EventEmitter<LimiterEvents>;
  store: Store;
  policy: FailurePolicy;
  denyCache: DenyCache | undefined;
  reservations: Reservations;
  log: DebugLog;
  /** Some rule counts outcomes, so admitted decisions keep their reservations. */
  needsOutcomes: boolean;
  observers: Observers;
  /** Only when some rule is a concurrency window: the slots admitted decisions hold. */
  holdings: Holdings | undefined;
  /** Only when some rule settles its cost: the estimates admitted decisions reserved. */
  settlements: Settlements | undefined;
}

/** How the debug log names where a decision came from (the policy's line names its onStoreError). */
const SOURCE_WORDS: Record<Exclude<DecisionSource, 'policy'>, string> = {
  store: 'by the store',
  insurance: 'by the insurance store',
  deny_cache: 'from the deny cache',
};

export class Decider {
  readonly #parts: DeciderParts;
  /** The failure policy's `sync`: the store, when decisions call it synchronously (the memory store). */
  readonly #sync: SyncStore | undefined;
  /** A shared store that answers some decisions in the same call (its leased units), declining the rest. */
  readonly #leased: Store | undefined;
  readonly #health: HealthState;

  constructor(parts: DeciderParts) {
    this.#parts = parts;
    this.#sync = parts.policy.sync;
    this.#leased =
      this.#sync === undefined && typeof parts.store.evaluateSync === 'function' ? parts.store : undefined;
    this.#health = parts.policy.health;
  }

  /**
   * Decides a request's ops together. On a synchronous store (the memory store), and for a shared store's
   * leased units, the promise is settled already; a fault, the store's or a listener's, is a rejection,
   * never a throw.
   */
  decide(ops: RuleOp[], mode: EvalMode): Promise<Decision> {
    if (ops.length === 0) return Promise.resolve(decide([]));
    const sync = this.#sync;
    if (sync === undefined) {
      const leased = this.#leased;
      if (leased === undefined) return this.#decideShared(ops, mode);
      let answer: EvalResult | undefined;
      try {
        answer = leased.evaluateSync?.(ops, mode);
      } catch {
        // Its fault, if any, is evaluate's too, and there the failure policy answers it.
        answer = undefined;
      }
      if (answer === undefined) return this.#decideShared(ops, mode);
      try {
        // Units counted in the store already (a block's): no call, so nothing to time or fall back from.
        return Promise.resolve(this.#conclude(ops, mode, leased, answer, 'store', 0));
      } catch (error) {
        return Promise.reject(error);
      }
    }
    let result: EvalResult | undefined;
    try {
      result = sync.evaluateSync(ops, mode);
      this.#health.succeeded();
      return Promise.resolve(this.#conclude(ops, mode, sync, result, 'store', 0));
    } catch (error) {
      // The store's fault goes into its health; a listener's that threw after it answered is not the store's.
      return result === undefined ? this.#parts.policy.localFailed(error) : Promise.reject(error);
    }
  }

  /**
   * A store that answers asynchronously: the deny cache first, then the store under the timeout; on
   * failure the policy answers.
   */
  async #decideShared(ops: RuleOp[], mode: EvalMode): Promise<Decision> {
    const { store, policy, denyCache, events, log, observers } = this.#parts;
    // The store's clock as this request is sent: deny-cache entries are anchored here (see DenyCache).
    const sentMs = denyCache !== undefined && mode === 'check' ? store.now() : 0;
    if (mode === 'check' && denyCache !== undefined) {
      const cached = denyCache.find(ops, sentMs);
      if (cached !== undefined) {
        const decision = decide([cached]);
        emitLimited(events, cached, true);
        if (observers.decisions) observers.decision(decision, mode, 'deny_cache');
        log?.(`${mode} denied ${SOURCE_WORDS.deny_cache} ${logRules([cached])}`);
        return decision;
      }
    }
    if (store.local) {
      let result: EvalResult;
      try {
        result = await store.evaluate(ops, mode);
      } catch (error) {
        return policy.localFailed(error);
      }
      policy.health.succeeded();
      return this.#conclude(ops, mode, store, result, 'store', 0);
    }
    if (policy.storeUsable) {
      const startedMs = observers.storeCalls ? performance.now() : -1;
      let result: EvalResult | undefined;
      try {
        result = await policy.timed(() => store.evaluate(ops, mode));
      } catch (error) {
        policy.decisionFailed(error);
        if (startedMs >= 0) observers.storeCall(mode, startedMs, error);
        emitStoreError(events, log, error, mode, policy.policy);
      }
      if (result !== undefined) {
        policy.health.succeeded();
        if (startedMs >= 0) observers.storeCall(mode, startedMs);
        return this.#conclude(ops, mode, store, result, 'store', sentMs);
      }
    }
    const fallback = policy.fallback(ops, mode);
    return this.#conclude(fallback.ops, mode, fallback.store, fallback.result, fallback.source, 0);
  }

  /**
   * The decision from a store's answer: events, reservations, the deny cache, the debug log. `sentMs`:
   * the store's clock when a 'check' was sent to a shared store with a deny cache (else unused).
   */
  #conclude(
    ops: RuleOp[],
    mode: EvalMode,
    store: Store,
    result: EvalResult,
    source: AnswerSource,
    sentMs: number,
  ): Decision {
    const { events, denyCache, log, observers } = this.#parts;
    const rules: RuleResult[] = new Array(ops.length);
    for (let i = 0; i < ops.length; i++) {
      const op = ops[i] as RuleOp;
      const r = result.results[i] as OpResult;
      rules[i] = ruleResult(op.rule.name, op.key, r.limit, op.rule.dryRun, r);
      // The client's own window, for its `RateLimit-Policy`: its override's, else its window function's.
      if (r.windowMs !== undefined) (rules[i] as RuleResult).windowSeconds = windowSecondsOf(r.windowMs);
      else if (op.compiled.chosen !== undefined)
        (rules[i] as RuleResult).windowSeconds = op.choice?.windowSeconds ?? op.compiled.windowSeconds;
      if (r.lockedNow) {
        const event = emitLockout(events, op, r, result.nowMs);
        if (observers.lockouts) observers.lockout(event);
      }
    }
    const decision = decide(rules);
    if (observers.decisions) observers.decision(decision, mode, source);
    if (mode === 'peek') return decision;
    if (log !== undefined) {
      const by =
        source === 'policy' ? `by onStoreError '${this.#parts.policy.policy}'` : SOURCE_WORDS[source];
      log(`${mode} ${decision.allowed ? 'allowed' : 'denied'} ${by} ${logRules(rules)}`);
    }
    // Only the shared store's own answers: the insurance store and the policy know less than it does.
    if (source === 'store') denyCache?.learn(ops, rules, mode, sentMs);
    // The policy's answers consumed nothing: no slot is held, no estimate reserved.
    if (source !== 'policy' && (decision.allowed || mode === 'record')) {
      this.#parts.holdings?.hold(decision, store, ops, result.results, mode === 'record');
      if (mode === 'check') this.#parts.settlements?.keep(decision, store, ops, result.results);
    }
    if (decision.allowed) {
      if (this.#parts.needsOutcomes && mode === 'check')
        this.#parts.reservations.keep(decision, store, source !== 'policy', ops, result.results);
    } else {
      for (let i = 0; i < rules.length; i++) {
        const r = rules[i] as RuleResult;
        if (r.allowed || r.dryRun) continue;
        emitLimited(events, r, false);
      }
    }
    return decision;
  }
}

// Local deny cache: denials of a shared store, answered in-process while the store would answer the same.

interface Cached {
  result: RuleResult;
  /** The store's clock when the request that got this answer was sent (`store.now()`). */
  atMs: number;
  /** Until when the store would give the same answer. */
  untilMs: number;
  /** The cost the answer is for; undefined for a lock, which denies every cost. */
  cost: number | undefined;
  /**
   * The limit the request asked for (`StoreOp.limit`); undefined for a lock. A request at another
   * limit (a limit function giving more after a plan upgrade) is the store's to decide.
   */
  limit: number | undefined;
  /**
   * The window size the request was decided on (a window chosen per request); undefined for a lock. A
   * request of another size (the client's plan changed) is the store's to decide: GCRA prices it anew.
   */
  sizeMs: number | undefined;
}

/**
 * What a shared store denied, answered without asking it again, and only while it would answer the
 * same: a lock (any cost, until it ends), or a denial of a rule whose count only time or `reset` can
 * lower, for requests of the same cost (a cost 0 or a smaller cost may pass: the store decides it),
 * until a unit comes back or the request would be admitted, whichever is first. A rule that counts
 * outcomes may get units back from `report`, so its denials are not kept.
 *
 * Times are on the store's clock and anchored where the request was sent, not at the store's own
 * "now" in its answer: the store's clock as seen from this process (`store.now()`, Redis time
 * estimated from an offset) may be some ms off the server's, and measuring both ends of an entry
 * with it cancels that offset. An answer sent before the store decided can only end early, never
 * late, so the cache never refuses what the store would admit.
 */
export class DenyCache {
  readonly #entries = new Map<string, Cached>();
  readonly #maxKeys: number;
  /** The longest an entry is kept: a store that cannot announce resets elsewhere (`StoreLiveness.staleAfterMs`). */
  readonly #maxAgeMs: number;

  constructor(maxKeys: number, maxAgeMs = Number.POSITIVE_INFINITY) {
    this.#maxKeys = maxKeys;
    this.#maxAgeMs = maxAgeMs;
  }

  get size(): number {
    return this.#entries.size;
  }

  /**
   * The cached denial of `rule` for `key` at `nowMs`, for a request of `cost`, with its times counted
   * down; undefined when none applies.
   */
  get(
    rule: string,
    key: string,
    nowMs: number,
    cost: number,
    limit?: number,
    sizeMs?: number,
  ): RuleResult | undefined {
    const id = `${rule}\u0000${key}`;
    const cached = this.#entries.get(id);
    if (cached === undefined || (cached.cost !== undefined && cached.cost !== cost)) return undefined;
    if (cached.limit !== undefined && limit !== undefined && cached.limit !== limit) return undefined;
    if (cached.sizeMs !== undefined && sizeMs !== undefined && cached.sizeMs !== sizeMs) return undefined;
    if (nowMs >= cached.untilMs) {
      this.#entries.delete(id);
      return undefined;
    }
    const elapsed = Math.max(0, nowMs - cached.atMs);
    const result = cached.result;
    return {
      ...result,
      resetMs: Math.max(0, result.resetMs - elapsed),
      retryAfterMs: Math.max(1, (result.retryAfterMs ?? 0) - elapsed),
    };
  }

  /** The first cached denial among a request's ops; dry-run rules never deny, so they are not looked up. */
  find(ops: readonly RuleOp[], nowMs: number): RuleResult | undefined {
    // Nothing denied lately (the usual case): no id to build per op.
    if (this.#entries.size === 0) return undefined;
    for (const op of ops) {
      const cached = op.rule.dryRun
        ? undefined
        : this.get(op.rule.name, op.key, nowMs, op.cost, op.limit, op.rule.sizeMs);
      if (cached !== undefined) return cached;
    }
    return undefined;
  }

  /**
   * Learns from the shared store's own answer to a request sent at `atMs`: a 'check' it denied is
   * remembered when the cache can answer for the store; any other answer about a key (admitted, or
   * a 'record' that added to it) means what was remembered of that key may be out of date: forgotten.
   */
  learn(
    ops: readonly RuleOp[],
    results: readonly RuleResult[],
    mode: 'check' | 'record',
    atMs: number,
  ): void {
    for (let i = 0; i < ops.length; i++) {
      const op = ops[i] as RuleOp;
      const r = results[i] as RuleResult;
      if (mode === 'check' && !r.allowed && !r.dryRun && this.#remember(op, r, atMs)) continue;
      if (this.#entries.size > 0) this.delete(op.rule.name, op.key);
    }
  }

  /** Remembers a denial the cache can answer for the store; false when it cannot. */
  #remember(op: RuleOp, r: RuleResult, atMs: number): boolean {
    const retryAfterMs = r.retryAfterMs ?? 0;
    if (r.locked) {
      this.set(r, atMs, atMs + retryAfterMs, undefined);
      return true;
    }
    const facts = op.compiled.facts;
    if (facts.countsOutcomes) return false;
    // A slot frees whenever its holder releases it, in any process: no time the denial surely holds for.
    if (facts.holdsSlots) return false;
    // Decided at an override's limit rather than the one asked for: once the override ends (its 'for'
    // runs out) the key's limit is the request's again, which the denial says nothing about.
    if (r.limit !== op.limit) return false;
    // Likewise at an override's window (decider.ts sets windowSeconds from it) other than the request's.
    if (r.windowSeconds !== undefined && r.windowSeconds !== windowSecondsOf(op.rule.sizeMs)) return false;
    // A bucket in debt (a record took it past its capacity) counts down with every unit that drips back,
    // before any unit is free: its count would go stale in the cache. (A window's count only ever resets.)
    if (facts.bucket && r.count > facts.capacity(r.limit)) return false;
    // After resetMs a unit is back (remaining and count change), after retryAfterMs this cost fits.
    const sameForMs = Math.min(r.resetMs, retryAfterMs);
    if (sameForMs <= 0) return false;
    this.set(r, atMs, atMs + sameForMs, op.cost, op.limit, op.rule.sizeMs);
    return true;
  }

  /**
   * Remembers `result`, the answer to a request sent at `atMs`, until `untilMs`, for requests of
   * `cost`, `limit` and window `sizeMs` (undefined: every cost, every limit, every size). The oldest entry makes room when full.
   */
  set(
    result: RuleResult,
    atMs: number,
    untilMs: number,
    cost: number | undefined,
    limit?: number,
    sizeMs?: number,
  ): void {
    const id = `${result.rule}\u0000${result.key}`;
    this.#entries.delete(id);
    if (this.#entries.size >= this.#maxKeys) {
      const oldest = this.#entries.keys().next();
      if (!oldest.done) this.#entries.delete(oldest.value);
    }
    const untilCapped = Math.min(untilMs, atMs + this.#maxAgeMs);
    this.#entries.set(id, { result, atMs, untilMs: untilCapped, cost, limit, sizeMs });
  }

  delete(rule: string, key: string): void {
    this.#entries.delete(`${rule}\u0000${key}`);
  }

  /** Forgets every key of a rule (its rule-wide limit changed): rare, so a walk over the entries. */
  deleteRule(rule: string): void {
    const prefix = `${rule}\u0000`;
    for (const id of this.#entries.keys()) if (id.startsWith(prefix)) this.#entries.delete(id);
  }

  clear(): void {
    this.#entries.clear();
  }

  /** A key reset in the store (`key` empty: a rule-wide limit changed; both empty: changes may be missed). */
  forgetReset(rule: string, key: string): void {
    if (rule === '') this.clear();
    else if (key === '') this.deleteRule(rule);
    else this.delete(rule, key);
  }
}

/** A window's `w` in the `RateLimit-Policy` header: whole seconds, at least 1. */
function windowSecondsOf(sizeMs: number): number {
  return Math.max(1, Math.ceil(sizeMs / 1000));
}
