// ratekeeper/console over HTTP (Express, Koa, Fastify, Hono, NestJS): authorization, CSRF, escaping, unlock.

import 'reflect-metadata';
import { type HttpBindings, serve } from '@hono/node-server';
import { RESPONSE_ALREADY_SENT } from '@hono/node-server/utils/response';
import type { NestExpressApplication } from '@nestjs/platform-express';
import { FastifyAdapter, type NestFastifyApplication } from '@nestjs/platform-fastify';
import { Test } from '@nestjs/testing';
import { expect } from 'chai';
import express from 'express';
import Fastify from 'fastify';
import { Hono } from 'hono';
import Koa from 'koa';
import request from 'supertest';
import { createLimiter, type Limiter, RateLimitConfigError, userKey } from '../../src/index.js';
import { type ConsoleHandler, operatorConsole } from '../../src/operators/console/index.js';
import { API, LOGIN } from '../fixtures/ops-rules.js';

const HOSTILE = '<img src=x onerror=alert(1)>';
const authorize = (req: { headers: Record<string, unknown> }) => req.headers['x-operator'] === 'yes';

function expressApp(limiter: Limiter, withBodyParser = false) {
  const app = express();
  if (withBodyParser) app.use(express.urlencoded({ extended: false }));
  app.use('/ops', operatorConsole(limiter, { authorize }));
  app.use((err: Error, _req: express.Request, res: express.Response, _next: express.NextFunction) => {
    res.status(599).send(`app error handler: ${err.message}`);
  });
  return app.listen(0);
}

function koaApp(handler: ConsoleHandler) {
  const app = new Koa();
  app.use(async (ctx, next) => {
    if (ctx.path !== '/ops' && !ctx.path.startsWith('/ops/')) return next();
    ctx.respond = false;
    await handler(ctx.req, ctx.res);
  });
  return app.listen(0);
}

/** The page's CSRF token and the cookie holding it, as a browser would keep them. */
async function session(server: Parameters<typeof request>[0], path = '/ops') {
  const page = await request(server).get(path).set('x-operator', 'yes').expect(200);
  const token = /name="csrf" value="([^"]+)"/.exec(page.text)?.[1] as string;
  const cookie = (page.headers['set-cookie'] as unknown as string[])[0]?.split(';')[0] as string;
  return { token, cookie, page };
}

