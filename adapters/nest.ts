// NestJS guard and decorators: the request sequence (adapters/exchange.ts) on the Express or the Fastify platform,
// through the same exchanges as those adapters.

import {
  applyDecorators,
  type CanActivate,
  type CustomDecorator,
  type ExecutionContext,
  HttpException,
  SetMetadata,
  UseGuards,
} from '@nestjs/common';
import type { Request, Response } from 'express';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { ADAPTER_DEFAULTS } from '../src/defaults.js';
import { describe } from '../src/errors.js';
import {
  createLimiter,
  type Decision,
  type Limiter,
  RateLimitConfigError,
  RateLimitRequestError,
  type RequestInfo,
  type Rule,
} from '../src/index.js';
import { createSetup, type RateLimitOptions, routeSetups, type Setup } from './common.js';
import { badRequest, exchange } from './exchange.js';
import { ExpressExchange } from './express-exchange.js';
import { FastifyExchange } from './fastify-exchange.js';

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
/** The guard `@RateLimit` applies, for routes no other `RateLimitGuard` covers; built on first use. */
let routeGuard: RateLimitGuard | undefined;

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
 *   matched as method `'WS'` and path `/<pattern>`, its data as `body`; a denial is a `WsException`.
 * - Any other context (a microservice), or one whose client it cannot find, is a `RateLimitRequestError`
 *   `ERR_CONTEXT`, never a silent pass.
 *
 * @example
 * app.useGlobalGuards(new RateLimitGuard([{ name: 'api', key: 'ip', limit: 100, window: { type: 'gcra', size: '1m' } }]));
 */
export class RateLimitGuard implements CanActivate {
  readonly #setup: Setup<ExecutionContext>;
  readonly #handler: NestRateLimitOptions['handler'];
  readonly #message: unknown;
  /** Routes' own limiters, with this guard's options. */
  readonly #routeSetup: (request: object, limiter: Limiter) => Setup<ExecutionContext> | undefined;

  constructor(rulesOrLimiter: Rule[] | Limiter, options: NestRateLimitOptions = {}) {
    this.#setup = createSetup(rulesOrLimiter, options, ['handler']);
    const { handler, ...common } = options;
    this.#routeSetup = routeSetups(common);
    this.#handler = handler;
    this.#message = options.message;
  }

  async canActivate(context: ExecutionContext): Promise<boolean> {
    const own = routeLimiter(context);
    if (own === false) return true;
    const type = context.getType<string>();
    if (type === 'ws') return this.#wsMessage(context, own);
    let request: object;
    let response: unknown;
    if (type === 'http') {
      const http = context.switchToHttp();
      request = http.getRequest<object>();
      response = http.getResponse();
    } else if (type === 'graphql') {
      [request, response] = graphqlRequest(context);
    } else throw unkeyable(`a '${type}' context`);
    // A resolver call is decided on its own (its arguments are its own): aliases cannot share one count.
    const setup =
      own === undefined ? this.#setup : this.#routeSetup(type === 'http' ? request : context.getArgs(), own);
    if (setup === undefined) return true; // the route's own limiter decided it in an earlier guard
    const on = platformExchange(request, response);
    on.attached = own !== undefined && type === 'http';
    const handler = this.#handler;
    const message = this.#message;
    on.refuse = (body) => {
      throw new HttpException(body, 400);
    };
    on.handle = async (decision) => {
      if (handler !== undefined) await handler(context, decision);
      // Through the app's exception filters, unless the handler answered; a handler that returns without
      // answering leaves the default denial.
      if (on.sent()) return;
      const body = typeof message === 'function' ? message(decision) : message;
      throw new RateLimitException(decision, setup.statusCode, body);
    };
    return (await exchange(setup, on, context)) === 'next' ? true : halted();
  }

  /** One WebSocket message: keyed by the client's address, denied with a `WsException`. */
  async #wsMessage(context: ExecutionContext, own: Limiter | undefined): Promise<boolean> {
    const setup = own === undefined ? this.#setup : this.#routeSetup(context.getArgs(), own);
    if (setup === undefined) return true;
    const ws = context.switchToWs();
    const info = wsRequest(ws.getClient(), ws.getPattern(), ws.getData());
    if (setup.skip !== undefined && (await setup.skip(context))) return true;
    let decision: Decision;
    try {
      decision = await setup.limiter.check(info);
    } catch (error) {
      // An object or array where a rule reads the message's key: refused to the client, as HTTP's 400.
      const body = badRequest(error);
      if (body === undefined) throw error;
      const { WsException } = await import('@nestjs/websockets');
      throw new WsException({ status: 'error', ...body });
    }
    if (decision.rules.length === 0) return true;
    if (!decision.allowed || decision.dryRun) setup.onLimited?.(decision, context);
    if (decision.allowed) return true;
    if (this.#handler !== undefined) await this.#handler(context, decision);
    const message = this.#message;
    const body = typeof message === 'function' ? message(decision) : message;
    throw await wsDenial(decision, body);
  }
}

