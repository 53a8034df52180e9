// The `@limited` method decorator: `limiter.wrap` for a class method.
import { refuse } from '../config/refuse.js';
import type { WrapOptions } from './options.js';

/** What `@limited` needs of a limiter: its `wrap` (the decorator is the limiter's call, not a part of it). */
export interface Wrapping {
  wrap<This, A extends unknown[], R>(
    fn: (this: This, ...args: A) => R,
    options: WrapOptions<A>,
  ): (this: This, ...args: A) => Promise<Awaited<R>>;
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
export function limited<A extends unknown[] = unknown[]>(limiter: Wrapping, options: WrapOptions<A>) {
  return <This, M extends LimitableMethod<This, A>>(
    target: M,
    context: ClassMethodDecoratorContext<This, M>,
  ): M => {
    if (context.kind !== 'method') {
      refuse('ERR_OPTION', undefined, `@limited decorates methods, not a ${String(context.kind)}`);
    }
    // The options' functions take the leading arguments; JavaScript passes them all the arguments.
    const leading = options as unknown as WrapOptions<[...A, ...unknown[]]>;
    return limiter.wrap<This, [...A, ...unknown[]], Promise<unknown>>(target, leading) as unknown as M;
  };
}
