// Calls the limiter decides outside HTTP: `acquire` (wait for a turn) and `wrap` (a function decided on
// its arguments), both over the turn queues of calls/turn-queues.ts when they wait.

import { mustBe, refuse } from '../config/refuse.js';
import { describe, RateLimitExceededError, RateLimitRequestError } from '../errors.js';
import { identityOf } from '../keys/direct-key.js';
import type { CompiledRule } from '../rules/compile.js';
import type { Acquired, Decision, Outcome } from '../types.js';
import { argumentKey } from './call-key.js';
import {
  type AcquireOptions,
  type ResolvedWait,
  resolveAcquire,
  resolveWrap,
  type WrapOptions,
} from './options.js';
import { TurnQueues } from './turn-queues.js';

/** What paced calls need from the limiter (it imports them; they never import it). */
export interface PacedParts {
  /** The rule of a name; throws `RateLimitRequestError` for a name no rule has. */
  ops: { rule(name: string): CompiledRule };
  /** A `check` of the named rules together on a key given directly, at `cost`. */
  decide: (rules: readonly string[], key: string, cost: number) => Promise<Decision>;
  report: (decision: Decision, outcome: Outcome) => Promise<void>;
  /** Frees the slots a decision holds (`limiter.release`). */
  release: (decision: Decision) => Promise<void>;
  /**
   * Called once, when a call first waits on a concurrency rule: from then on, `freed` should hear of the
   * slots freed in other processes too (the store's announcements).
   */
  listenFrees: () => void;
  /**
   * How often a call waiting for a slot asks the store again when frees in other processes cannot be
   * heard (`StoreLiveness.staleAfterMs`); undefined: they are heard, and it waits for one (or a lease's end).
   */
  slotPollMs: number | undefined;
}

export class PacedCalls {
  readonly #parts: PacedParts;
  /** Waiters of `acquire` and of wrapped functions with `maxWait`. */
  readonly #turns: TurnQueues;

  constructor(parts: PacedParts) {
    this.#parts = parts;
    this.#turns = new TurnQueues(undefined, parts.listenFrees, parts.slotPollMs);
  }

