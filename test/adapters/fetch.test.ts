// ratekeeper/fetch's withRateLimit: a fetch handler behind the limiter, called as runtimes call it (a Request,
// then Bun's server, Deno's info or a Worker's env), and served on a real socket through @hono/node-server's
// request listener: headers, 429s, outcomes, the client address each runtime gives, body and query keys,
// and a concurrency slot held until the body is written.
import { once } from 'node:events';
import { createServer, type IncomingMessage, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { getRequestListener } from '@hono/node-server';
import { expect } from 'chai';
import { rateLimitOf, withRateLimit } from '../../adapters/fetch.js';
import { createLimiter, type Limiter, RateLimitConfigError, type Rule } from '../../src/index.js';
import { PATIENT, until } from '../support/settle.js';

const perIp = (limit: number): Rule => ({
  name: 'api',
  key: 'ip',
  limit,
  window: { type: 'fixed', size: '1m' },
});
/** A handler as runtimes call it: the request, then what the runtime passes after it. */
const ok = (_request: Request, ..._rest: unknown[]) => new Response('ok');
const get = (path = '/', headers: Record<string, string> = {}) =>
  new Request(`http://app.test${path}`, { headers });

/** Bun's server as a fetch handler's second argument: it knows each request's peer. */
const bunServer = (address: string) => ({ requestIP: () => ({ address, family: 'IPv4', port: 1 }) });
/** Deno's serve info as a fetch handler's second argument. */
const denoInfo = (hostname: string) => ({ remoteAddr: { transport: 'tcp', hostname, port: 1 } });

describe('ratekeeper/fetch: withRateLimit', () => {
  let limiter: Limiter | undefined;
  afterEach(async () => {
    await limiter?.close();
    limiter = undefined;
  });

  it('admits up to the limit with the rate-limit fields, then answers 429 with Retry-After and a JSON body', async () => {
    limiter = createLimiter({ rules: [perIp(2)] });
    const handle = withRateLimit(ok, limiter);
    const server = bunServer('192.0.2.1');
    const first = await handle(get(), server);
    expect(first.status).to.equal(200);
    expect(await first.text()).to.equal('ok');
    expect(first.headers.get('x-ratelimit-limit')).to.equal('2');
    expect(first.headers.get('x-ratelimit-remaining')).to.equal('1');
    expect((await handle(get(), server)).status).to.equal(200);
    const denied = await handle(get(), server);
    expect(denied.status).to.equal(429);
    expect(denied.headers.get('retry-after')).to.match(/^\d+$/);
    const body = (await denied.json()) as { error: string; retryAfter: number };
    expect(body.error).to.equal('Too Many Requests');
    expect(body.retryAfter).to.equal(Number(denied.headers.get('retry-after')));
    expect((await handle(get(), bunServer('192.0.2.2'))).status).to.equal(200);
  });

  it("reads the peer from Bun's server, from Deno's info, and from CF-Connecting-IP only with cloudflare: true", async () => {
    limiter = createLimiter({ rules: [perIp(1)] });
    const keys: string[] = [];
    const handle = withRateLimit((request: Request, ..._rest: unknown[]) => {
      keys.push(rateLimitOf(request)?.rules[0]?.key ?? '');
      return new Response('ok');
    }, limiter);
    await handle(get(), bunServer('198.51.100.7'));
    await handle(get(), denoInfo('2001:db8::1'));
    const spoofed = { 'cf-connecting-ip': '203.0.113.9' };
    await handle(get('/', spoofed), { env: true });
    const onCloudflare = withRateLimit(
      (request: Request, ..._rest: unknown[]) => {
        keys.push(rateLimitOf(request)?.rules[0]?.key ?? '');
        return new Response('ok');
      },
      limiter,
      { cloudflare: true },
    );
    await onCloudflare(get('/', spoofed), {}, {});
    // An IPv6 client is keyed by its /56 (docs/rules.md).
    expect(keys).to.deep.equal(['198.51.100.7', '2001:db8::/56', '#unresolved-ip', '203.0.113.9']);
  });

  it('believes X-Forwarded-For only as far as trustProxy allows', async () => {
    limiter = createLimiter({ rules: [perIp(1)] });
    const keys: string[] = [];
    const record = (request: Request, ..._rest: unknown[]) => {
      keys.push(rateLimitOf(request)?.rules[0]?.key ?? '');
      return new Response('ok');
    };
    const forwarded = { 'x-forwarded-for': '203.0.113.1, 198.51.100.2' };
    await withRateLimit(record, limiter)(get('/', forwarded), bunServer('10.0.0.1'));
    await withRateLimit(record, limiter, { trustProxy: 1 })(get('/', forwarded), bunServer('10.0.0.1'));
    await withRateLimit(record, limiter, { trustProxy: 2 })(get('/', forwarded), bunServer('10.0.0.1'));
    expect(keys).to.deep.equal(['10.0.0.1', '198.51.100.2', '203.0.113.1']);
  });

  it('keys on the body, the query and the user the app names; a repeated query key is answered 400', async () => {
    limiter = createLimiter({
      rules: [
        {
          name: 'phone',
          match: 'POST /code',
          key: 'body.phone',
          limit: 1,
          window: { type: 'fixed', size: '1m' },
        },
        {
          name: 'q',
          match: 'GET /search',
          key: 'query.user',
          limit: 1,
          window: { type: 'fixed', size: '1m' },
        },
        { name: 'u', match: 'GET /me', key: 'user', limit: 1, window: { type: 'fixed', size: '1m' } },
      ],
    });
    const handle = withRateLimit(async (request) => new Response(await request.text()), limiter, {
      user: (request) => request.headers.get('x-user') ?? undefined,
    });
    const code = () =>
      new Request('http://app.test/code', {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ phone: '+15550001' }),
      });
    const first = await handle(code());
    expect(first.status).to.equal(200);
    // The handler still reads the body the limiter read.
    expect(await first.text()).to.equal('{"phone":"+15550001"}');
    expect((await handle(code())).status).to.equal(429);
    expect((await handle(get('/search?user=ann'))).status).to.equal(200);
    expect((await handle(get('/search?user=ann'))).status).to.equal(429);
    const repeated = await handle(get('/search?user=bob&user=ann'));
    expect(repeated.status).to.equal(400);
    expect(((await repeated.json()) as { field: string }).field).to.equal('query.user');
    expect((await handle(get('/me', { 'x-user': 'ann' }))).status).to.equal(200);
    expect((await handle(get('/me', { 'x-user': 'ann' }))).status).to.equal(429);
    expect((await handle(get('/me', { 'x-user': 'bob' }))).status).to.equal(200);
  });

  it('judges outcomes by the handler status: failures counted, successes given back', async () => {
    limiter = createLimiter({
      rules: [
        { name: 'login', key: 'ip', limit: 2, window: { type: 'fixed', size: '1m' }, countOn: 'failure' },
      ],
      ...PATIENT,
    });
    const current = limiter;
    let status = 200;
    const handle = withRateLimit(
      (_request: Request, ..._rest: unknown[]) => new Response(null, { status }),
      current,
    );
    const server = bunServer('192.0.2.5');
    for (let i = 0; i < 3; i++) expect((await handle(get(), server)).status).to.equal(200);
    const used = async () => (await current.status('login', '192.0.2.5')).count;
    await until('the successes are given back', async () => (await used()) === 0);
    status = 401;
    expect((await handle(get(), server)).status).to.equal(401);
    expect((await handle(get(), server)).status).to.equal(401);
    expect((await handle(get(), server)).status).to.equal(429);
  });

  it('adds the fields to a response whose headers are immutable (Response.redirect)', async () => {
    limiter = createLimiter({ rules: [perIp(5)] });
    const handle = withRateLimit(
      (_request: Request, ..._rest: unknown[]) => Response.redirect('http://app.test/elsewhere', 302),
      limiter,
    );
    const response = await handle(get(), bunServer('192.0.2.6'));
    expect(response.status).to.equal(302);
    expect(response.headers.get('location')).to.equal('http://app.test/elsewhere');
    expect(response.headers.get('x-ratelimit-remaining')).to.equal('4');
  });

  it("a denial by the app's own handler keeps the rate-limit fields", async () => {
    limiter = createLimiter({ rules: [perIp(1)] });
    const handle = withRateLimit(ok, limiter, { handler: () => new Response('slow down', { status: 503 }) });
    await handle(get(), bunServer('192.0.2.8'));
    const response = await handle(get(), bunServer('192.0.2.8'));
    expect(response.status).to.equal(503);
    expect(await response.text()).to.equal('slow down');
    expect(response.headers.get('retry-after')).to.match(/^\d+$/);
  });

  it('refuses a misspelt option at construction, suggesting the right one', () => {
    expect(() => withRateLimit(ok, [perIp(1)], { clientAdress: () => '192.0.2.1' } as never)).to.throw(
      RateLimitConfigError,
      /clientAdress.*clientAddress/,
    );
  });

  it('refuses a handler that is not a function, naming it', () => {
    expect(() => withRateLimit(undefined as never, [perIp(1)])).to.throw(
      RateLimitConfigError,
      /withRateLimit: its first argument must be the fetch handler/,
    );
  });

  describe('a concurrency slot is held until the body is written', () => {
    const slots: Rule = { name: 'slots', key: () => 'everyone', limit: 1, window: { type: 'concurrency' } };
    const held = async (current: Limiter) => (await current.status('slots', 'everyone')).count;
    /** A streamed body: "a", then "b" once the test lets it end. */
    function streaming() {
      let end = () => {};
      const mayEnd = new Promise<void>((resolve) => {
        end = resolve;
      });
      const handler = () =>
        new Response(
          new ReadableStream<Uint8Array>({
            async start(controller) {
              controller.enqueue(new TextEncoder().encode('a'));
              await mayEnd;
              controller.enqueue(new TextEncoder().encode('b'));
              controller.close();
            },
          }),
        );
      return { handler, end };
    }

    it('refuses a second request while the body streams, admits one once it was read to its end', async () => {
      limiter = createLimiter({ rules: [slots], ...PATIENT });
      const current = limiter;
      const { handler, end } = streaming();
      const handle = withRateLimit(handler, current);
      const response = await handle(get());
      expect(await held(current)).to.equal(1);
      expect((await handle(get())).status).to.equal(429);
      end();
      expect(await response.text()).to.equal('ab');
      expect(await held(current)).to.equal(0);
    });

    it('frees it when the runtime cancels the body, or the request aborts', async () => {
      limiter = createLimiter({ rules: [slots], ...PATIENT });
      const current = limiter;
      const handle = withRateLimit(streaming().handler, current);
      const response = await handle(get());
      await (response.body as ReadableStream<Uint8Array>).cancel();
      await until('the cancelled body frees its slot', async () => (await held(current)) === 0);
      const abort = new AbortController();
      await handle(new Request('http://app.test/', { signal: abort.signal }));
      expect(await held(current)).to.equal(1);
      abort.abort();
      await until('the aborted request frees its slot', async () => (await held(current)) === 0);
    });

    it('frees it when the handler throws, and the error reaches the caller', async () => {
      limiter = createLimiter({ rules: [slots], ...PATIENT });
      const current = limiter;
      const handle = withRateLimit(() => {
        throw new Error('boom');
      }, current);
      let thrown: unknown;
      await handle(get()).catch((error: unknown) => {
        thrown = error;
      });
      expect((thrown as Error).message).to.equal('boom');
      expect(await held(current)).to.equal(0);
    });
  });

  describe('served on a real socket (Node, through a fetch request listener)', () => {
    let server: Server | undefined;
    afterEach(() => {
      server?.closeAllConnections();
      server?.close();
    });

    it('keys on the address clientAddress reads, and answers 429 over HTTP', async () => {
      limiter = createLimiter({ rules: [perIp(1)] });
      const handle = withRateLimit(ok, limiter, {
        clientAddress: (_request, env) =>
          (env as { incoming: IncomingMessage }).incoming.socket.remoteAddress,
      });
      server = createServer(getRequestListener(handle));
      server.listen(0, '127.0.0.1');
      await once(server, 'listening');
      const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/`;
      const first = await fetch(url);
      expect(first.status).to.equal(200);
      expect(first.headers.get('x-ratelimit-remaining')).to.equal('0');
      await first.arrayBuffer();
      const second = await fetch(url);
      expect(second.status).to.equal(429);
      await second.arrayBuffer();
      expect((await limiter.status('api', '127.0.0.1')).count).to.equal(1);
    });
  });
});
