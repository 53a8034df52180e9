// NestJS guard and decorators: the request sequence (adapters/exchange.ts) for HTTP requests on the Express or
// the Fastify platform, GraphQL resolvers and WebSocket messages (their exchanges in adapters/nest-exchange.ts).

import {
  applyDecorators,
  type CanActivate,
  type CustomDecorator,
  type ExecutionContext,
  HttpException,
  SetMetadata,
  UseGuards,
} from '@nestjs/common';
import { ADAPTER_DEFAULTS, RULE_DEFAULTS } from '../src/defaults.js';
import type { Decision, Limiter, Rule } from '../src/index.js';
import { parseDuration } from '../src/rules/duration.js';
import { createSetup, limiterOf, type RateLimitOptions, routeSetups, type Setup } from './common.js';
import { exchange, type HttpExchange } from './exchange.js';
import { httpTarget, platformExchange, WsExchange, wsDenial } from './nest-exchange.js';

export type { RateLimitOptions } from './common.js';
export { SPOOFABLE_IP_WARNING } from './common.js';

declare global {
  namespace Express {
    interface Request {
      /** The rate-limit decision for this request, set by `RateLimitGuard` before the handler runs. */
      rateLimit?: Decision;
    }
  }
}

export interface NestRateLimitOptions extends RateLimitOptions<ExecutionContext> {
  /**
   * Answers a denial instead of the default `RateLimitException`; the rate-limit headers and `Retry-After`
   * are already set. Throw an `HttpException` of your own here, or answer through the platform's response.
   * When it returns without answering, the default `RateLimitException` is thrown.
   * @default throws RateLimitException: `{ statusCode, message }` through the app's exception filters
   */
  handler?: (context: ExecutionContext, decision: Decision) => unknown;
}

/**
 * The guard's denial, an `HttpException`: the app's exception filters see it (a global filter for
 * `HttpException` or for this class formats it), and Nest's own filter answers `{ statusCode: 429, message:
 * 'Too Many Requests' }`. The `message` option replaces the body: a string is the `message`, an object is
 * the whole body. The rate-limit headers and `Retry-After` are set before it is thrown.
 */
export class RateLimitException extends HttpException {
  /** The decision that denied the request (its `rule`, `retryAfterMs`, `rules`...). */
  readonly decision: Decision;

  constructor(decision: Decision, statusCode = 429, body?: unknown) {
    super(
      body === undefined || typeof body === 'string'
        ? { statusCode, message: body ?? ADAPTER_DEFAULTS.nestMessage }
        : (body as Record<string, unknown>),
      statusCode,
    );
    this.decision = decision;
  }
}

/** Metadata key of `@RateLimit` and `@SkipRateLimit`: a limiter, or `false` for none. */
export const RATE_LIMIT_METADATA = 'ratekeeper:rate-limit';

/**
 * A Nest guard limiting requests by `rules` (a limiter on the memory store is built for them) or by an
 * existing `limiter`: `app.useGlobalGuards(new RateLimitGuard(limiter))`, a provider for `APP_GUARD`, or
 * `@UseGuards(new RateLimitGuard(rules))` on a controller or a handler. On the Express and the Fastify platform.
 *
 * - A route's `@RateLimit(rules | limiter)` replaces the guard's rules for that route (a handler's wins over
 *   its controller's), `@SkipRateLimit()` exempts it. A route's own limiter is decided once per request.
 * - Client address: the platform's `req.ip`, so Express's `trust proxy` or Fastify's `trustProxy` decides
 *   whether `X-Forwarded-For` is believed; trusting every hop (spoofable) draws a one-time warning.
 * - A denial sets the headers and `Retry-After`, then throws `RateLimitException` (an `HttpException`):
 *   the app's exception filters answer it, Nest's own with `{ statusCode: 429, message: 'Too Many Requests' }`;
 *   no handler or interceptor runs. An admitted request's outcome is judged by
 *   `isFailure` on the status its response finishes with, whatever exception filter set it; a redirect is
 *   neither outcome (see `isFailure`). A client gone before or during the decision never reaches the handler.
 * - Limiter errors (a key function that threw, a bad cost) reach Nest's exception filters; nothing is consumed.
 * - An object or array where a rule reads a key (`{"username": ["alice"]}`, `?user=a&user=b`) throws an
 *   `HttpException` 400 `{ statusCode, error, message, field }` naming the field; nothing is consumed.
 * - GraphQL resolvers are limited by the HTTP request of their GraphQL context (`{ req }` with Apollo on
 *   Express, `{ request }` on Fastify), each resolver call on its own (aliases in one request count one by
 *   one); a denial is a `RateLimitException` in the response's `errors`.
 * - WebSocket gateways are limited per message by the client's address (`ws` or socket.io), the message
 *   matched as method `'WS'` and path `/<pattern>`, its data as `body`; a denial is a `WsException`. A
 *   guard sees no end of a gateway's handler: a `concurrency` slot a message takes is freed a lease later.
 * - Any other context (a microservice), or one whose client it cannot find, is a `RateLimitRequestError`
 *   `ERR_CONTEXT`, never a silent pass.
 *
 * @example
 * app.useGlobalGuards(new RateLimitGuard([{ name: 'api', key: 'ip', limit: 100, window: { type: 'gcra', size: '1m' } }]));
 */
