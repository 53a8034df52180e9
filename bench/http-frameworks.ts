// The HTTP apps of Fastify, Hono and NestJS (Express platform), bare and with ratekeeper in front of one tiny route,
// each also answering requests in process (no socket) for bench/middleware.ts.

import { IncomingMessage, type RequestListener, ServerResponse } from 'node:http';
import { Socket } from 'node:net';
import fastifyPeerRateLimit from '@fastify/rate-limit';
import { getRequestListener } from '@hono/node-server';
import { Controller, Get, Module } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { ExpressAdapter } from '@nestjs/platform-express';
import Fastify from 'fastify';
import { Hono } from 'hono';
import { rateLimit as fastifyRateLimit } from '../adapters/fastify.js';
import { rateLimit as honoRateLimit } from '../adapters/hono.js';
import { RateLimitGuard } from '../adapters/nest.js';
import type { Limiter } from '../src/index.js';
import { closeRedis, namespace, openRedis } from './contender.js';
import type { AppSpec, BuiltApp, HttpVariant } from './http-apps.js';
import { loadRatekeeper } from './ratekeeper.js';

export type MoreFramework = 'fastify' | 'hono' | 'nest';

const body = 'ok';

/** One GET / answering "ok"; with a limiter, ratekeeper's plugin, middleware or global guard in front. */
const apps: Record<MoreFramework, (limiter: Limiter | undefined, keyHeader: string) => Promise<BuiltApp>> = {
  async fastify(limiter, keyHeader) {
    const app = Fastify();
    if (limiter) await app.register(fastifyRateLimit, { limiter });
    app.get('/', async () => body);
    await app.ready();
    return {
      listener: (req, res) => app.routing(req, res),
      inject: async (key) =>
        (await app.inject({ method: 'GET', url: '/', headers: { [keyHeader]: key } })).statusCode,
      close: () => app.close(),
    };
  },
  async hono(limiter, keyHeader) {
    const app = new Hono();
    if (limiter) app.use(honoRateLimit(limiter));
    app.get('/', (c) => c.text(body));
    return {
      listener: getRequestListener(app.fetch),
      inject: async (key) => (await app.request('/', { headers: { [keyHeader]: key } })).status,
      close: async () => {},
    };
  },
  async nest(limiter, keyHeader) {
    const app = await NestFactory.create(BenchModule, new ExpressAdapter(), { logger: false });
    const express = app.getHttpAdapter().getInstance() as RequestListener & { disable(name: string): void };
    express.disable('x-powered-by');
    express.disable('etag');
    if (limiter) app.useGlobalGuards(new RateLimitGuard(limiter));
    await app.init();
    return { listener: express, inject: inProcess(express, keyHeader), close: () => app.close() };
  },
};

// Nest's controller and module, decorated by hand: the benchmark compiles with standard decorators.
class BenchController {
  get() {
    return body;
  }
}
Reflect.decorate(
  [Get()],
  BenchController.prototype,
  'get',
  Object.getOwnPropertyDescriptor(BenchController.prototype, 'get'),
);
Reflect.decorate([Controller()], BenchController);
class BenchModule {}
Reflect.decorate([Module({ controllers: [BenchController] })], BenchModule);

/** A Node request listener called on a request built in memory; resolves with the status it ends with. */
export function inProcess(listener: RequestListener, keyHeader: string): (key: string) => Promise<number> {
  const socket = new Socket();
  Object.defineProperty(socket, 'remoteAddress', { value: '127.0.0.1' });
  return (key) =>
    new Promise<number>((resolve) => {
      const req = new IncomingMessage(socket);
      req.method = 'GET';
      req.url = '/';
      req.headers = { host: '127.0.0.1', [keyHeader]: key };
      const res = new ServerResponse(req);
      res.end = (() => {
        resolve(res.statusCode);
        return res;
      }) as ServerResponse['end'];
      listener(req, res);
    });
}

function bare(framework: MoreFramework): HttpVariant {
  return {
    name: `${framework} (bare)`,
    group: 'bare',
    build: (spec) => apps[framework](undefined, spec.keyHeader),
  };
}

function ratekeeper(framework: MoreFramework, store: 'memory' | 'redis'): HttpVariant {
  return {
    name: `${framework} + ratekeeper (${store})`,
    group: 'ratekeeper',
    async build(spec: AppSpec) {
      const rk = await loadRatekeeper();
      const client = store === 'redis' ? openRedis(spec.redisPort) : undefined;
      const limiter = rk.createLimiter({
        store: client ? new rk.RedisStore({ client, prefix: namespace(spec.prefix) }) : new rk.MemoryStore(),
        rules: [
          {
            name: 'api',
            key: `header:${spec.keyHeader}`,
            limit: spec.limit,
            window: { type: 'fixed', size: spec.windowMs },
          },
        ],
      });
      const app = await apps[framework](limiter as unknown as Limiter, spec.keyHeader);
      return {
        ...app,
        close: async () => {
          await app.close();
          await limiter.close();
          if (client) await closeRedis(client);
        },
      };
    },
  };
}

/** Fastify's own limiter, @fastify/rate-limit, keyed by the same header (its Redis store: ioredis). */
function fastifyPeer(store: 'memory' | 'redis'): HttpVariant {
  return {
    name: `fastify + @fastify/rate-limit (${store})`,
    group: 'peer',
    async build(spec: AppSpec) {
      const client = store === 'redis' ? openRedis(spec.redisPort) : undefined;
      const app = Fastify();
      await app.register(fastifyPeerRateLimit, {
        max: spec.limit,
        timeWindow: spec.windowMs,
        keyGenerator: (req) => String(req.headers[spec.keyHeader]),
        ...(client && { redis: client, nameSpace: namespace(spec.prefix) }),
      });
      app.get('/', async () => body);
      await app.ready();
      return {
        listener: (req, res) => app.routing(req, res),
        inject: async (key) =>
          (await app.inject({ method: 'GET', url: '/', headers: { [spec.keyHeader]: key } })).statusCode,
        close: async () => {
          await app.close();
          if (client) await closeRedis(client);
        },
      };
    },
  };
}

/** The variants of Fastify, Hono or Nest; the bare app first (the ratio denominator). */
export function moreHttpVariants(framework: MoreFramework): HttpVariant[] {
  const peers = framework === 'fastify' ? [fastifyPeer('memory'), fastifyPeer('redis')] : [];
  return [bare(framework), ...peers, ratekeeper(framework, 'memory'), ratekeeper(framework, 'redis')];
}
