// What only the Hono middleware has: connection info per runtime, its trustProxy forms, reading the body.
import type { IncomingMessage } from 'node:http';
import { getConnInfo } from '@hono/node-server/conninfo';
import { expect } from 'chai';
import { Hono } from 'hono';
import type { GetConnInfo } from 'hono/conninfo';
import { methodOverride } from 'hono/method-override';
import { rateLimit } from '../../adapters/hono.js';
import { createLimiter, type Decision, type Rule } from '../../src/index.js';
import { UNRESOLVED_IP_WARNING } from '../../src/warnings.js';

const fixed = (size: string) => ({ type: 'fixed', size }) as const;
const perIp: Rule[] = [{ name: 'per-ip', key: 'ip', limit: 1, window: fixed('1m') }];

/** The bindings @hono/node-server passes: only the socket's peer address is read. */
const node = (remoteAddress: string) => ({ incoming: { socket: { remoteAddress } } as IncomingMessage });

function echoApp(middleware: ReturnType<typeof rateLimit>) {
  const app = new Hono();
  app.use(middleware);
  app.all('/', (c) => {
    const decision: Decision | undefined = c.get('rateLimit'); // typed by the adapter's ContextVariableMap
    return c.json({ key: decision?.rules[0]?.key ?? null });
  });
  return app;
}
const keyOf = async (res: Response) => ((await res.json()) as { key: string | null }).key;

