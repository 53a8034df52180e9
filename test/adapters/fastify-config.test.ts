// Fastify route configs checked when the app gets ready: a misspelt or foreign `config.rateLimit` fails
// registration instead of leaving the route unlimited or answering 500 on its first request.
import { expect } from 'chai';
import Fastify, { type FastifyInstance } from 'fastify';
import supertest from 'supertest';
import { rateLimit } from '../../adapters/fastify.js';
import { createLimiter, RateLimitConfigError, type Rule } from '../../src/index.js';

const minute = { type: 'fixed', size: '1m' } as const;
const rules: Rule[] = [{ name: 'login', key: 'ip', limit: 1, window: minute }];

/** An app with the plugin and one route configured as given; its handler counts the requests it served. */
async function appWith(config: Record<string, unknown>, where: 'top' | 'child' = 'top') {
  const app = Fastify();
  const served = { count: 0 };
  await app.register(rateLimit, { rules: [{ name: 'all', key: 'ip', limit: 100, window: minute }] });
  const route = (scope: FastifyInstance) =>
    scope.post('/login', { config }, async () => {
      served.count++;
      return 'ok';
    });
  if (where === 'top') route(app);
  else await app.register(async (child) => route(child), { prefix: '/v1' });
  return { app, served };
}

async function refusal(app: FastifyInstance): Promise<RateLimitConfigError> {
  try {
    await app.ready();
  } catch (error) {
    expect(error).to.be.instanceOf(RateLimitConfigError);
    return error as RateLimitConfigError;
  } finally {
    await app.close();
  }
  throw new Error('app.ready() resolved');
}

describe('Fastify route configs checked at registration', () => {
  it("refuses config.ratelimit (lower-case l), naming the route and 'rateLimit', before any request", async () => {
    const { app, served } = await appWith({ ratelimit: rules });
    const error = await refusal(app);
    expect(error.code).to.equal('ERR_OPTION');
    expect(error.message).to.equal(
      "ratekeeper/fastify: route POST /login: config.ratelimit is not read by ratekeeper (the route would be unlimited), did you mean 'rateLimit'?",
    );
    expect(served.count).to.equal(0);
  });

  it('refuses any other case of rateLimit, in a child context under a prefix too', async () => {
    const { app } = await appWith({ RateLimit: rules }, 'child');
    expect((await refusal(app)).message).to.match(
      /^ratekeeper\/fastify: route POST \/v1\/login: config\.RateLimit is not read by ratekeeper.*did you mean 'rateLimit'\?$/,
    );
  });

  it("points @fastify/rate-limit's { max, timeWindow } to the ratekeeper rule that means the same", async () => {
    const { app } = await appWith({ rateLimit: { max: 1, timeWindow: '1 minute' } });
    const error = await refusal(app);
    expect(error.code).to.equal('ERR_OPTION');
    expect(error.message).to.equal(
      "ratekeeper/fastify: route POST /login: config.rateLimit is in @fastify/rate-limit's shape (max, timeWindow); ratekeeper takes rules, a limiter or false. The same limit as rules: rateLimit: [{ name: 'login', key: 'ip', limit: 1, window: { type: 'fixed', size: '1 minute' } }]",
    );
    // The suggested rule is one ratekeeper accepts.
    const limiter = createLimiter({
      rules: [{ name: 'login', key: 'ip', limit: 1, window: { type: 'fixed', size: '1 minute' } }],
    });
    await limiter.close();
  });

  for (const [label, value, got] of [
    ['true', true, 'true'],
    ['a string', 'strict', "'strict'"],
    ['an object that is no limiter', { rules }, '{"rules":'],
  ] as const) {
    it(`refuses config.rateLimit set to ${label}`, async () => {
      const { app } = await appWith({ rateLimit: value });
      expect((await refusal(app)).message).to.contain(
        `ratekeeper/fastify: route POST /login: config.rateLimit must be an array of rules, a limiter from createLimiter or false, got ${got}`,
      );
    });
  }

  it("names the route in an error of the route's own rules", async () => {
    const { app } = await appWith({ rateLimit: [{ name: 'login', key: 'ip', limit: 0, window: minute }] });
    const error = await refusal(app);
    expect(error.code).to.equal('ERR_LIMIT');
    expect(error.message).to.match(
      /^ratekeeper\/fastify: route POST \/login: config\.rateLimit: rule "login"/,
    );
  });

  it('never listens with a refused route: no request is served', async () => {
    const { app, served } = await appWith({ ratelimit: rules });
    let failed: unknown;
    await app.listen({ port: 0, host: '127.0.0.1' }).catch((error: unknown) => {
      failed = error;
    });
    expect(failed).to.be.instanceOf(RateLimitConfigError);
    expect(app.server.listening).to.equal(false);
    expect(served.count).to.equal(0);
    await app.close();
  });

  it('accepts rules, a limiter and false, and limits by them', async () => {
    const limiter = createLimiter({ rules: [{ name: 'shared', key: 'ip', limit: 1, window: minute }] });
    const app = Fastify();
    await app.register(rateLimit, { rules: [{ name: 'all', key: 'ip', limit: 100, window: minute }] });
    app.post('/rules', { config: { rateLimit: rules } }, async () => 'ok');
    app.post('/limiter', { config: { rateLimit: limiter } }, async () => 'ok');
    app.post('/free', { config: { rateLimit: false, other: 'kept' } }, async () => 'ok');
    await app.ready();
    const agent = supertest(app.server);
    const statuses: number[] = [];
    for (const path of ['/rules', '/rules', '/limiter', '/limiter', '/free', '/free'])
      statuses.push((await agent.post(path)).status);
    expect(statuses).to.deep.equal([200, 429, 200, 429, 200, 200]);
    await app.close();
    await limiter.close();
  });
});
