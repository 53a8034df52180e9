// What the Nest guard does to a request on its platform (Express or Fastify): read it, set headers, answer a denial.
import type { Request, Response } from 'express';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { LIST_FIELDS } from '../src/headers.js';
import type { Decision, RequestInfo } from '../src/index.js';
import { checkUnmatched, ExpressRequestInfo } from './express-request.js';
import { believesAnyProxy, FastifyRequestInfo } from './fastify-request.js';
import type { WiringCheck } from './wiring.js';

/** One request on the platform Nest runs on, as the guard needs it. */
export interface NestHttp {
  /** The request object Nest hands to guards and handlers (`@Req()`), where the decision goes. */
  readonly request: { rateLimit?: Decision };
  /** The client's connection, to tell whether it is gone. */
  readonly socket: { readonly destroyed?: boolean } | null | undefined;
  info(): RequestInfo;
  /** Whether the platform believes every `X-Forwarded-For` entry; the warning's wording when it does. */
  spoofable(): string | undefined;
  setHeaders(fields: Array<[string, string]>): void;
  /** Calls `done` with the final status once the response is written in full (never for a broken connection). */
  onFinish(done: (status: number) => void): void;
  sent(): boolean;
  deny(status: number, body: unknown): void;
  /** For a request no rule matched: the wiring warnings the platform can give. */
  unmatched(wiring: WiringCheck, info: RequestInfo): void;
}

/** The platform a request is on: Fastify's reply wraps the Node response in `raw`, Express's response is one. */
export function nestHttp(request: unknown, response: unknown): NestHttp {
  const reply = response as Partial<FastifyReply>;
  return typeof reply.code === 'function' && typeof reply.raw === 'object'
    ? fastifyHttp(request as FastifyRequest, response as FastifyReply)
    : expressHttp(request as Request, response as Response);
}

function expressHttp(req: Request, res: Response): NestHttp {
  return {
    request: req,
    socket: req.socket,
    info: () => new ExpressRequestInfo(req),
    spoofable: () => (req.app?.get('trust proxy') === true ? "Express 'trust proxy' is true" : undefined),
    setHeaders(fields) {
      for (const [name, value] of fields) {
        if (LIST_FIELDS.has(name)) res.append(name, value);
        else res.setHeader(name, value);
      }
    },
    onFinish: (done) => void res.once('finish', () => done(res.statusCode)),
    sent: () => res.headersSent,
    deny(status, body) {
      res.status(status);
      if (typeof body === 'string') res.type('text/plain').send(body);
      else res.json(body);
    },
    unmatched: (wiring, info) => checkUnmatched({ wiring }, req, res, info),
  };
}

function fastifyHttp(request: FastifyRequest, reply: FastifyReply): NestHttp {
  return {
    request: request as { rateLimit?: Decision },
    socket: request.raw.socket,
    info: () => new FastifyRequestInfo(request),
    spoofable: () => (believesAnyProxy(request) ? 'Fastify trustProxy is true' : undefined),
    setHeaders(fields) {
      for (const [name, value] of fields) {
        const previous = LIST_FIELDS.has(name) ? reply.getHeader(name) : undefined;
        reply.header(name, previous === undefined ? value : `${previous}, ${value}`);
      }
    },
    onFinish: (done) => void reply.raw.once('finish', () => done(reply.statusCode)),
    sent: () => reply.sent,
    deny(status, body) {
      reply.code(status);
      if (typeof body === 'string') reply.type('text/plain; charset=utf-8');
      reply.send(body);
    },
    // Nest registers every route with its full path on one Fastify instance: no prefix hides a rule.
    unmatched: () => {},
  };
}
