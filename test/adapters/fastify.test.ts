// The HTTP, example, plans and attack suites on Fastify: through fastify.inject, and on a listening server.
import Fastify, { type FastifyError, type FastifyInstance } from 'fastify';
import { type FastifyRateLimitOptions, rateLimit } from '../../adapters/fastify.js';
import { createFastifyApp } from '../../examples/fastify-app.js';
import { memoryStores, redisStores } from '../support/stores.js';
import { attackSuite, type Framework } from './suites/attack-suite.js';
import { exampleSuite, type Harness, httpSuite, type SuiteOptions } from './suites/http-suite.js';
import { planSuite } from './suites/plans-suite.js';
import { viaTestClient } from './suites/test-client.js';

function fastifyOptions(o: SuiteOptions = {}): FastifyRateLimitOptions {
  const { onLimited, skip, customHandler, ...rest } = o;
  const out: FastifyRateLimitOptions = { ...rest };
  if (onLimited) out.onLimited = (decision) => onLimited(decision);
  if (skip) out.skip = (request) => skip(request.headers);
  if (customHandler)
    out.handler = (_request, reply, decision) => reply.code(418).send({ custom: true, rule: decision.rule });
  return out;
}

/** Fastify's own test client: each request goes through `app.inject`, from the real client's address. */
export function injecting(app: FastifyInstance) {
  return viaTestClient(async (r) => {
    const res = await app.inject({
      method: r.method as 'GET',
      url: r.url,
      headers: r.headers,
      remoteAddress: r.remoteAddress,
      ...(r.body === undefined ? {} : { payload: r.body }),
    });
    return { status: res.statusCode, headers: res.headers, body: res.rawPayload };
  });
}

export const fastifyHarness: Harness = {
  name: 'Fastify',
  build(spec) {
    let hits = 0;
    const app = Fastify({
      trustProxy:
        spec.trust === 'one-hop' ? (_address: string, hop: number) => hop < 1 : spec.trust === 'all',
    });
    // Authentication ahead of the limiter: `x-user: <id>` becomes request.user (the 'user' key form).
    app.addHook('onRequest', async (request) => {
      const id = request.headers['x-user'];
      if (typeof id === 'string') (request as { user?: unknown }).user = { id };
    });
    const options = fastifyOptions(spec.options);
    void app.register(rateLimit, spec.mount === 'route' ? options : { ...options, ...source(spec.limiter) });
    app.addHook('preHandler', async () => {
      hits++;
    });
    app.setErrorHandler((error: FastifyError & { status?: number }, _request, reply) => {
      reply.code(error.status ?? error.statusCode ?? 500).send({ error: error.message, code: error.code });
    });
    app.post('/login', async (request, reply) =>
      reply.code((request.body as { password?: string })?.password === 'right' ? 200 : 401).send({}),
    );
    app.post(
      '/users/:id/like',
      spec.mount === 'route' ? { config: { rateLimit: spec.limiter } } : {},
      async () => ({ liked: true }),
    );
    app.get('/echo', async (request) => ({ rateLimit: request.rateLimit }));
    app.get('/status/:code', async (request, reply) =>
      reply.code(Number((request.params as { code: string }).code)).send({}),
    );
    app.get('/throw/:code', async (request) => {
      throw Object.assign(new Error('thrown'), { status: Number((request.params as { code: string }).code) });
    });
    return { listener: injecting(app), hits: () => hits };
  },
  example(options) {
    const { app, limiter } = createFastifyApp(options);
    return { listener: injecting(app), limiter };
  },
};

const source = (limiter: FastifyRateLimitOptions['limiter'] | FastifyRateLimitOptions['rules'] = []) =>
  Array.isArray(limiter) ? { rules: limiter } : { limiter };

/** The example app on a real listening server: Fastify's own request handler, once the app is ready. */
const fastify: Framework = {
  name: 'Fastify',
  create(options) {
    const { app, limiter, loginLimiter } = createFastifyApp(options);
    const ready = app.ready();
    return {
      listener: (req, res) => void ready.then(() => app.routing(req, res)),
      limiter,
      loginLimiter,
    };
  },
};

for (const stores of [memoryStores, redisStores]) {
  httpSuite(fastifyHarness, stores);
  exampleSuite(fastifyHarness, stores);
  planSuite(fastifyHarness, stores);
  attackSuite(fastify, stores);
}
