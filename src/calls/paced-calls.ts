// The limiter's calls that are not one request: `acquire` (wait for a turn) and `wrap` (a service method
// decided on its arguments), over the turn queues of calls/acquire.ts and the wrapper of calls/wrap.ts.

import { identityOf, type OpBuilder } from '../limiter/request-ops.js';
import type { Decision, Outcome } from '../types.js';
import { assertWaitable, costNeverFits, TurnQueues } from './acquire.js';
import { type AcquireOptions, resolveAcquire, type WrapOptions } from './options.js';
import { wrapFunction } from './wrap.js';

/** What paced calls need from the limiter. */
export interface PacedParts {
  ops: OpBuilder;
  /** A `check` of the named rules together on a key given directly, at `cost`. */
  decide: (rules: readonly string[], key: string, cost: number) => Promise<Decision>;
  report: (decision: Decision, outcome: Outcome) => Promise<void>;
}

export class PacedCalls {
  readonly #parts: PacedParts;
  /** Waiters of `acquire` and of wrapped functions with `wait`. */
  readonly #turns = new TurnQueues();

  constructor(parts: PacedParts) {
    this.#parts = parts;
  }

  /** See `Limiter.acquire`. Rejects, never throws. */
  acquire(rule: string, key: string, options?: AcquireOptions): Promise<Decision> {
    try {
      const { cost, maxWaitMs, signal } = resolveAcquire(options);
      assertWaitable([this.#parts.ops.rule(rule)], 'acquire');
      return this.#waitTurn([rule], identityOf(key), cost, maxWaitMs, signal);
    } catch (error) {
      return Promise.reject(error);
    }
  }

  /** See `Limiter.wrap`. */
  wrap<This, A extends unknown[], R>(
    fn: (this: This, ...args: A) => R,
    options: WrapOptions<A>,
  ): (this: This, ...args: A) => Promise<Awaited<R>> {
    const { ops, decide, report } = this.#parts;
    return wrapFunction(fn, options, {
      check: (rules, waits, where) => {
        const compiled = rules.map((name) => ops.rule(name));
        if (waits) assertWaitable(compiled, where);
      },
      decide,
      waitTurn: (rules, key, cost, maxWaitMs) => this.#waitTurn(rules, key, cost, maxWaitMs, undefined),
      report,
    });
  }

  /** Calls still waiting for a turn reject; later ones reject at once. */
  close(): void {
    this.#turns.close();
  }

  #waitTurn(
    rules: readonly string[],
    key: string,
    cost: number,
    maxWaitMs: number,
    signal: AbortSignal | undefined,
  ): Promise<Decision> {
    const compiled = rules.map((name) => this.#parts.ops.rule(name));
    return this.#turns.take(
      `${rules.join(',')}\0${key}`,
      cost,
      maxWaitMs,
      signal,
      (units) => this.#parts.decide(rules, key, units),
      (decision, units) => costNeverFits(compiled, decision, units),
    );
  }
}
