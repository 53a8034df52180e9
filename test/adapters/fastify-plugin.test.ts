// What only the Fastify plugin has: per-route config, encapsulation, the hook phase, its options, closing.
import { expect } from 'chai';
import Fastify from 'fastify';
import { rateLimit } from '../../adapters/fastify.js';
import { createLimiter, MemoryStore, type Rule } from '../../src/index.js';

const fixed = (size: string) => ({ type: 'fixed', size }) as const;
const everyRoute: Rule[] = [{ name: 'all', key: 'ip', limit: 1, window: fixed('1m') }];

describe('Fastify plugin', () => {
  it("exempts a route with config.rateLimit false, and gives a route's own rules precedence", async () => {
    const app = Fastify();
    await app.register(rateLimit, { rules: everyRoute });
    const own: Rule[] = [{ name: 'own', key: 'ip', limit: 2, window: fixed('1m') }];
    app.get('/free', { config: { rateLimit: false } }, async (request) => ({
      decided: 'rateLimit' in request && request.rateLimit !== undefined,
    }));
    app.get('/own', { config: { rateLimit: own } }, async () => 'own');
    app.get('/plain', async () => 'plain');
    for (let i = 0; i < 3; i++) {
      const res = await app.inject('/free');
      expect([res.statusCode, res.headers['x-ratelimit-limit'], res.json()]).to.deep.equal([
        200,
        undefined,
        { decided: false },
      ]);
    }
    expect((await app.inject('/own')).headers['x-ratelimit-limit']).to.equal('2');
    // HEAD shares the GET route's limiter (Fastify adds the HEAD route itself).
    expect((await app.inject({ method: 'HEAD', url: '/own' })).statusCode).to.equal(200);
    expect((await app.inject('/own')).statusCode).to.equal(429);
    expect((await app.inject('/plain')).statusCode).to.equal(200);
    expect((await app.inject('/plain')).statusCode).to.equal(429);
    await app.close();
  });

  it('limits unknown routes (404) as Express and Koa do', async () => {
    const app = Fastify();
    await app.register(rateLimit, { rules: everyRoute });
    expect((await app.inject('/nowhere')).statusCode).to.equal(404);
    expect((await app.inject('/nowhere-else')).statusCode).to.equal(429);
    await app.close();
  });

  it('applies to the context it is registered in and its children, not to siblings', async () => {
    const app = Fastify();
    await app.register(async (limited) => {
      await limited.register(rateLimit, { rules: everyRoute });
      limited.get('/a', async () => 'a');
      await limited.register(async (child) => {
        child.get('/a/child', async () => 'child');
      });
    });
    await app.register(async (sibling) => {
      sibling.get('/b', async () => 'b');
    });
    expect((await app.inject('/a')).statusCode).to.equal(200);
    expect((await app.inject('/a/child')).statusCode).to.equal(429);
    for (let i = 0; i < 3; i++) expect((await app.inject('/b')).statusCode).to.equal(200);
    await app.close();
  });

  it("decides a route's own rules once when two registrations cover the route, with the outer one's options", async () => {
    const app = Fastify();
    await app.register(rateLimit, { rules: everyRoute, headers: 'standard' });
    const own: Rule[] = [{ name: 'own', key: 'ip', limit: 2, window: fixed('1m') }];
    await app.register(async (child) => {
      await child.register(rateLimit, { rules: everyRoute });
      child.get('/own', { config: { rateLimit: own } }, async () => 'own');
    });
    const first = await app.inject('/own');
    expect([first.statusCode, first.headers.ratelimit, first.headers['x-ratelimit-limit']]).to.deep.equal([
      200,
      '"own";r=1;t=60',
      undefined,
    ]);
    expect((await app.inject('/own')).statusCode).to.equal(200);
    expect((await app.inject('/own')).statusCode).to.equal(429);
    await app.close();
  });

  it('matches the URL Fastify routes: a rewriteUrl (which runs before any hook) cannot hide a request', async () => {
    const app = Fastify({ rewriteUrl: (req) => (req.url ?? '/').replace(/^\/v1\//, '/') });
    await app.register(rateLimit, {
      rules: [{ name: 'sms', match: 'POST /sms', key: 'ip', limit: 1, window: fixed('1m') }],
    });
    app.post('/sms', async () => 'sent');
    expect((await app.inject({ method: 'POST', url: '/v1/sms' })).statusCode).to.equal(200);
    expect((await app.inject({ method: 'POST', url: '/v1/sms' })).statusCode).to.equal(429);
    expect((await app.inject({ method: 'POST', url: '/sms' })).statusCode).to.equal(429);
    await app.close();
  });

  it('with neither rules nor limiter, limits only the routes that bring their own', async () => {
    const app = Fastify();
    await app.register(rateLimit, { headers: 'standard' });
    app.get('/own', { config: { rateLimit: everyRoute } }, async () => 'own');
    app.get('/plain', async () => 'plain');
    expect((await app.inject('/own')).headers['ratelimit-policy']).to.equal('"all";q=1;w=60');
    expect((await app.inject('/own')).statusCode).to.equal(429);
    for (let i = 0; i < 3; i++) expect((await app.inject('/plain')).statusCode).to.equal(200);
    await app.close();
  });

  it('decides after the body is parsed and before schema validation, so invalid bodies are counted', async () => {
    const app = Fastify();
    await app.register(rateLimit, {
      rules: [{ name: 'login', key: 'body.username', limit: 2, window: fixed('1m') }],
    });
    const schema = { body: { type: 'object', required: ['password'] } };
    app.post('/login', { schema }, async () => 'ok');
    const send = (payload: object) => app.inject({ method: 'POST', url: '/login', payload });
    expect((await send({ username: 'ann' })).statusCode).to.equal(400);
    expect((await send({ username: 'ann', password: 'x' })).statusCode).to.equal(200);
    expect((await send({ username: 'ann', password: 'x' })).statusCode).to.equal(429);
    expect((await send({ username: 'bob', password: 'x' })).statusCode).to.equal(200);
    await app.close();
  });

  it("with hook 'onRequest', refuses before the body is read", async () => {
    const app = Fastify();
    let parsed = 0;
    app.addContentTypeParser('text/plain', { parseAs: 'string' }, (_request, body, done) => {
      parsed++;
      done(null, body);
    });
    await app.register(rateLimit, { rules: everyRoute, hook: 'onRequest' });
    app.post('/upload', async () => 'ok');
    const upload = () =>
      app.inject({ method: 'POST', url: '/upload', headers: { 'content-type': 'text/plain' }, payload: 'x' });
    expect((await upload()).statusCode).to.equal(200);
    expect((await upload()).statusCode).to.equal(429);
    expect(parsed).to.equal(1);
    await app.close();
  });

  it('refuses rules and limiter together, an unknown hook and bad adapter options when registered', async () => {
    const limiter = createLimiter({ rules: everyRoute });
    const cases: Array<[object, RegExp]> = [
      [{ rules: everyRoute, limiter }, /either rules or limiter, not both/],
      [
        { rules: everyRoute, hook: 'onSend' },
        /hook must be one of onRequest, preParsing, preValidation, preHandler, got 'onSend'/,
      ],
      [{ rules: everyRoute, statusCode: 200 }, /statusCode must be an integer from 400 to 599, got 200/],
      [{ limiter: {} }, /expects an array of rules or a limiter from createLimiter/],
      [
        { rule: everyRoute },
        /ratekeeper\/fastify: unknown field 'rule' \(got an array\), did you mean 'rules'\?/,
      ],
      [{ headers: 'both', hooks: 'onRequest' }, /unknown field 'hooks' .*did you mean 'hook'\?/],
    ];
    for (const [options, message] of cases) {
      const app = Fastify();
      app.register(rateLimit, options);
      let error: unknown;
      await app.ready().then(
        () => {},
        (e: unknown) => {
          error = e;
        },
      );
      expect(String(error)).to.match(message);
      await app.close().then(
        () => {},
        () => {},
      );
    }
    await limiter.close();
  });

  it('closes the limiters it built with the instance, and leaves a given limiter open', async () => {
    const given = createLimiter({ rules: everyRoute });
    const original = MemoryStore.prototype.close;
    let closedStores = 0;
    MemoryStore.prototype.close = function (this: MemoryStore) {
      closedStores++;
      return original.call(this);
    };
    try {
      const outer = Fastify();
      await outer.register(rateLimit, { limiter: given });
      await outer.register(async (child) => {
        await child.register(rateLimit, { rules: everyRoute });
        child.get('/own', { config: { rateLimit: [...everyRoute] } }, async () => 'own');
      });
      await outer.ready();
      await outer.close();
      expect(closedStores).to.equal(2); // the child's rules and the route's rules
      const probe = { method: 'GET', path: '/', ip: '192.0.2.1', headers: {} };
      expect((await given.check(probe)).allowed).to.equal(true);
      expect((await given.check(probe)).allowed).to.equal(false);
    } finally {
      MemoryStore.prototype.close = original;
      await given.close();
    }
  });
});
