// Concurrency rules through the real frameworks: a slot is held while the handler works, also after its client
// went (an attacker opening and aborting requests never gets more handlers than the limit), and freed when the
// handler is done.
import { once } from 'node:events';
import { createServer } from 'node:http';
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
import { createLimiter } from '../../src/index.js';
import { type ConcurrencyApp, concurrencySuite, ONE } from '../adapters/suites/concurrency-suite.js';

/** Each framework's app: the limiter's middleware, then a GET / that works, then answers "done". */
const apps: Record<string, ConcurrencyApp> = {
  express: async (limiter, work) => {
    const app = express();
    app.use(expressLimit(limiter));
    app.get('/', async (_req, res) => {
      await work();
      res.send('done');
    });
    return app;
  },
  koa: async (limiter, work) => {
    const app = new Koa();
    app.use(koaLimit(limiter));
    app.use(async (ctx) => {
      await work();
      ctx.body = 'done';
    });
    return app.callback();
  },
  fastify: async (limiter, work) => {
    const app = Fastify();
    await app.register(fastifyLimit, { limiter });
    app.get('/', async () => {
      await work();
      return 'done';
    });
    await app.ready();
    return (req, res) => app.routing(req, res);
  },
  hono: async (limiter, work) => {
    const app = new Hono();
    app.use(honoLimit(limiter));
    app.get('/', async (c) => {
      await work();
      return c.text('done');
    });
    return getRequestListener(app.fetch);
  },
};

for (const [name, make] of Object.entries(apps)) concurrencySuite(`concurrency rules on ${name}`, make);

describe('concurrency rules in the headers', () => {
  it('the standard RateLimit-Policy names the unit, concurrent requests, and gives no window', async () => {
    const limiter = createLimiter({ rules: [ONE] });
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
