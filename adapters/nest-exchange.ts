// Nest's execution contexts mapped to the request sequence (adapters/exchange.ts): an HTTP request on the
// Express or Fastify platform through those adapters' exchanges, a GraphQL resolver by the HTTP request of its
// context, a WebSocket message by an exchange of its own (no headers, denied with a WsException).
import { type ExecutionContext, HttpException } from '@nestjs/common';
import type { Request, Response } from 'express';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { ADAPTER_DEFAULTS } from '../src/defaults.js';
import { type Decision, RateLimitRequestError, type RequestInfo } from '../src/index.js';
import type { BadRequestBody, HttpExchange } from './exchange.js';
import { ExpressExchange } from './express.js';
import { FastifyExchange } from './fastify-exchange.js';
import { NEST_EXPRESS_TRUST, NEST_FASTIFY_TRUST } from './wiring.js';

/**
 * The exchange of the platform Nest runs on: Fastify's reply wraps the Node response in `raw`, Express's
 * response is one. `attached`: the limiter is the route's own `@RateLimit`. A refused key is a 400
 * `HttpException`, through the app's exception filters.
 */
export function platformExchange(
  request: unknown,
  response: unknown,
  handle: (decision: Decision) => unknown,
  attached: boolean,
): HttpExchange {
  const reply = response as Partial<FastifyReply>;
  const refuse = (body: BadRequestBody) => {
    throw new HttpException(body, 400);
  };
  // Nest registers every route with its full path on one Fastify instance: no prefix hides a rule.
  if (typeof reply.code === 'function' && typeof reply.raw === 'object')
    return new FastifyExchange(request as FastifyRequest, response as FastifyReply, handle, '', {
      attached,
      trustSetting: NEST_FASTIFY_TRUST,
      refuse,
    });
  return new ExpressExchange(request as Request, response as Response, handle, {
    attached,
    trustSetting: NEST_EXPRESS_TRUST,
    refuse,
  });
}

/**
 * The HTTP request and response a context is decided by: an HTTP request's own, a GraphQL resolver's by its
 * context; undefined for a WebSocket message (a `WsExchange`). Any other context is refused.
 */
export function httpTarget(context: ExecutionContext, type: string): [object, unknown] | undefined {
  if (type === 'http') {
    const http = context.switchToHttp();
    return [http.getRequest<object>(), http.getResponse()];
  }
  if (type === 'graphql') return graphqlRequest(context);
  if (type === 'ws') return undefined;
  throw unkeyable(`a '${type}' context`);
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

/**
 * One WebSocket message as the request sequence needs it: keyed by the client's address, matched as method
 * `'WS'` and path `/<pattern>`, its data as `body`. A message has no headers to write and no response to
 * watch (no outcome, nothing to wait on); its denial is `handle`'s, which throws a `WsException`.
 */
export class WsExchange implements HttpExchange {
  readonly handle: (decision: Decision) => Promise<never>;
  readonly #info: RequestInfo;
  readonly #holdMs: number;

  /**
   * Refuses (`ERR_CONTEXT`) a client that is neither a `ws` socket nor a socket.io one. `holdMs`: how long a
   * message holds the concurrency slots it took (see `handled`).
   */
  constructor(
    client: unknown,
    pattern: unknown,
    data: unknown,
    handle: (decision: Decision) => Promise<never>,
    holdMs: number,
  ) {
    this.#info = wsRequest(client, pattern, data);
    this.handle = handle;
    this.#holdMs = holdMs;
  }

  /** The client's connection is the gateway's to watch: a message is decided whatever its state. */
  socket(): undefined {
    return undefined;
  }

  /** No proxy setting of the platform applies to a gateway's client address. */
  spoofable(): undefined {
    return undefined;
  }

  untrusted(): undefined {
    return undefined;
  }

  /** slowDown does not run on messages: nothing waits to be cancelled. */
  whenGone(): () => void {
    return () => {};
  }

  info(): RequestInfo {
    return this.#info;
  }

  /** A message has no request object to keep the decision on. */
  keep(): void {}

  /** A gateway's pattern is the path as the rules see it: no mount prefix or rewrite can hide it. */
  unmatched(): void {}

  sent(): boolean {
    return false;
  }

  /** A message answers no headers. */
  header(): void {}

  /** A message whose key the limiter refused: a `WsException` with the 400's body, as HTTP's 400. */
  async refuse(body: BadRequestBody): Promise<never> {
    throw await wsException({ status: 'error', ...body });
  }

  /** Never called: `handle` denies every message, `refuse` refuses them. */
  send(): void {}

  end(): void {}

  /** A message ends with no status: its outcome is never reported. */
  finished(): void {}

  /**
   * A guard sees no end of a gateway's handler: a concurrency slot a message holds is freed one lease (the
   * shortest of its rules') after it was taken, by a timer that keeps no process alive (a process that
   * ends first stops renewing it: it lapses in the store after that lease).
   */
  handled(done: () => void): void {
    setTimeout(done, this.#holdMs).unref();
  }
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

/**
 * The denial of a WebSocket message: Nest's `WsException` (from the app's @nestjs/websockets), carrying the
 * app's `message` or `{ status, message, retryAfter }`, `retryAfter` the seconds an HTTP denial's
 * `Retry-After` would give.
 */
export async function wsDenial(retryAfter: number, body: unknown): Promise<Error> {
  const error =
    body !== undefined && typeof body === 'object'
      ? body
      : { status: 'error', message: body ?? ADAPTER_DEFAULTS.nestMessage, retryAfter };
  return wsException(error as object);
}

/** Nest's `WsException` (from the app's @nestjs/websockets, loaded when a gateway first needs it). */
async function wsException(error: object): Promise<Error> {
  const { WsException } = await import('@nestjs/websockets');
  return new WsException(error);
}

/** A context the guard cannot key: `RateLimitRequestError` `ERR_CONTEXT`, never a silent pass. */
function unkeyable(what: string): RateLimitRequestError {
  return new RateLimitRequestError(
    'ERR_CONTEXT',
    `RateLimitGuard: cannot limit ${what}: it limits HTTP requests, GraphQL resolvers and WebSocket messages`,
  );
}