  /** See `Limiter.acquire`. Rejects, never throws. */
  acquire(ruleOrRules: string | readonly string[], key: string, options?: AcquireOptions): Promise<Acquired> {
    try {
      const { rules, cost, ...wait } = resolveAcquire(ruleOrRules, options);
      this.#waitable(rules, 'acquire');
      const release = this.#parts.release;
      return this.#turn('acquire', rules, identityOf(key), cost, wait).then((decision) => {
        // The decision itself, `release` hidden from copies and JSON (a copy reports, settles and releases too).
        Object.defineProperty(decision, 'release', { value: () => release(decision) });
        return decision as Acquired;
      });
    } catch (error) {
      return Promise.reject(error);
    }
  }

  /**
   * Slots of `rule` for `key` were freed (released, reset; `('', '')`: frees may have been missed): calls
   * waiting on them try again now.
   */
  freed(rule: string, key: string): void {
    this.#turns.freed(rule, key);
  }

  /** See `Limiter.wrap`. */
  wrap<This, A extends unknown[], R>(
    fn: (this: This, ...args: A) => R,
    options: WrapOptions<A>,
  ): (this: This, ...args: A) => Promise<Awaited<R>> {
    if (typeof fn !== 'function') refuse('ERR_OPTION', 'wrap', mustBe('fn', 'a function', fn));
    const { rules, key, cost, ...wait } = resolveWrap(options);
    if (wait.maxWaitMs > 0) this.#waitable(rules, 'wrap');
    else for (const name of rules) this.#parts.ops.rule(name);
    const keyOf = argumentKey(key);
    const costOf = typeof cost === 'function' ? (args: A) => costFrom(cost, args) : () => cost;
    const report = this.#parts.report;
    const turn =
      wait.maxWaitMs > 0
        ? (identity: string, units: number) => this.#turn('wrap', rules, identity, units, wait)
        : (identity: string, units: number) => this.#decideNow(rules, identity, units, wait.signal);
    return async function limitedCall(this: This, ...args: A): Promise<Awaited<R>> {
      const decision = await turn(keyOf(args), costOf(args));
      // A call that returns is a success, one that throws a failure (countOn, resetOnSuccess).
      let result: Awaited<R>;
      try {
        result = await fn.apply(this, args);
      } catch (error) {
        await report(decision, 'failure');
        throw error;
      }
      await report(decision, 'success');
      return result;
    };
  }

  /** Calls still waiting for a turn reject; later ones reject at once. */
  close(): void {
    this.#turns.close();
  }

  /** Throws `RateLimitConfigError` for an unknown rule, or one with a lockout (see `assertWaitable`). */
  #waitable(rules: readonly string[], where: string): void {
    assertWaitable(
      rules.map((name) => this.#parts.ops.rule(name)),
      where,
    );
  }

  /** One decision, no waiting: the admitting decision, or `RateLimitExceededError`. */
  async #decideNow(
    rules: readonly string[],
    key: string,
    cost: number,
    signal: AbortSignal | undefined,
  ): Promise<Decision> {
    if (signal?.aborted) throw signal.reason;
    const decision = await this.#parts.decide(rules, key, cost);
    if (!decision.allowed) throw new RateLimitExceededError(decision);
    return decision;
  }

  /** A place in the queue of the rules and key, until a try is admitted (see `TurnQueues.take`). */
  #turn(
    where: string,
    rules: readonly string[],
    key: string,
    cost: number,
    { maxWaitMs, signal, maxQueue }: ResolvedWait,
  ): Promise<Decision> {
    const { ops, decide } = this.#parts;
    const compiled = rules.map((name) => ops.rule(name));
    return this.#turns.take({
      id: `${rules.join(',')}\0${key}`,
      label: `${where} on ${rules.length === 1 ? 'rule' : 'rules'} ${rules.map((r) => `"${r}"`).join(', ')} for key ${describe(key)}`,
      cost,
      maxWaitMs,
      signal,
      maxQueue,
      attempt: (units) => decide(rules, key, units),
      neverFits: (decision, units) => costNeverFits(compiled, decision, units),
      key,
      slotRules: compiled.filter((rule) => rule.facts.holdsSlots).map((rule) => rule.name),
    });
  }
}

function costFrom<A extends unknown[]>(cost: (...args: A) => number, args: A): number {
  try {
    return cost(...args);
  } catch (error) {
    throw new RateLimitRequestError(
      'ERR_COST',
      `wrap: cost function threw: ${(error as Error)?.message ?? describe(error)}`,
      { cause: error },
    );
  }
}

/**
 * Refuses rules with a lockout: a try that is denied would lock the key, so waiting for a turn would
 * turn into waiting out a lock.
 */
export function assertWaitable(rules: readonly CompiledRule[], where: string): void {
  for (const rule of rules) {
    if (rule.store.lockout === undefined) continue;
    refuse(
      'ERR_OPTION',
      where,
      `rule "${rule.name}" has a lockout, and a denied try would lock the key: waiting for a turn takes rules without one`,
    );
  }
}

/** A cost above what a denying rule holds at once (its limit, or its burst) is never admitted: say so at once. */
export function costNeverFits(
  rules: readonly CompiledRule[],
  decision: Decision,
  cost: number,
): Error | undefined {
  for (const r of decision.rules) {
    if (r.allowed || r.locked || r.dryRun) continue;
    const store = rules.find((rule) => rule.name === r.rule)?.store;
    const most = store !== undefined && store.burst > 0 ? store.burst : r.limit;
    if (cost > most) {
      return new RateLimitRequestError(
        'ERR_COST',
        `rule "${r.rule}": a cost of ${cost} never fits, it admits at most ${most} at once; nothing was consumed`,
      );
    }
  }
  return undefined;
}