describe('Hono middleware', () => {
  it("on a runtime with no socket and no getConnInfo, 'ip' rules share one bucket per rule and warn once", async () => {
    const warnings: string[] = [];
    const onWarning = (w: Error & { code?: string }) => void (w.code && warnings.push(w.code));
    process.on('warning', onWarning);
    try {
      const app = echoApp(rateLimit(perIp));
      const first = await app.request('/');
      expect([first.status, await keyOf(first)]).to.deep.equal([200, '#unresolved-ip']);
      expect((await app.request('/', { headers: { 'x-forwarded-for': '198.51.100.9' } })).status).to.equal(
        429,
      );
      await new Promise((resolve) => setImmediate(resolve));
    } finally {
      process.off('warning', onWarning);
    }
    expect(warnings.filter((c) => c === UNRESOLVED_IP_WARNING)).to.have.length(1);
  });

  it("takes the runtime's getConnInfo (here one reading a platform header), and the Node socket by default", async () => {
    const platform: GetConnInfo = (c) => {
      const address = c.req.header('cf-connecting-ip');
      return { remote: address === undefined ? {} : { address } };
    };
    const edge = echoApp(rateLimit(perIp, { getConnInfo: platform }));
    const a = await edge.request('/', { headers: { 'cf-connecting-ip': '203.0.113.1' } });
    expect(await keyOf(a)).to.equal('203.0.113.1');
    expect((await edge.request('/', { headers: { 'cf-connecting-ip': '203.0.113.2' } })).status).to.equal(
      200,
    );
    expect((await edge.request('/', { headers: { 'cf-connecting-ip': '203.0.113.1' } })).status).to.equal(
      429,
    );

    // @hono/node-server's own getConnInfo and the default read the same socket.
    for (const options of [{}, { getConnInfo }]) {
      const app = echoApp(rateLimit(perIp, options));
      expect(await keyOf(await app.request('/', {}, node('::ffff:192.0.2.7')))).to.equal('192.0.2.7');
      expect((await app.request('/', {}, node('192.0.2.7'))).status).to.equal(429);
    }
  });

  it("believes X-Forwarded-For as far as trustProxy says: hops, subnets ('loopback'), a function", async () => {
    const cases: Array<[Parameters<typeof rateLimit>[1], string]> = [
      [{}, '127.0.0.1'],
      [{ trustProxy: 1 }, '198.51.100.2'],
      [{ trustProxy: 2 }, '198.51.100.1'],
      [{ trustProxy: 'loopback' }, '198.51.100.2'],
      [{ trustProxy: ['loopback', '198.51.100.2'] }, '198.51.100.1'],
      [{ trustProxy: (address: string) => address === '127.0.0.1' }, '198.51.100.2'],
    ];
    for (const [options, expected] of cases) {
      const app = echoApp(rateLimit(perIp, options));
      const res = await app.request(
        '/',
        { headers: { 'x-forwarded-for': 'evil, 198.51.100.1, 198.51.100.2' } },
        node('127.0.0.1'),
      );
      expect(await keyOf(res), JSON.stringify(options)).to.equal(expected);
    }
  });

  it('reads a JSON or form body for body.* rules and leaves it to the handler, cached; a malformed one has no key', async () => {
    const byUser: Rule[] = [{ name: 'user', key: 'body.username', limit: 1, window: fixed('1m') }];
    const app = new Hono();
    app.use(rateLimit(byUser));
    app.post('/json', async (c) => c.json({ got: await c.req.json() }));
    app.post('/form', async (c) => c.json({ got: await c.req.parseBody() }));
    app.post('/raw', async (c) => c.text(await c.req.text()));
    app.onError((_error, c) => c.text('not JSON', 400));
    const json = (body: string) =>
      app.request('/json', { method: 'POST', headers: { 'content-type': 'application/json' }, body });
    const ok = await json('{"username":"ann"}');
    expect([ok.status, await ok.json()]).to.deep.equal([200, { got: { username: 'ann' } }]);
    expect((await json('{"username":"ann"}')).status).to.equal(429);
    const form = () =>
      app.request('/form', { method: 'POST', body: new URLSearchParams({ username: 'bob' }) });
    expect((await form()).status).to.equal(200);
    expect((await form()).status).to.equal(429);
    for (let i = 0; i < 3; i++) expect((await json('{"username":')).status).to.equal(400); // the handler's own error
    const raw = await app.request('/raw', {
      method: 'POST',
      headers: { 'content-type': 'text/plain' },
      body: 'x',
    });
    expect([raw.status, await raw.text()]).to.deep.equal([200, 'x']);
  });

  it('keys a JSON body sent as text/plain, without a content type or as application/x-json as c.req.json() reads it', async () => {
    const byUser: Rule[] = [{ name: 'user', key: 'body.username', limit: 1, window: fixed('1m') }];
    const app = new Hono();
    app.use(rateLimit(byUser));
    app.post('/login', async (c) => {
      const { username } = (await c.req.json()) as { username: string };
      return c.json({ username, key: c.get('rateLimit')?.rules[0]?.key ?? null });
    });
    app.post('/upload', async (c) => c.body(new Uint8Array(await c.req.arrayBuffer())));
    app.post('/form', async (c) => c.json(await c.req.parseBody()));
    const login = (name: string, type?: string) =>
      app.request('/login', {
        method: 'POST',
        headers: type === undefined ? {} : { 'content-type': type },
        body: new TextEncoder().encode(JSON.stringify({ username: name })),
      });
    for (const [name, type] of [
      ['ann', 'text/plain'],
      ['bob', undefined],
      ['cy', 'application/x-json'],
    ] as const) {
      const first = await login(name, type);
      expect([first.status, await first.json()], String(type)).to.deep.equal([
        200,
        { username: name, key: name },
      ]);
      expect((await login(name, 'text/plain;charset=utf-8')).status, `${type}, again`).to.equal(429);
    }
    // Bytes that are not UTF-8 text stay exact for the handler; a multipart form is still a form.
    const bytes = new Uint8Array([0xff, 0x00, 0xfe, 0x80, 0x7b]);
    const upload = await app.request('/upload', {
      method: 'POST',
      headers: { 'content-type': 'application/octet-stream' },
      body: bytes,
    });
    expect(new Uint8Array(await upload.arrayBuffer())).to.deep.equal(bytes);
    const form = new FormData();
    form.set('username', 'dee');
    form.set('file', new Blob([bytes]), 'f.bin');
    const posted = await app.request('/form', { method: 'POST', body: form });
    expect(posted.status).to.equal(200);
    expect(((await posted.json()) as { username: string }).username).to.equal('dee');
  });

  it('reads no body unless a rule keys on it, and keeps the exact text for the handler when it does', async () => {
    const webhook = (rules: Rule[]) => {
      const app = new Hono();
      app.use(rateLimit(rules));
      app.post('/hook', async (c) => c.text(await new Response(c.req.raw.body).text()));
      app.post('/signed', async (c) => c.text(await c.req.text()));
      return app;
    };
    const payload = '{ "username":  "ann",\n "amount": 1.50 }';
    const post = (app: Hono, path: string) =>
      app.request(path, { method: 'POST', headers: { 'content-type': 'application/json' }, body: payload });
    // No rule reads the body: the raw stream is the handler's.
    expect(await (await post(webhook(perIp), '/hook')).text()).to.equal(payload);
    // A body.* rule: the body was read as text, so the handler's text() gets the bytes a signature covers.
    const byUser = webhook([{ name: 'user', key: 'body.username', limit: 5, window: fixed('1m') }]);
    expect(await (await post(byUser, '/signed')).text()).to.equal(payload);
  });

  it("matches the request Hono's methodOverride dispatches again, so an override after the limiter hides nothing", async () => {
    const app = new Hono();
    app.use(
      rateLimit([{ name: 'delete', match: 'DELETE /items/:id', key: 'ip', limit: 1, window: fixed('1m') }]),
    );
    app.use(methodOverride({ app, header: 'x-http-method-override' }));
    app.delete('/items/:id', (c) => c.text('deleted'));
    const override = () =>
      app.request(
        '/items/7',
        { method: 'POST', headers: { 'x-http-method-override': 'DELETE' } },
        node('192.0.2.1'),
      );
    expect((await override()).status).to.equal(200);
    expect((await override()).status).to.equal(429);
  });

  it('throws a limiter error to app.onError, consuming nothing', async () => {
    const limiter = createLimiter({
      rules: [
        {
          name: 'boom',
          key: () => {
            throw new Error('no tenant');
          },
          limit: 1,
          window: fixed('1m'),
        },
      ],
    });
    const app = echoApp(rateLimit(limiter));
    app.onError((error, c) => c.json({ error: error.message }, 500));
    const res = await app.request('/');
    expect([res.status, await res.json()]).to.deep.equal([
      500,
      { error: 'rule "boom": key function threw: no tenant' },
    ]);
    await limiter.close();
  });

  it('refuses bad options when the middleware is built', () => {
    expect(() => rateLimit(perIp, { statusCode: 302 })).to.throw(
      /statusCode must be an integer from 400 to 599/,
    );
    expect(() => rateLimit({} as never)).to.throw(/expects an array of rules or a limiter/);
    expect(() => rateLimit(perIp, { trustProxies: 1 } as never)).to.throw(
      /rateLimit: unknown field 'trustProxies' \(got 1\), did you mean 'trustProxy'\?/,
    );
  });
});
