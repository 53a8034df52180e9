// Fastify plugin: a hook on every route of the instance runs the request sequence (adapters/exchange.ts), the
// outcome judged when the response finishes.
import type { FastifyPluginAsync, FastifyReply, FastifyRequest } from 'fastify';
import { rulesFromPeerOptions } from '../src/config/hints.js';
import { assertKnownFields, fieldsOf } from '../src/config/known-fields.js';
import { mustBe, refuse } from '../src/config/refuse.js';
import type { Decision, Limiter, Rule } from '../src/index.js';
import {
  createSetup,
  limiterOf,
  RATE_LIMIT_OPTION_FIELDS,
  type RateLimitOptions,
  ROUTE_DECIDED,
  routeSetups,
  type Setup,
} from './common.js';
import { type Exchanged, exchange } from './exchange.js';
import { routeRateLimit, routeRulesError } from './fastify-config.js';
import { FastifyExchange } from './fastify-exchange.js';
import { type SlowDownOptions, slowDownSetup } from './slow-down.js';

export type { RateLimitOptions } from './common.js';
export { SPOOFABLE_IP_WARNING } from './common.js';
export type { SlowDownDelay, SlowDownOptions } from './slow-down.js';

declare module 'fastify' {
  interface FastifyRequest {
    /** The rate-limit decision for this request, set by the ratekeeper plugin before the handler runs. */
    rateLimit?: Decision;
  }
  interface FastifyContextConfig {
    /** This route's own rules or limiter instead of the plugin's, or `false` to exempt the route. */
    rateLimit?: Rule[] | Limiter | false;
  }
}

export interface FastifyRateLimitOptions extends RateLimitOptions<FastifyRequest> {
  /** Rules for every route (a limiter on the memory store is built for them); or give `limiter`; neither: only routes with `config.rateLimit`. */
  rules?: Rule[];
  /** An existing limiter for every route, instead of `rules`. */
  limiter?: Limiter;
  /**
   * The request phase that decides. The default runs after the body is parsed (rules keyed on `body.*` see it)
   * and before schema validation; `'onRequest'` refuses earlier, without reading the body. @default 'preValidation'
   */
  hook?: 'onRequest' | 'preParsing' | 'preValidation' | 'preHandler';
  /**
   * Sends the denial instead of the default body; the rate-limit headers and `Retry-After` are already set,
   * the status is not. @default reply.code(statusCode).send(message)
   */
  handler?: (request: FastifyRequest, reply: FastifyReply, decision: Decision) => unknown;
}

const HOOKS = ['onRequest', 'preParsing', 'preValidation', 'preHandler'] as const;
const FASTIFY_FIELDS = fieldsOf<Omit<FastifyRateLimitOptions, keyof RateLimitOptions<unknown>>>({
  rules: true,
  limiter: true,
  hook: true,
  handler: true,
});

/**
 * Fastify plugin limiting every route of the instance it is registered on, and of its children (it is not
 * encapsulated, as `@fastify/rate-limit` with `global: true`). Register it before the routes it limits.
 * A route's `config: { rateLimit }` replaces the plugin's rules for that route; `false` exempts it.
 *
 * - Client address: `request.ip`, so Fastify's `trustProxy` decides whether `X-Forwarded-For` is believed;
 *   `trustProxy: true` (spoofable) draws a one-time warning.
 * - Admitted requests are judged when the response finishes, by `isFailure(reply.statusCode)`, errors
 *   included; a redirect is neither outcome (see `isFailure`). A connection closed before the response
 *   finished is not reported. A client gone before or during the decision never reaches the handler.
 * - Limiter errors (a key function that threw, a bad cost) go to Fastify's error handler; nothing is consumed.
 * - An object or array where a rule reads a key (`{"username": ["alice"]}`, `?user=a&user=b`) is answered
 *   400 `{ statusCode, error, message, field }` naming the field, before any handler; nothing is consumed.
 * - Limiters the plugin builds from `rules` are closed with the instance; a given `limiter` is the caller's.
 *
 * @example
 * await app.register(rateLimit, { rules: [{ name: 'api', key: 'ip', limit: 100, window: { type: 'gcra', size: '1m' } }] });
 * app.post('/login', { config: { rateLimit: loginRules() } }, login);
 */