export class RateLimitGuard implements CanActivate {
  readonly #setup: Setup<ExecutionContext>;
  readonly #handler: NestRateLimitOptions['handler'];
  /** Routes' own limiters, with this guard's options. */
  readonly #routeSetup: (request: object, limiter: Limiter) => Setup<ExecutionContext> | undefined;

  constructor(rulesOrLimiter: Rule[] | Limiter, options: NestRateLimitOptions = {}) {
    this.#setup = createSetup(rulesOrLimiter, options, ['handler']);
    const { handler, ...common } = options;
    this.#routeSetup = routeSetups(common);
    this.#handler = handler;
  }

  async canActivate(context: ExecutionContext): Promise<boolean> {
    const own = routeLimiter(context);
    if (own === false) return true;
    const type = context.getType<string>();
    const target = httpTarget(context, type);
    // A route's own limiter decides a request once; a resolver call or a message on its own (its arguments
    // are its own): aliases cannot share one count.
    const setup =
      own === undefined
        ? this.#setup
        : this.#routeSetup(type === 'http' && target !== undefined ? target[0] : context.getArgs(), own);
    if (setup === undefined) return true; // the route's own limiter decided it in an earlier guard
    const handler = this.#handler;
    let on: HttpExchange;
    if (target === undefined) {
      const ws = context.switchToWs();
      const deny = async (decision: Decision): Promise<never> => {
        if (handler !== undefined) await handler(context, decision);
        throw await wsDenial(setup.retryAfter(decision), setup.message(decision));
      };
      on = new WsExchange(ws.getClient(), ws.getPattern(), ws.getData(), deny, leaseOf(setup.limiter));
    } else {
      // Through the app's exception filters, unless the handler answered; a handler that returns without
      // answering leaves the default denial.
      const deny = async (decision: Decision) => {
        if (handler !== undefined) await handler(context, decision);
        if (on.sent()) return;
        throw new RateLimitException(decision, setup.statusCode, setup.message(decision));
      };
      on = platformExchange(target[0], target[1], deny, own !== undefined && type === 'http');
    }
    return (await exchange(setup, on, context)) === 'next' ? true : halted();
  }
}

/**
 * The answer of a guard that has sent the response itself: never settled, so Nest runs nothing more for
 * the request (returning false would make Nest throw a ForbiddenException and answer a second time).
 * Nothing holds the promise: it is collected with the request.
 */
function halted(): Promise<boolean> {
  return new Promise<boolean>(() => {});
}

// Module-level: a fact of the limiter, shared by every guard in the process that runs it.
const LEASES = new WeakMap<Limiter, number>();

/** The shortest lease of a limiter's concurrency rules: how long a WebSocket message holds its slots. */
function leaseOf(limiter: Limiter): number {
  let lease = LEASES.get(limiter);
  if (lease !== undefined) return lease;
  lease = Number.POSITIVE_INFINITY;
  for (const rule of limiter.rules) {
    if (!limiter.ruleFacts.some((facts) => facts.name === rule.name && facts.holdsSlots)) continue;
    lease = Math.min(
      lease,
      parseDuration('lease' in rule.window ? rule.window.lease : undefined) ??
        RULE_DEFAULTS.concurrencyLeaseMs,
    );
  }
  LEASES.set(limiter, lease);
  return lease;
}

/** The route's own limiter (the handler's, else its controller's), `false` when exempt, undefined for neither. */
function routeLimiter(context: ExecutionContext): Limiter | false | undefined {
  const read = (target: object) =>
    Reflect.getMetadata(RATE_LIMIT_METADATA, target) as Limiter | false | undefined;
  return read(context.getHandler()) ?? read(context.getClass());
}

/**
 * Limits a controller or a handler by its own rules (a limiter on the memory store is built for them, once)
 * or limiter, instead of the guard's: a handler's `@RateLimit` wins over its controller's. The options
 * (headers, message, hooks) are those of the first `RateLimitGuard` the request meets (a global one), else
 * the defaults: the decorator brings a guard of its own for routes no other covers.
 *
 * @example
 * @Post('login') @RateLimit(loginRules()) login(@Body() body: Credentials) { ... }
 */
export function RateLimit(rulesOrLimiter: Rule[] | Limiter): MethodDecorator & ClassDecorator {
  const { limiter } = limiterOf(rulesOrLimiter, '@RateLimit');
  // A guard of its own, for routes no other `RateLimitGuard` covers; it only ever decides by a route's own
  // limiter (read from the metadata).
  return applyDecorators(SetMetadata(RATE_LIMIT_METADATA, limiter), UseGuards(new RateLimitGuard(limiter)));
}

/** Exempts a controller or a handler from every `RateLimitGuard` (a handler's `@RateLimit` still applies). */
export function SkipRateLimit(): CustomDecorator<string> {
  return SetMetadata(RATE_LIMIT_METADATA, false);
}
