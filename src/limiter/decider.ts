// The path one decision takes: the deny cache, the store under the failure policy, then the answer folded
// into a Decision with its events, reservations, deny-cache entries and debug line.

import type { EvalMode, EvalResult, OpResult, Store, SyncStore } from '../stores/store.js';
import type { Decision, RuleResult } from '../types.js';
import { decide, ruleResult } from './decision.js';
import type { DenyCache } from './deny-cache.js';
import type { EventEmitter } from './event-emitter.js';
import {
  type DebugLog,
  emitLimited,
  emitLockout,
  emitStoreError,
  type LimiterEvents,
  logRules,
} from './events.js';
import type { AnswerSource, FailurePolicy } from './failure-policy.js';
import type { Holdings } from './holdings.js';
import type { DecisionSource, Observers } from './observers.js';
import type { RuleOp } from './op-builder.js';
import type { Reservations } from './reservations.js';
import type { Settlements } from './settlements.js';
import type { HealthState } from './store-health.js';

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
  readonly #health: HealthState;

  constructor(parts: DeciderParts) {
    this.#parts = parts;
    this.#sync = parts.policy.sync;
    this.#health = parts.policy.health;
  }

  /**
   * Decides a request's ops together. On a synchronous store (the memory store) the promise is settled
   * already; a fault, the store's or a listener's, is a rejection, never a throw.
   */
  decide(ops: RuleOp[], mode: EvalMode): Promise<Decision> {
    if (ops.length === 0) return Promise.resolve(decide([]));
    const sync = this.#sync;
    if (sync === undefined) return this.#decideShared(ops, mode);
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