const ratekeeperPlugin: FastifyPluginAsync<FastifyRateLimitOptions> = async (fastify, options) => {
  // @fastify/rate-limit's options (`{ max, timeWindow }`) would be refused as unknown fields: say the rule instead.
  const peer =
    options.rules === undefined && options.limiter === undefined ? rulesFromPeerOptions(options) : undefined;
  if (peer !== undefined)
    refuse(
      'ERR_OPTION',
      'ratekeeper/fastify',
      `options in another rate limiter's shape (${peer.fields.join(', ')}); ratekeeper takes rules, and the same limit is app.register(rateLimit, { rules: ${peer.rules} })`,
    );
  assertKnownFields(options, [...RATE_LIMIT_OPTION_FIELDS, ...FASTIFY_FIELDS], 'ratekeeper/fastify');
  const { rules, limiter, hook = 'preValidation', handler, ...common } = options;
  if (!HOOKS.includes(hook))
    refuse('ERR_OPTION', 'ratekeeper/fastify', mustBe('hook', `one of ${HOOKS.join(', ')}`, hook));
  if (rules !== undefined && limiter !== undefined)
    refuse('ERR_OPTION', 'ratekeeper/fastify', 'give either rules or limiter, not both');
  const routeSetup = routeSetups<FastifyRequest>(common);
  const source = rules ?? limiter;
  const plugin = source === undefined ? undefined : createSetup(source, common);
  const owned: Limiter[] = []; // closed with the instance, as the limiter built from `rules`
  if (plugin?.owned === true) owned.push(plugin.limiter);
  // One limiter per rule array of a route config (routes may share one), built by the outermost registration
  // that sees the route. A bad route config fails `ready()` (and so `listen`), before any request, wherever
  // the route was declared.
  const routeLimiters = new Map<Rule[], Limiter>();
  let refused: unknown;
  fastify.addHook('onRoute', (route) => {
    let own: ReturnType<typeof routeRateLimit>;
    try {
      own = routeRateLimit(route);
    } catch (error) {
      refused ??= error;
      return;
    }
    if (!Array.isArray(own)) return;
    let shared = routeLimiters.get(own);
    if (shared === undefined) {
      try {
        shared = limiterOf(own, 'config.rateLimit').limiter;
      } catch (error) {
        refused ??= routeRulesError(route, error);
        return;
      }
      routeLimiters.set(own, shared);
      owned.push(shared);
    }
    route.config = { ...route.config, rateLimit: shared };
  });
  fastify.addHook('onReady', async () => {
    if (refused !== undefined) throw refused;
  });
  fastify.addHook('onClose', async () => {
    await Promise.all(owned.map((l) => l.close()));
  });

  if (!fastify.hasRequestDecorator('rateLimit')) fastify.decorateRequest('rateLimit', undefined);
  if (!fastify.hasRequestDecorator(ROUTE_DECIDED)) fastify.decorateRequest(ROUTE_DECIDED, false);

  const prefix = fastify.prefix;
  const decide = async (
    setup: Setup<FastifyRequest>,
    request: FastifyRequest,
    reply: FastifyReply,
    attached: boolean,
  ) => {
    const handle = handler && ((decision: Decision) => handler(request, reply, decision));
    const http = new FastifyExchange(request, reply, handle, prefix, { attached });
    return hookAnswer(await exchange(setup, http, request), reply);
  };
  fastify.addHook(hook, async (request: FastifyRequest, reply: FastifyReply) => {
    const own = request.routeOptions.config?.rateLimit as Limiter | false | undefined;
    if (own === undefined) return plugin === undefined ? undefined : decide(plugin, request, reply, false);
    if (own === false) return undefined;
    // Decided once, by the outermost registration covering the route.
    const setup = routeSetup(request, own);
    return setup === undefined ? undefined : decide(setup, request, reply, true);
  });
};

