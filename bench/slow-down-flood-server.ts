// The app of bench/slow-down-flood.ts, in a process of its own so that its RSS is the app's alone: one
// framework's slowDown (limit 10 per hour, 100 ms per request over the limit, every other option at its
// default) in front of GET /items. Answers the parent's 'stats' messages with what it holds and its memory.
import http, { type RequestListener } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import { getRequestListener } from '@hono/node-server';
import express from 'express';
import Fastify from 'fastify';
import { Hono } from 'hono';
import Koa from 'koa';
import { slowDown as expressSlowDown } from '../adapters/express.js';
import { slowDown as fastifySlowDown } from '../adapters/fastify.js';
import { slowDown as honoSlowDown } from '../adapters/hono.js';
import { slowDown as koaSlowDown } from '../adapters/koa.js';
import type { Rule } from '../src/index.js';

const rules: Rule[] = [{ name: 'flood', key: 'ip', limit: 10, window: { type: 'fixed', size: '1h' } }];
let held = 0;
let mostHeld = 0;
let longestMs = 0;
let peakRss = 0;
/** Counts a request from its wait of `ms` until its connection closes (each flood request has one of its own). */
const waiting = (ms: number, socket: Socket) => {
  longestMs = Math.max(longestMs, ms);
  held++;
  mostHeld = Math.max(mostHeld, held);
  if (held % 50 === 0) peakRss = Math.max(peakRss, process.memoryUsage().rss);
  socket.once('close', () => held--);
};

async function listener(framework: string): Promise<RequestListener> {
  if (framework === 'express') {
    const app = express();
    app.use(expressSlowDown(rules, { delay: 100, onDelayed: (ms, _d, req) => waiting(ms, req.socket) }));
    app.get('/items', (_req, res) => void res.json({ ok: true }));
    return app;
  }
  if (framework === 'koa') {
    const app = new Koa();
    app.use(koaSlowDown(rules, { delay: 100, onDelayed: (ms, _d, ctx) => waiting(ms, ctx.req.socket) }));
    app.use((ctx) => {
      ctx.body = { ok: true };
    });
    return app.callback();
  }
  if (framework === 'fastify') {
    const app = Fastify();
    await app.register(
      fastifySlowDown(rules, {
        delay: 100,
        onDelayed: (ms, _d, request) => waiting(ms, request.raw.socket),
      }),
    );
    app.get('/items', async () => ({ ok: true }));
    await app.ready();
    return (req, res) => app.server.emit('request', req, res);
  }
  const app = new Hono();
  app.use(
    honoSlowDown(rules, {
      delay: 100,
      onDelayed: (ms, _d, c) => waiting(ms, (c.env as { incoming: http.IncomingMessage }).incoming.socket),
    }),
  );
  app.get('/items', (c) => c.json({ ok: true }));
  return getRequestListener(app.fetch);
}

const server = http.createServer(await listener(process.argv[2] ?? 'express'));
await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
process.send?.({ port: (server.address() as AddressInfo).port });
process.on('message', (message: string) => {
  if (message === 'stats') {
    const rss = process.memoryUsage().rss;
    peakRss = Math.max(peakRss, rss);
    // What is still reachable: the held requests' sockets, timers and closures (--expose-gc).
    (globalThis as { gc?: () => void }).gc?.();
    process.send?.({ held, mostHeld, longestMs, rss, peakRss, heapUsed: process.memoryUsage().heapUsed });
  }
  if (message === 'exit') process.exit(0);
});
