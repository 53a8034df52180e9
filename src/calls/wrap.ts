// Service methods under rate limits, no HTTP: `limiter.wrap(fn, options)` and the `@limited` method decorator.

import { describe, RateLimitConfigError, RateLimitExceededError, RateLimitRequestError } from '../errors.js';
import type { Limiter } from '../limiter/limiter.js';
import type { Decision, Outcome } from '../types.js';
import { argumentKey } from './call-key.js';
import { resolveWrap, type WrapOptions } from './options.js';

/** What a wrapped function needs of its limiter. */
export interface WrapParts {
  /** Checks that the rules exist (and, for waiting, can be waited on); throws `RateLimitConfigError`. */
  check(rules: readonly string[], waits: boolean, where: string): void;
  /** Decides the rules together on the key (all consume or none does). */
  decide(rules: readonly string[], key: string, cost: number): Promise<Decision>;
  /** Waits up to `maxWaitMs` for the rules to admit the cost together (see calls/acquire.ts). */
  waitTurn(rules: readonly string[], key: string, cost: number, maxWaitMs: number): Promise<Decision>;
  /** How the call ended, for rules that count outcomes (`limiter.report`). */
  report(decision: Decision, outcome: Outcome): Promise<void>;
}

/** See `Limiter.wrap`. */
export function wrapFunction<This, A extends unknown[], R>(
  fn: (this: This, ...args: A) => R,
  options: WrapOptions<A>,
  parts: WrapParts,
): (this: This, ...args: A) => Promise<Awaited<R>> {
  if (typeof fn !== 'function')
    throw new RateLimitConfigError('ERR_OPTION', `wrap: fn must be a function, got ${describe(fn)}`);
  const { rules, key, cost, waitMs } = resolveWrap(options);
  parts.check(rules, waitMs > 0, 'wrap');
  const keyOf = argumentKey(key);
  const costOf = typeof cost === 'function' ? (args: A) => costFrom(cost, args) : () => cost;
  return async function limitedCall(this: This, ...args: A): Promise<Awaited<R>> {
    const identity = keyOf(args);
    const units = costOf(args);
    const decision =
      waitMs > 0
        ? await parts.waitTurn(rules, identity, units, waitMs)
        : await parts.decide(rules, identity, units);
    if (!decision.allowed) throw new RateLimitExceededError(decision);
    // A call that returns is a success, one that throws a failure (countOn, resetOnSuccess).
    let result: Awaited<R>;
    try {
      result = await fn.apply(this, args);
    } catch (error) {
      await parts.report(decision, 'failure');
      throw error;
    }
    await parts.report(decision, 'success');
    return result;
  };
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
 * An async method whose first arguments are those the options' functions take (`A`; any with a key
 * template). Declared as a method, so its parameters are compared both ways: the decorator fits any
 * method whose leading arguments match.
 */
type LimitableMethod<This, A extends unknown[]> = {
  method(this: This, ...args: [...A, ...unknown[]]): Promise<unknown>;
}['method'];

/**
 * A standard (TC39, TypeScript 5+ without `experimentalDecorators`) decorator for an async method:
 * each call is decided as `limiter.wrap(method, options)` would decide it; a denied call throws
 * `RateLimitExceededError` and the method is not run. List every rule in one decorator to decide
 * them together: stacked decorators decide one after the other, and an outer one stays spent when
 * an inner one denies.
 * @example
 * class Mailer {
 *   @limited(limiter, { rules: ['code-minute', 'code-hour'], key: '{0.email}' })
 *   async sendCode(to: { email: string }): Promise<void> { ... }
 * }
 */
export function limited<A extends unknown[] = unknown[]>(limiter: Limiter, options: WrapOptions<A>) {
  return <This, M extends LimitableMethod<This, A>>(
    target: M,
    context: ClassMethodDecoratorContext<This, M>,
  ): M => {
    if (context.kind !== 'method') {
      throw new RateLimitConfigError(
        'ERR_OPTION',
        `@limited decorates methods, not a ${String(context.kind)}`,
      );
    }
    // The options' functions take the leading arguments; JavaScript passes them all the arguments.
    const leading = options as unknown as WrapOptions<[...A, ...unknown[]]>;
    return limiter.wrap<This, [...A, ...unknown[]], Promise<unknown>>(target, leading) as unknown as M;
  };
}