/**
 * The plugin; `fastify.register(rateLimit, { rules | limiter, ...options })`. Marked as fastify-plugin marks
 * plugins (Fastify reads these symbols): not encapsulated, so its hook covers the routes of the instance it
 * is registered on; named; for Fastify 5.
 */
export const rateLimit: FastifyPluginAsync<FastifyRateLimitOptions> = Object.assign(ratekeeperPlugin, {
  [Symbol.for('skip-override')]: true,
  [Symbol.for('fastify.display-name')]: 'ratekeeper',
  [Symbol.for('plugin-meta')]: { fastify: '5.x', name: 'ratekeeper' },
});
export default rateLimit;

/** Options of Fastify's `slowDown`: those of every framework plus the request phase that decides. */
export interface FastifySlowDownOptions extends SlowDownOptions<FastifyRequest> {
  /** The request phase that decides and waits, as the rate-limit plugin's `hook`. @default 'preValidation' */
  hook?: FastifyRateLimitOptions['hook'];
}

/**
 * A Fastify plugin that delays requests over a rule's limit instead of refusing them, on every route of the
 * instance it is registered on and its children: `await app.register(slowDown(rules, { delay: '500ms' }))`.
 * Every matching rule counts every request (past its limit too), and a request over a limit waits `delay`
 * per request over it, at most `maxDelay`, before the handler. Same rules and stores as `rateLimit` (rules
 * with a lockout or counting outcomes are refused), the same headers without `Retry-After`. A client that
 * goes while it waits ends the wait: the handler never runs. A limiter built from rules closes with the app.
 *
 * @example
 * await app.register(slowDown([{ name: 'api-slow', key: 'ip', limit: 50, window: { type: 'fixed', size: '15m' } }],
 *   { delay: '500ms', maxDelay: '20s' }));
 */
export function slowDown(
  rulesOrLimiter: Rule[] | Limiter,
  options: FastifySlowDownOptions,
): FastifyPluginAsync {
  const { hook = 'preValidation', ...common } = options ?? {};
  if (!HOOKS.includes(hook))
    refuse('ERR_OPTION', 'slowDown', mustBe('hook', `one of ${HOOKS.join(', ')}`, hook));
  const setup = slowDownSetup(rulesOrLimiter, common as SlowDownOptions<FastifyRequest>);
  const plugin: FastifyPluginAsync = async (fastify) => {
    if (setup.owned) fastify.addHook('onClose', () => setup.limiter.close());
    const prefix = fastify.prefix;
    fastify.addHook(hook, async (request: FastifyRequest, reply: FastifyReply) => {
      const http = new FastifyExchange(request, reply, undefined, prefix);
      return hookAnswer(await exchange(setup, http, request), reply);
    });
  };
  // Not encapsulated, as the rate-limit plugin: its hook covers the routes of the instance it is registered on.
  return Object.assign(plugin, {
    [Symbol.for('skip-override')]: true,
    [Symbol.for('fastify.display-name')]: 'ratekeeper-slow-down',
    [Symbol.for('plugin-meta')]: { fastify: '5.x', name: 'ratekeeper-slow-down' },
  });
}

/**
 * What a hook returns for the sequence's answer. Gone: nothing to answer, no handler to run (hijacked).
 * Answered (a denial, or slowDown past maxWaiting): the reply, so Fastify runs no later hook and no handler.
 */
function hookAnswer(exchanged: Exchanged, reply: FastifyReply): FastifyReply | undefined {
  if (exchanged === 'gone') return reply.hijack();
  if (exchanged === 'answered') return reply;
  return undefined;
}
