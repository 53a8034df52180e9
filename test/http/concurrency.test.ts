// Concurrency rules through the real frameworks: a slot is held while the handler works, also after its client
// went (an attacker opening and aborting requests never gets more handlers than the limit), and freed when the
// handler is done.
import { once } from 'node:events';
import { createServer, request, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { getRequestListener } from '@hono/node-server';
import { expect } from 'chai';
import express from 'express';
import Fastify from 'fastify';
import { Hono } from 'hono';
import Koa from 'koa';
import { rateLimit as expressLimit } from '../../adapters/express.js';
import { rateLimit as fastifyLimit } from '../../adapters/fastify.js';
import { rateLimit as honoLimit } from '../../adapters/hono.js';
import { rateLimit as koaLimit } from '../../adapters/koa.js';
import { createLimiter, type Limiter } from '../../src/index.js';
import { until } from '../support/settle.js';

/** One handler at a time per client address. */
const RULES = [{ name: 'one', key: 'ip', limit: 1, window: { type: 'concurrency' } }] as const;

/** The handler: tells that it started, then works until the test lets it answer. */
interface Gate {
  entered: Promise<void>;
  open(): void;
  work(): Promise<void>;
}
function gate(): Gate {
  let enter = () => {};
  let open = () => {};
  const entered = new Promise<void>((resolve) => {
    enter = resolve;
  });
  const opened = new Promise<void>((resolve) => {
    open = resolve;
  });
  return {
    entered,
    open: () => open(),
    work: () => {
      enter();
      return opened;
    },
  };
}

type Listener = Parameters<typeof createServer>[1];

const apps: Record<string, (limiter: Limiter, g: () => Gate) => Promise<Listener>> = {
  express: async (limiter, g) => {
    const app = express();
    app.use(expressLimit(limiter));
    app.get('/', async (_req, res) => {
      await g().work();
      res.send('done');
    });
    return app;
  },
  koa: async (limiter, g) => {
    const app = new Koa();
    app.use(koaLimit(limiter));
    app.use(async (ctx) => {
      await g().work();
      ctx.body = 'done';
    });
    return app.callback();
  },
  fastify: async (limiter, g) => {
    const app = Fastify();
    await app.register(fastifyLimit, { limiter });
    app.get('/', async () => {
      await g().work();
      return 'done';
    });
    await app.ready();
    return (req, res) => app.routing(req, res);
  },
  hono: async (limiter, g) => {
    const app = new Hono();
    app.use(honoLimit(limiter));
    app.get('/', async (c) => {
      await g().work();
      return c.text('done');
    });
    return getRequestListener(app.fetch);
  },
};

/** A GET whose status comes back, or which the test aborts. */
function get(server: Server): { status: Promise<number>; abort(): void } {
  const { port } = server.address() as AddressInfo;
  const req = request({ port, path: '/', agent: false });
  const status = new Promise<number>((resolve, reject) => {
    req.once('response', (res) => {
      res.resume();
      resolve(res.statusCode ?? 0);
    });
    req.once('error', reject);
  });
  status.catch(() => {});
  req.end();
  return { status, abort: () => req.destroy() };
}

for (const [name, make] of Object.entries(apps)) {
  describe(`concurrency rules on ${name}`, () => {
    let server: Server;
    let limiter: Limiter;
    let gates: Gate[];
    beforeEach(async () => {
      limiter = createLimiter({ rules: [...RULES] });
      gates = [];
      server = createServer(await make(limiter, () => gates[gates.push(gate()) - 1] as Gate));
      server.listen(0, '127.0.0.1');
      await once(server, 'listening');
    });
    afterEach(async () => {
      for (const g of gates) g.open();
      server.closeAllConnections();
      server.close();
      await limiter.close();
    });
    const held = async () => (await limiter.status('one', '127.0.0.1')).count;

    it('holds the slot while the handler works, frees it when the response ends', async () => {
      const first = get(server);
      await until('the handler started', () => gates.length === 1);
      await gates[0]?.entered;
      expect(await get(server).status).to.equal(429);
      gates[0]?.open();
      expect(await first.status).to.equal(200);
      await until('the slot is released', async () => (await held()) === 0);
      const again = get(server);
      await until('the next handler started', () => gates.length === 2);
      gates[1]?.open();
      expect(await again.status).to.equal(200);
    });

    it('a client that goes frees nothing while its handler works; the handler finishing frees it', async () => {
      const first = get(server);
      await until('the handler started', () => gates.length === 1);
      await gates[0]?.entered;
      first.abort();
      // The connection is gone; the handler is still working: the next request is refused.
      expect(await get(server).status).to.equal(429);
      expect(await held()).to.equal(1);
      gates[0]?.open();
      await until('the slot is released', async () => (await held()) === 0);
      const again = get(server);
      await until('the next handler started', () => gates.length === 2);
      gates[1]?.open();
      expect(await again.status).to.equal(200);
    });
  });
}

describe('concurrency rules in the headers', () => {
  it('the standard RateLimit-Policy names the unit, concurrent requests, and gives no window', async () => {
    const limiter = createLimiter({ rules: [...RULES] });
    const app = express();
    app.use(expressLimit(limiter, { headers: 'standard' }));
    app.get('/', (_req, res) => res.send('done'));
    const server = createServer(app).listen(0, '127.0.0.1');
    await once(server, 'listening');
    const { port } = server.address() as AddressInfo;
    const res = await fetch(`http://127.0.0.1:${port}/`);
    expect(res.headers.get('ratelimit-policy')).to.equal('"one";q=1;qu="concurrent-requests"');
    expect(res.headers.get('ratelimit')).to.equal('"one";r=0');
    await res.text();
    server.close();
    await limiter.close();
  });
});