describe('operator console', () => {
  let limiter: Limiter;
  let server: ReturnType<typeof expressApp>;
  beforeEach(async () => {
    limiter = createLimiter({ rules: [LOGIN, API] });
    server = expressApp(limiter);
    for (const key of ['alice', HOSTILE]) for (let i = 0; i < 3; i++) await limiter.consume('login', key);
  });
  afterEach(async () => {
    server.close();
    await limiter.close();
  });

  it('refuses to be built without authorize, with an unknown option, or a bad lockedLimit', () => {
    const build = (options: unknown) => () => operatorConsole(limiter, options as never);
    expect(build({})).to.throw(RateLimitConfigError, /options\.authorize must be a function/);
    expect(build(undefined)).to.throw(RateLimitConfigError, /options\.authorize must be a function/);
    expect(build({ authorize, lockedLimt: 5 })).to.throw(
      RateLimitConfigError,
      /operatorConsole: unknown field 'lockedLimt' \(got 5\), did you mean 'lockedLimit'\?/,
    );
    expect(build({ authorize, lockedLimit: 0 })).to.throw(
      /lockedLimit must be an integer from 1 to 1000, got 0/,
    );
    expect(() => operatorConsole([limiter, createLimiter({ rules: [LOGIN] })], { authorize })).to.throw(
      /two limiters have a rule named 'login'/,
    );
  });

  it('answers 403 to a request authorize refuses, and serves the page to one it admits', async () => {
    const refused = await request(server).get('/ops').expect(403);
    expect(refused.text).not.to.include('alice');
    const page = await request(server).get('/ops/').set('x-operator', 'yes').expect(200);
    expect(page.headers['content-type']).to.equal('text/html; charset=utf-8');
    expect(page.headers['content-security-policy']).to.match(
      /^default-src 'none'; style-src 'sha256-[A-Za-z0-9+/=]+'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'$/,
    );
    expect(page.headers).to.include({ 'cache-control': 'no-store', 'referrer-policy': 'same-origin' });
    expect(page.text).not.to.match(/<script|src="http|href="http|<link/);
    expect(page.text).to.include(
      '<td>login</td><td>2 per 1h (fixed window)</td><td>15m, x2 each time up to 1d</td>',
    );
  });

  it('escapes keys everywhere: a hostile key is text in the list, the lookup and the forms', async () => {
    const locked = await request(server).get('/ops').set('x-operator', 'yes');
    expect(locked.text).not.to.include(HOSTILE);
    expect(locked.text).to.include('<td class="key"><bdi>&lt;img src=x onerror=alert(1)&gt;</bdi></td>');
    expect(locked.text).to.include('name="key" value="&lt;img src=x onerror=alert(1)&gt;"');
    const lookup = await request(server)
      .get('/ops')
      .query({ rule: 'login', key: HOSTILE })
      .set('x-operator', 'yes');
    expect(lookup.text).not.to.include(HOSTILE);
    expect(lookup.text).to.include('<span class="key"><bdi>&lt;img src=x onerror=alert(1)&gt;</bdi></span>');
  });

  it('shows invisible and bidirectional characters as escapes in isolated keys, and unlocks the exact key', async () => {
    for (const key of ['alice\u200b', '\u202e7.311.0.302'])
      for (let i = 0; i < 3; i++) await limiter.consume('login', key);
    const { token, cookie, page } = await session(server);
    expect(page.text).to.include('<td class="key"><bdi>alice\\u200b</bdi></td>');
    expect(page.text).to.include('<td class="key"><bdi>\\u202e7.311.0.302</bdi></td>');
    expect(page.text).to.include('<td class="key"><bdi>alice</bdi></td>');
    const visibleText = page.text.replace(/<input[^>]*>/g, '').replace(/href="[^"]*"/g, '');
    expect(visibleText, 'no hidden character outside the forms').not.to.match(/[\u200b\u202e]/);
    expect(page.text, 'the form carries the key as shown').to.include('name="key" value="alice\\u200b"');
    const lookup = await request(server)
      .get('/ops')
      .query({ rule: 'login', key: '\u202e7.311.0.302' })
      .set('x-operator', 'yes');
    expect(lookup.text).to.include('<span class="key"><bdi>\\u202e7.311.0.302</bdi></span>');
    const port = (server.address() as { port: number }).port;
    const done = await request(server)
      .post('/ops')
      .set({ 'x-operator': 'yes', cookie, origin: `http://127.0.0.1:${port}` })
      .type('form')
      .send({ action: 'unlock', rule: 'login', key: 'alice\u200b', csrf: token });
    expect(done.status).to.equal(303);
    const after = await request(server)
      .get(`/ops${done.headers.location}`)
      .set({ 'x-operator': 'yes', cookie });
    expect(after.text).to.include('Unlock sent for &#39;alice\\u200b&#39; (rule login)');
    expect((await limiter.status('login', 'alice\u200b')).locked).to.equal(false);
    expect((await limiter.status('login', 'alice')).locked, 'the look-alike stays locked').to.equal(true);
    expect((await limiter.status('login', '\u202e7.311.0.302')).locked).to.equal(true);
  });

  it('shows keys that read as alice (spaces, U+00A0, Hangul fillers, U+2800) as escapes, the key of a lone surrogate as its digest; its links and forms act on the exact key', async () => {
    // A key holding a lone surrogate is stored as its digest (UTF-8 would make 'alice\ud800' and
    // 'alice\ud801' one key), and the console shows and acts on that digest.
    const surrogateKey = userKey('alice\ud800');
    const lookalikes: Record<string, string> = {
      'alice ': 'alice\\x20',
      'alice\u00a0': 'alice\\xa0',
      'alice\u3164': 'alice\\u3164',
      'alice\u2800': 'alice\\u2800',
      'alice\ud800': surrogateKey,
      'alice\ufffd': 'alice\ufffd',
      'al\\ice': 'al\\\\ice',
    };
    for (const key of Object.keys(lookalikes))
      for (let i = 0; i < 3; i++) await limiter.consume('login', key);
    const { token, cookie, page } = await session(server);
    const cells = [...page.text.matchAll(/<td class="key"><bdi>([^<]*)<\/bdi><\/td>/g)].map((m) => m[1]);
    expect(cells.sort()).to.deep.equal(
      ['alice', '&lt;img src=x onerror=alert(1)&gt;', ...Object.values(lookalikes)].sort(),
    );
    // The look-up link of the lone-surrogate key finds that key, not alice\ufffd.
    const link = `?rule=login&key=${encodeURIComponent(surrogateKey)}`;
    expect(page.text, 'the link carries the key as shown').to.include(`href="${link.replace('&', '&amp;')}"`);
    const lookup = await request(server).get(`/ops${link}`).set('x-operator', 'yes');
    expect(lookup.text).to.include(`<span class="key"><bdi>${surrogateKey}</bdi></span>`);
    expect(lookup.text).to.include(`name="key" value="${surrogateKey}"`);
    const port = (server.address() as { port: number }).port;
    for (const shown of [surrogateKey, 'alice\\x20']) {
      const done = await request(server)
        .post('/ops')
        .set({ 'x-operator': 'yes', cookie, origin: `http://127.0.0.1:${port}` })
        .type('form')
        .send({ action: 'unlock', rule: 'login', key: shown, csrf: token });
      expect(done.status).to.equal(303);
    }
    const locked = await Promise.all(Object.keys(lookalikes).map((key) => limiter.status('login', key)));
    expect(locked.map((s) => s.locked)).to.deep.equal([false, true, true, true, false, true, true]);
    const bad = await request(server)
      .get('/ops')
      .query({ rule: 'login', key: 'al\\ice' })
      .set('x-operator', 'yes');
    expect(bad.status).to.equal(400);
    expect(bad.text).to.include('starts no escape');
  });

  it('unlocks with a valid token and cookie; refuses (403) and changes nothing without one, with a wrong one, or from another origin', async () => {
    const { token, cookie } = await session(server);
    const post = (fields: Record<string, string>, headers: Record<string, string> = {}) =>
      request(server)
        .post('/ops')
        .set({ 'x-operator': 'yes', ...headers })
        .type('form')
        .send(fields);
    const unlock = { action: 'unlock', rule: 'login', key: 'alice' };

    expect((await post(unlock, { cookie })).status, 'no token').to.equal(403);
    expect((await post({ ...unlock, csrf: token })).status, 'no cookie').to.equal(403);
    expect(
      (await post({ ...unlock, csrf: `${token.slice(1)}x` }, { cookie })).status,
      'wrong token',
    ).to.equal(403);
    const foreign = await post({ ...unlock, csrf: token }, { cookie, origin: 'http://evil.example' });
    expect(foreign.status).to.equal(403);
    expect(foreign.text).to.include(
      'Refused: the form came from another origin (http://evil.example). Nothing was changed.',
    );
    expect(
      (await post({ ...unlock, csrf: token }, { cookie, 'sec-fetch-site': 'cross-site' })).status,
    ).to.equal(403);
    expect((await limiter.status('login', 'alice')).locked, 'still locked').to.equal(true);

    const done = await post(
      { ...unlock, csrf: token },
      { cookie, origin: `http://127.0.0.1:${(server.address() as { port: number }).port}` },
    );
    expect(done.status).to.equal(303);
    expect(done.headers.location).to.equal('?rule=login&key=alice&done=unlock');
    expect((await limiter.status('login', 'alice')).locked).to.equal(false);
    expect((await limiter.consume('login', 'alice')).allowed).to.equal(true);
    const after = await request(server)
      .get(`/ops${done.headers.location}`)
      .set({ 'x-operator': 'yes', cookie });
    expect(after.text).to.include('Unlock sent for &#39;alice&#39; (rule login)');
  });

  it('looks a key up: count, remaining, lock time, level; an unknown rule is said on the page', async () => {
    await limiter.consume('api', 'bob');
    const page = await request(server)
      .get('/ops')
      .query({ rule: 'api', key: 'bob' })
      .set('x-operator', 'yes');
    expect(page.text).to.match(/<dt>Count<\/dt><dd>1 of 100<\/dd>\s*<dt>Remaining<\/dt><dd>99<\/dd>/);
    expect(page.text).to.include('<dt>Locked</dt><dd>no</dd><dt>Lockout level</dt><dd>0</dd>');
    const locked = await request(server)
      .get('/ops')
      .query({ rule: 'login', key: 'alice' })
      .set('x-operator', 'yes');
    expect(locked.text).to.match(
      /<dt>Locked<\/dt><dd>yes, unlocks in (14m \d+s|15m)<\/dd><dt>Lockout level<\/dt><dd>1<\/dd>/,
    );
    expect(locked.text, 'a locked key: why nothing remains').to.include(
      '<dt>Remaining</dt><dd>none while locked (counting starts again from 0 when the lock ends)</dd>',
    );
    const unknown = await request(server)
      .get('/ops')
      .query({ rule: 'nope', key: 'x' })
      .set('x-operator', 'yes')
      .expect(200);
    expect(unknown.text).to.include('No rule named &#39;nope&#39;.');
  });

  it('sets a limit override for a key (for a while), shows it, and clears it; a bad limit or duration is refused on the page', async () => {
    const { token, cookie } = await session(server);
    const post = (fields: Record<string, string>) =>
      request(server)
        .post('/ops')
        .set({ 'x-operator': 'yes', cookie })
        .type('form')
        .send({ rule: 'api', key: 'bob', csrf: token, ...fields });
    const set = await post({ action: 'override', limit: '5', for: '1h' }).expect(303);
    expect(set.headers.location).to.equal('?rule=api&key=bob&done=override');
    expect(await limiter.status('api', 'bob')).to.include({ limit: 5, overridden: true });
    const page = await request(server)
      .get(`/ops${set.headers.location}`)
      .set({ 'x-operator': 'yes', cookie });
    expect(page.text).to.include('<dd>0 of 5 (override for this key)</dd>');
    expect(page.text).to.include('Limit override set for &#39;bob&#39; (rule api)');
    expect(page.text).to.include('Clear override</button>');

    const refusals: Array<[Record<string, string>, string]> = [
      [
        { action: 'override', limit: 'ten' },
        'Refused: the limit must be a whole number, got &#39;ten&#39;. Nothing was changed.',
      ],
      [{ action: 'override', limit: '0' }, 'limit must be a positive integer or null, got 0'],
      [{ action: 'override', limit: '7', for: 'soon' }, 'for must be a duration'],
    ];
    for (const [fields, message] of refusals) {
      const refused = await post(fields).expect(400);
      expect(refused.text).to.include(message);
    }
    expect(await limiter.status('api', 'bob')).to.include({ limit: 5, overridden: true });
    await post({ action: 'clear-override' }).expect(303);
    expect(await limiter.status('api', 'bob')).to.include({ limit: 100, overridden: false });

    // A window typed with the limit left empty: the key's window alone, shown on its page.
    const windowed = await post({ action: 'override', limit: '', window: '10s' }).expect(303);
    expect(await limiter.status('api', 'bob')).to.include({ limit: 100, overridden: true, windowMs: 10_000 });
    const shown = await request(server)
      .get(`/ops${windowed.headers.location}`)
      .set({ 'x-operator': 'yes', cookie });
    expect(shown.text).to.include('<dd>0 of 100 (override for this key, window 10s)</dd>');
    const refused = await post({ action: 'override', limit: '', window: '0' }).expect(400);
    expect(refused.text).to.include('rule &quot;api&quot;');
    await post({ action: 'clear-override' }).expect(303);
  });

  it("sets a rule's limit for every key (for a while), shows it in the rules table, and clears it; a bad one is refused", async () => {
    const { token, cookie } = await session(server);
    const post = (fields: Record<string, string>) =>
      request(server)
        .post('/ops')
        .set({ 'x-operator': 'yes', cookie })
        .type('form')
        .send({ rule: 'api', csrf: token, ...fields });
    const set = await post({ action: 'rule-limit', limit: '7', for: '1h' }).expect(303);
    expect(set.headers.location).to.equal('?done=rule-limit&rule=api');
    expect(await limiter.limits()).to.have.length(1);
    expect((await limiter.limits())[0]).to.include({ rule: 'api', limit: 7 });
    expect(await limiter.status('api', 'carol')).to.include({ limit: 7 });
    const page = await request(server)
      .get(`/ops${set.headers.location}`)
      .set({ 'x-operator': 'yes', cookie });
    expect(page.text).to.include('Rule-wide limit set for every key of rule api');
    expect(page.text).to.match(/<strong>7<\/strong> until \d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC/);
    expect(page.text).to.include('Clear</button>');

    for (const [fields, message] of [
      [{ action: 'rule-limit', limit: 'lots' }, 'the limit must be a whole number, got &#39;lots&#39;'],
      [{ action: 'rule-limit', limit: '0' }, '0 is refused'],
      [{ action: 'rule-limit', limit: '5', for: 'later' }, 'for must be a duration'],
      [{ action: 'rule-limit', limit: '5', rule: 'nope' }, 'no rule named &#39;nope&#39;'],
    ] as Array<[Record<string, string>, string]>) {
      const refused = await post(fields).expect(400);
      expect(refused.text).to.include(message);
    }
    expect((await limiter.limits())[0]).to.include({ rule: 'api', limit: 7 });
    await post({ action: 'clear-rule-limit' }).expect(303);
    expect(await limiter.limits()).to.deep.equal([]);
    expect(await limiter.status('api', 'carol')).to.include({ limit: 100 });
  });

  it('refuses what no console form sends: other methods, other body types, oversized bodies', async () => {
    const { token, cookie } = await session(server);
    const asOperator = { 'x-operator': 'yes', cookie };
    await request(server).put('/ops').set(asOperator).expect(405).expect('allow', 'GET, HEAD, POST');
    await request(server).post('/ops').set(asOperator).send({ action: 'unlock', csrf: token }).expect(415);
    const huge = { action: 'unlock', rule: 'login', key: 'x'.repeat(20_000), csrf: token };
    await request(server).post('/ops').set(asOperator).type('form').send(huge).expect(413);
    await request(server)
      .post('/ops')
      .set(asOperator)
      .type('form')
      .send({ action: 'drop', csrf: token })
      .expect(400);
    expect((await limiter.status('login', 'alice')).locked).to.equal(true);
  });

  it('works behind a body parser, and hands a throwing authorize to the app through next()', async () => {
    const parsed = expressApp(limiter, true);
    try {
      const { token, cookie } = await session(parsed);
      await request(parsed)
        .post('/ops')
        .set({ 'x-operator': 'yes', cookie })
        .type('form')
        .send({ action: 'unlock', rule: 'login', key: 'alice', csrf: token })
        .expect(303);
      expect((await limiter.status('login', 'alice')).locked).to.equal(false);
    } finally {
      parsed.close();
    }
    const app = express();
    app.use(
      '/ops',
      operatorConsole(limiter, {
        authorize: () => {
          throw new Error('session store down');
        },
      }),
    );
    app.use(
      (err: Error, _req: express.Request, res: express.Response, _next: express.NextFunction) =>
        void res.status(599).send(err.message),
    );
    await request(app).get('/ops').expect(599, 'session store down');
  });

  it('mounts in Koa by handing it ctx.req and ctx.res', async () => {
    const koa = koaApp(operatorConsole(limiter, { authorize }));
    try {
      await request(koa).get('/ops').expect(403);
      const { token, cookie, page } = await session(koa);
      expect(page.text).to.include('<td class="key"><bdi>alice</bdi></td>');
      const done = await request(koa)
        .post('/ops')
        .set({ 'x-operator': 'yes', cookie })
        .type('form')
        .send({ action: 'unlock', rule: 'login', key: 'alice', csrf: token });
      expect(done.status).to.equal(303);
      expect((await limiter.status('login', 'alice')).locked).to.equal(false);
    } finally {
      koa.close();
    }
  });

  it('mounts in Fastify by handing it request.raw and reply.raw, its form bodies left unparsed', async () => {
    const handler = operatorConsole(limiter, { authorize });
    const app = Fastify();
    await app.register(async (ops) => {
      ops.addContentTypeParser('application/x-www-form-urlencoded', (_req, _payload, done) => done(null));
      ops.all('/ops', (req, reply) => {
        reply.hijack();
        return handler(req.raw, reply.raw);
      });
    });
    try {
      expect((await app.inject('/ops')).statusCode).to.equal(403);
      const page = await app.inject({ url: '/ops', headers: { 'x-operator': 'yes' } });
      const token = /name="csrf" value="([^"]+)"/.exec(page.body)?.[1] as string;
      const cookie = String(page.headers['set-cookie']).split(';')[0] as string;
      const headers = { 'x-operator': 'yes', cookie, 'content-type': 'application/x-www-form-urlencoded' };
      const form = (csrf: string) => `action=unlock&rule=login&key=alice&csrf=${encodeURIComponent(csrf)}`;
      expect(
        (await app.inject({ method: 'POST', url: '/ops', headers, payload: form('') })).statusCode,
      ).to.equal(403);
      expect(
        (await app.inject({ method: 'POST', url: '/ops', headers, payload: form(token) })).statusCode,
      ).to.equal(303);
      expect((await limiter.status('login', 'alice')).locked).to.equal(false);
    } finally {
      await app.close();
    }
  });

  it('mounts in Hono on Node by handing it c.env.incoming and c.env.outgoing', async () => {
    const handler = operatorConsole(limiter, { authorize });
    const app = new Hono<{ Bindings: HttpBindings }>();
    app.all('/ops', async (c) => {
      await handler(c.env.incoming, c.env.outgoing);
      return RESPONSE_ALREADY_SENT;
    });
    app.get('/', (c) => c.text('the app'));
    const hono = serve({ fetch: app.fetch, port: 0, hostname: '127.0.0.1' });
    await new Promise((resolve) => hono.once('listening', resolve));
    try {
      await request(hono).get('/ops').expect(403);
      await request(hono).get('/').expect(200, 'the app');
      const { token, cookie, page } = await session(hono);
      expect(page.text).to.include('<td class="key"><bdi>alice</bdi></td>');
      const form = { action: 'unlock', rule: 'login', key: 'alice' };
      const post = () => request(hono).post('/ops').set({ 'x-operator': 'yes', cookie }).type('form');
      await post()
        .send({ ...form, csrf: 'forged' })
        .expect(403);
      expect((await limiter.status('login', 'alice')).locked, 'a forged token changes nothing').to.equal(
        true,
      );
      await post()
        .send({ ...form, csrf: token })
        .expect(303);
      expect((await limiter.status('login', 'alice')).locked).to.equal(false);
    } finally {
      await new Promise((resolve) => hono.close(resolve));
    }
  });

  it('mounts in NestJS: app.use on the Express platform, the Fastify mount on the Fastify platform', async () => {
    const handler = operatorConsole(limiter, { authorize });
    const onExpress = (
      await Test.createTestingModule({}).compile()
    ).createNestApplication<NestExpressApplication>({
      logger: false,
    });
    onExpress.use('/ops', handler);
    const onFastify = (
      await Test.createTestingModule({}).compile()
    ).createNestApplication<NestFastifyApplication>(new FastifyAdapter(), { logger: false });
    await onFastify
      .getHttpAdapter()
      .getInstance()
      .register(async (ops) => {
        ops.addContentTypeParser('application/x-www-form-urlencoded', (_req, _payload, done) => done(null));
        ops.all('/ops', (req, reply) => {
          reply.hijack();
          return handler(req.raw, reply.raw);
        });
      });
    try {
      for (const [app, user] of [
        [onExpress, 'alice'],
        [onFastify, HOSTILE],
      ] as const) {
        await app.listen(0, '127.0.0.1');
        const server = app.getHttpServer();
        await request(server).get('/ops').expect(403);
        const { token, cookie } = await session(server);
        const form = { action: 'unlock', rule: 'login', key: user };
        const post = () => request(server).post('/ops').set({ 'x-operator': 'yes', cookie }).type('form');
        await post().send(form).expect(403);
        expect((await limiter.status('login', user)).locked).to.equal(true);
        await post()
          .send({ ...form, csrf: token })
          .expect(303);
        expect((await limiter.status('login', user)).locked).to.equal(false);
      }
    } finally {
      await onExpress.close();
      await onFastify.close();
    }
  });
});
