// An empty rule array limits nothing: every framework's entry refuses it at construction, as createLimiter does.
import { expect } from 'chai';
import Fastify from 'fastify';
import { rateLimit as expressRateLimit } from '../../adapters/express.js';
import { rateLimit as fastifyRateLimit } from '../../adapters/fastify.js';
import { rateLimit as honoRateLimit } from '../../adapters/hono.js';
import { rateLimit as koaRateLimit } from '../../adapters/koa.js';
import { RateLimit, RateLimitGuard } from '../../adapters/nest.js';
import { RateLimitConfigError, type Rule } from '../../src/index.js';

const MESSAGE = 'rules must be a non-empty array of rule objects, got []';

function refusal(make: () => unknown): RateLimitConfigError {
  try {
    make();
  } catch (error) {
    expect(error).to.be.instanceOf(RateLimitConfigError);
    return error as RateLimitConfigError;
  }
  throw new Error('expected a RateLimitConfigError');
}

describe('rules: [] is refused by every adapter', () => {
  const entries: Array<[string, () => unknown]> = [
    ['Express rateLimit([])', () => expressRateLimit([])],
    ['Koa rateLimit([])', () => koaRateLimit([])],
    ['Hono rateLimit([])', () => honoRateLimit([])],
    ['Nest new RateLimitGuard([])', () => new RateLimitGuard([])],
    ['Nest @RateLimit([])', () => RateLimit([])],
  ];
  for (const [what, make] of entries) {
    it(`${what} throws ERR_RULES at construction`, () => {
      const error = refusal(make);
      expect([error.code, error.message]).to.deep.equal(['ERR_RULES', MESSAGE]);
    });
  }

  it('Fastify: registering with rules: [] makes ready() reject with ERR_RULES, before any request', async () => {
    const app = Fastify();
    let handled = 0;
    void app.register(fastifyRateLimit, { rules: [] as Rule[] });
    app.get('/', async () => {
      handled++;
      return 'ok';
    });
    const error = await app.ready().then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(error).to.be.instanceOf(RateLimitConfigError);
    expect([(error as RateLimitConfigError).code, (error as Error).message]).to.deep.equal([
      'ERR_RULES',
      MESSAGE,
    ]);
    expect(handled).to.equal(0);
    await app.close().catch(() => undefined);
  });

  it("Fastify: a route's config.rateLimit of [] makes ready() reject with ERR_RULES", async () => {
    const app = Fastify();
    void app.register(fastifyRateLimit, {});
    void app.register(async (child) => {
      child.get('/', { config: { rateLimit: [] } }, async () => 'ok');
    });
    const error = await app.ready().then(
      () => undefined,
      (e: unknown) => e,
    );
    expect((error as RateLimitConfigError).code).to.equal('ERR_RULES');
    await app.close().catch(() => undefined);
  });
});