/** The HTTP request and response of a GraphQL resolver's context, or an error saying how to give them. */
function graphqlRequest(context: ExecutionContext): [object, unknown] {
  const gql = context.getArgByIndex<
    { req?: object; request?: object; res?: unknown; reply?: unknown } | undefined
  >(2);
  const request = gql?.req ?? gql?.request;
  if (request === undefined || request === null || typeof request !== 'object')
    throw unkeyable(
      "a GraphQL context without the HTTP request (return { req } or { request } from the driver's context)",
    );
  return [request, gql?.res ?? gql?.reply ?? (request as { res?: unknown }).res];
}

/** What a WebSocket client (`ws` or socket.io) shows of itself. */
interface WsClient {
  _socket?: { remoteAddress?: string };
  handshake?: { address?: string; headers?: Record<string, string | string[] | undefined> };
}

/** One message as the core sees it: method 'WS', path '/<pattern>', the client's address, the data as body. */
function wsRequest(client: unknown, pattern: unknown, data: unknown): RequestInfo {
  const c = client as WsClient | null | undefined;
  const io = c?.handshake;
  const raw = c?._socket;
  if (io === undefined && raw === undefined)
    throw unkeyable('a WebSocket client that is neither a ws socket nor a socket.io socket');
  const ip = io?.address ?? raw?.remoteAddress;
  return {
    method: 'WS',
    path: `/${typeof pattern === 'string' ? pattern : ''}`,
    ...(ip === undefined ? {} : { ip }),
    headers: io?.headers ?? {},
    body: data,
  };
}

/** The denial of a WebSocket message: Nest's `WsException` (from the app's @nestjs/websockets). */
async function wsDenial(decision: Decision, body: unknown): Promise<Error> {
  const retryAfter = Math.max(1, Math.ceil((decision.retryAfterMs ?? 0) / 1000));
  const error =
    body !== undefined && typeof body === 'object'
      ? body
      : { status: 'error', message: body ?? ADAPTER_DEFAULTS.nestMessage, retryAfter };
  const { WsException } = await import('@nestjs/websockets');
  return new WsException(error as object);
}

function unkeyable(what: string): RateLimitRequestError {
  return new RateLimitRequestError(
    'ERR_CONTEXT',
    `RateLimitGuard: cannot limit ${what}: it limits HTTP requests, GraphQL resolvers and WebSocket messages`,
  );
}

/** The exchange of the platform Nest runs on: Fastify's reply wraps the Node response in `raw`, Express's response is one. */
function platformExchange(request: unknown, response: unknown): ExpressExchange | FastifyExchange {
  const reply = response as Partial<FastifyReply>;
  // Nest registers every route with its full path on one Fastify instance: no prefix hides a rule.
  const on =
    typeof reply.code === 'function' && typeof reply.raw === 'object'
      ? new FastifyExchange(request as FastifyRequest, response as FastifyReply, undefined, '')
      : new ExpressExchange(request as Request, response as Response, undefined);
  on.trustSetting = on instanceof FastifyExchange ? 'nest-fastify' : 'nest-express';
  return on;
}

/**
 * The answer of a guard that has sent the response itself: never settled, so Nest runs nothing more for
 * the request (returning false would make Nest throw a ForbiddenException and answer a second time).
 * Nothing holds the promise: it is collected with the request.
 */
function halted(): Promise<boolean> {
  return new Promise<boolean>(() => {});
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
  let limiter: Limiter;
  if (Array.isArray(rulesOrLimiter)) limiter = createLimiter({ rules: rulesOrLimiter });
  else if (typeof (rulesOrLimiter as Partial<Limiter> | null)?.check === 'function') limiter = rulesOrLimiter;
  else
    throw new RateLimitConfigError(
      'ERR_OPTION',
      `@RateLimit: expects an array of rules or a limiter from createLimiter, got ${describe(rulesOrLimiter)}`,
    );
  // The guard only ever decides by a route's own limiter (read from the metadata), so the first is as good as any.
  routeGuard ??= new RateLimitGuard(limiter);
  return applyDecorators(SetMetadata(RATE_LIMIT_METADATA, limiter), UseGuards(routeGuard));
}

/** Exempts a controller or a handler from every `RateLimitGuard` (a handler's `@RateLimit` still applies). */
export function SkipRateLimit(): CustomDecorator<string> {
  return SetMetadata(RATE_LIMIT_METADATA, false);
}
