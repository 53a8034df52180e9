// The Fastify plugin's per-request work: the decision hook (headers, denial) and the outcome in onResponse.
import type { FastifyReply, FastifyRequest } from 'fastify';
import { LIST_FIELDS } from '../src/headers.js';
import type { Decision } from '../src/index.js';
import { clientGone, type Setup } from './common.js';
import type { FastifyRateLimitOptions } from './fastify.js';
import { believesAnyProxy, FastifyRequestInfo, warnUnmatched } from './fastify-request.js';

/** Per registration: where an admitted request keeps its setup and decision for onResponse. */
export interface Slots {
  setup: symbol;
  decision: symbol;
}

/** The hook that decides a request by one setup; `prefix`: the registration's route prefix. */
export function decider(admitted: Slots, handler: FastifyRateLimitOptions['handler'], prefix: string) {
  return async function rateLimitHook(
    config: Setup<FastifyRequest>,
    request: FastifyRequest,
    reply: FastifyReply,
  ) {
    // Reset after writing the request, or while the store decided: nothing to answer, no handler to run.
    if (clientGone(request.raw.socket)) return reply.hijack();
    if (config.skip !== undefined && (await config.skip(request))) return;
    if (!config.warned && believesAnyProxy(request)) config.warnSpoofable('Fastify trustProxy is true');
    const info = new FastifyRequestInfo(request);
    const decision = await config.limiter.check(info);
    if (clientGone(request.raw.socket)) return reply.hijack(); // what was reserved stays counted
    // A limiter that matched no rule leaves the decision of an earlier one in place.
    if (decision.rules.length === 0) return warnUnmatched(config, info, prefix);
    request.rateLimit = decision;
    for (const [name, value] of config.headerFields(decision)) {
      const previous = LIST_FIELDS.has(name) ? reply.getHeader(name) : undefined;
      reply.header(name, previous === undefined ? value : `${previous}, ${value}`);
    }
    if (!decision.allowed || decision.dryRun) config.onLimited?.(decision, request);
    if (decision.allowed) {
      if (config.reports) {
        const slots = request as unknown as Record<symbol, unknown>;
        slots[admitted.setup] = config;
        slots[admitted.decision] = decision;
      }
      return;
    }
    if (handler !== undefined) await handler(request, reply, decision);
    else if (!reply.sent) {
      const body = config.body(decision);
      reply.code(config.statusCode);
      if (typeof body === 'string') reply.type('text/plain; charset=utf-8');
      reply.send(body);
    }
    return reply; // answered: Fastify runs no later hook and no handler
  };
}

/** The onResponse hook: reports the outcome of a request this registration admitted. */
export function reporter(admitted: Slots) {
  return async function rateLimitOutcome(request: FastifyRequest, reply: FastifyReply): Promise<void> {
    const slots = request as unknown as Record<symbol, unknown>;
    const config = slots[admitted.setup] as Setup<FastifyRequest> | undefined;
    if (config !== undefined) config.report(slots[admitted.decision] as Decision, reply.statusCode);
  };
}
