// The HTTP, example, plans and attack suites on Hono: through app.request, and on @hono/node-server listening.
import { getRequestListener } from '@hono/node-server';
import { Hono } from 'hono';
import type { ContentfulStatusCode } from 'hono/utils/http-status';
import { type HonoRateLimitOptions, rateLimit } from '../../adapters/hono.js';
import { createHonoApp } from '../../examples/hono-app.js';
import { memoryStores, redisStores } from '../support/stores.js';
import { attackSuite, type Framework } from './suites/attack-suite.js';
import { exampleSuite, type Harness, httpSuite, type SuiteOptions } from './suites/http-suite.js';
import { planSuite } from './suites/plans-suite.js';
import { viaTestClient } from './suites/test-client.js';

function honoOptions(o: SuiteOptions = {}): HonoRateLimitOptions {
  const { onLimited, skip, customHandler, ...rest } = o;
  const out: HonoRateLimitOptions = { ...rest };
  if (onLimited) out.onLimited = (decision) => onLimited(decision);
  if (skip) out.skip = (c) => skip(c.req.header());
  if (customHandler) out.handler = (c, decision) => c.json({ custom: true, rule: decision.rule }, 418);
  return out;
}

/**
 * Hono's own test client: `app.request`, given the Node request as the binding `@hono/node-server` would
 * (its socket is the client's address).
 */
export function requesting(app: Hono) {
  return viaTestClient(async (r) => {
    const headers = new Headers();
    for (const [name, value] of Object.entries(r.headers))
      for (const one of Array.isArray(value) ? value : [value ?? '']) headers.append(name, one);
    const res = await app.request(
      r.url,
      { method: r.method, headers, ...(r.body === undefined ? {} : { body: r.body }) },
      { incoming: r.incoming },
    );
    const out: Record<string, string | string[]> = {};
    res.headers.forEach((value, name) => {
      out[name] = name === 'set-cookie' ? res.headers.getSetCookie() : value;
    });
    return { status: res.status, headers: out, body: Buffer.from(await res.arrayBuffer()) };
  });
}

export const honoHarness: Harness = {
  name: 'Hono',
  build(spec) {
    let hits = 0;
    const app = new Hono();
    app.onError((error, c) => {
      const { status, code } = error as Error & { status?: number; code?: string };
      return c.json({ error: error.message, code }, (status ?? 500) as ContentfulStatusCode);
    });
    // Authentication ahead of the limiter: `x-user: <id>` becomes c.get('user') (the 'user' key form).
    app.use(async (c, next) => {
      const id = c.req.header('x-user');
      if (id !== undefined) c.set('user' as never, { id } as never);
      await next();
    });
    const trustProxy = spec.trust === 'one-hop' ? 1 : spec.trust === 'all';
    const limit = rateLimit(spec.limiter, { ...honoOptions(spec.options), trustProxy });
    if (spec.mount !== 'route') app.use(limit);
    app.use(async (_c, next) => {
      hits++;
      await next();
    });
    app.post('/login', async (c) => {
      const body = (await c.req.json().catch(() => ({}))) as { password?: string };
      return c.json({}, body.password === 'right' ? 200 : 401);
    });
    if (spec.mount === 'route') app.post('/users/:id/like', limit);
    app.post('/users/:id/like', (c) => c.json({ liked: true }));
    app.get('/echo', (c) => c.json({ rateLimit: c.get('rateLimit') }));
    app.get('/status/:code', (c) => c.json({}, Number(c.req.param('code')) as ContentfulStatusCode));
    app.get('/throw/:code', (c) => {
      throw Object.assign(new Error('thrown'), { status: Number(c.req.param('code')) });
    });
    return { listener: requesting(app), hits: () => hits };
  },
  example(options) {
    const { app, limiter } = createHonoApp(options);
    return { listener: requesting(app), limiter };
  },
};

/** The example app on a real listening server, through @hono/node-server's request listener. */
const hono: Framework = {
  name: 'Hono',
  create(options) {
    const { app, limiter, loginLimiter } = createHonoApp(options);
    return { listener: getRequestListener(app.fetch), limiter, loginLimiter };
  },
};

for (const stores of [memoryStores, redisStores]) {
  httpSuite(honoHarness, stores);
  exampleSuite(honoHarness, stores);
  planSuite(honoHarness, stores);
  attackSuite(hono, stores);
}
