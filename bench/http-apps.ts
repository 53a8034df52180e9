// The HTTP apps under test: Express and Koa, bare and with each limiter in front of one tiny route; Fastify, Hono
// and Nest (bare and with ratekeeper) come from http-frameworks.ts.

import type { RequestListener } from 'node:http';
import { createRequire } from 'node:module';
import express, { type RequestHandler } from 'express';
import { rateLimit as expressRateLimit, MemoryStore } from 'express-rate-limit';
import Koa, { type Middleware } from 'koa';
import { type RedisReply, RedisStore } from 'rate-limit-redis';
import { RateLimiterMemory, RateLimiterRedis, RateLimiterRes } from 'rate-limiter-flexible';
import { closeRedis, namespace, openRedis } from './contender.js';
import { type MoreFramework, moreHttpVariants } from './http-frameworks.js';
import { loadRatekeeper, type RatekeeperLimiter } from './ratekeeper.js';

export type Framework = 'express' | 'koa' | MoreFramework;

/** How every app is configured: one rule keyed by a request header. */
export interface AppSpec {
  limit: number;
  windowMs: number;
  redisPort: number;
  /** The request header carrying the client identity. */
  keyHeader: string;
  prefix: string;
}

export interface BuiltApp {
  listener: RequestListener;
  /** The limiter's middleware alone (Express handler or Koa middleware), for bench/middleware.ts; none when bare. */
  middleware?: RequestHandler | Middleware;
  /** Fastify, Hono, Nest: one GET / through the whole app in process (no socket), for bench/middleware.ts. */
  inject?: (key: string) => Promise<number>;
  close(): Promise<void>;
}

export interface HttpVariant {
  name: string;
  group: 'bare' | 'peer' | 'ratekeeper';
  build(spec: AppSpec): Promise<BuiltApp>;
}

const require = createRequire(import.meta.url);
const koaRatelimit = require('koa-ratelimit') as (options: Record<string, unknown>) => Middleware;

const body = 'ok';

/** Errors become 500s (counted by the driver); only the first of each app is printed. */
function firstErrorLogger(): (error: unknown) => void {
  let logged = false;
  return (error) => {
    if (logged) return;
    logged = true;
    process.stderr.write(
      `  http app error (first of its app): ${error instanceof Error ? error.message : String(error)}\n`,
    );
  };
}

function expressApp(limiter?: RequestHandler) {
  const app = express();
  app.disable('x-powered-by');
  app.disable('etag');
  if (limiter) app.use(limiter);
  app.get('/', (_req, res) => {
    res.send(body);
  });
  const log = firstErrorLogger();
  app.use((error: unknown, _req: express.Request, res: express.Response, _next: express.NextFunction) => {
    log(error);
    res.status(500).end();
  });
  return app;
}

function koaApp(limiter?: Middleware) {
  const app = new Koa();
  app.silent = true;
  app.on('error', firstErrorLogger());
  if (limiter) app.use(limiter);
  app.use((ctx) => {
    ctx.body = body;
  });
  return app;
}

const noClose = async () => {};

function flexible(spec: AppSpec, store: 'redis' | 'memory') {
  const options = {
    points: spec.limit,
    duration: Math.max(1, Math.round(spec.windowMs / 1000)),
    keyPrefix: namespace(spec.prefix),
  };
  if (store === 'memory') return { limiter: new RateLimiterMemory(options), close: noClose };
  const client = openRedis(spec.redisPort);
  return {
    limiter: new RateLimiterRedis({ ...options, storeClient: client }),
    close: () => closeRedis(client),
  };
}

/** The README pattern of rate-limiter-flexible (it ships no middleware): consume, 429 on rejection. */
function flexibleExpress(store: 'redis' | 'memory'): HttpVariant {
  return {
    name: `express + rate-limiter-flexible (${store})`,
    group: 'peer',
    async build(spec) {
      const { limiter, close } = flexible(spec, store);
      const middleware: RequestHandler = (req, res, next) => {
        limiter.consume(req.get(spec.keyHeader) ?? 'anonymous').then(
          () => next(),
          (error: unknown) =>
            error instanceof RateLimiterRes ? res.status(429).send('Too Many Requests') : next(error),
        );
      };
      return { listener: expressApp(middleware), middleware, close };
    },
  };
}

function flexibleKoa(store: 'redis' | 'memory'): HttpVariant {
  return {
    name: `koa + rate-limiter-flexible (${store})`,
    group: 'peer',
    async build(spec) {
      const { limiter, close } = flexible(spec, store);
      const middleware: Middleware = async (ctx, next) => {
        try {
          await limiter.consume(ctx.get(spec.keyHeader) || 'anonymous');
        } catch (error) {
          if (!(error instanceof RateLimiterRes)) throw error;
          ctx.status = 429;
          ctx.body = 'Too Many Requests';
          return;
        }
        await next();
      };
      return { listener: koaApp(middleware).callback(), middleware, close };
    },
  };
}

function expressRateLimitVariant(store: 'redis' | 'memory'): HttpVariant {
  return {
    name:
      store === 'redis'
        ? 'express + express-rate-limit + rate-limit-redis'
        : 'express + express-rate-limit (memory)',
    group: 'peer',
    async build(spec) {
      const client = store === 'redis' ? openRedis(spec.redisPort) : undefined;
      const limiter = expressRateLimit({
        windowMs: spec.windowMs,
        limit: spec.limit,
        keyGenerator: (req) => req.get(spec.keyHeader) ?? 'anonymous',
        store: client
          ? new RedisStore({
              sendCommand: (command: string, ...args: string[]) =>
                client.call(command, ...args) as Promise<RedisReply>,
              prefix: spec.prefix,
            })
          : new MemoryStore(),
      });
      return {
        listener: expressApp(limiter),
        middleware: limiter,
        close: async () => (client ? closeRedis(client) : undefined),
      };
    },
  };
}

function koaRatelimitVariant(driver: 'redis' | 'memory'): HttpVariant {
  return {
    name: `koa + koa-ratelimit (${driver})`,
    group: 'peer',
    async build(spec) {
      const client = driver === 'redis' ? openRedis(spec.redisPort) : undefined;
      const limiter = koaRatelimit({
        driver,
        db: client ?? new Map(),
        duration: spec.windowMs,
        max: spec.limit,
        namespace: namespace(spec.prefix),
        id: (ctx: Koa.Context) => ctx.get(spec.keyHeader) || 'anonymous',
      });
      return {
        listener: koaApp(limiter).callback(),
        middleware: limiter,
        close: async () => (client ? closeRedis(client) : undefined),
      };
    },
  };
}

/** Our adapters' entry: `rateLimit(limiter, options?)`, typed here until src/ and adapters/ exist. */
interface AdapterModule<M> {
  rateLimit(limiter: RatekeeperLimiter, options?: Record<string, unknown>): M;
}

function importAdapter<M>(framework: Framework): Promise<AdapterModule<M>> {
  return import(new URL(`../adapters/${framework}.js`, import.meta.url).href) as Promise<AdapterModule<M>>;
}

function ratekeeperVariant(framework: Framework, store: 'redis' | 'memory'): HttpVariant {
  return {
    name: `${framework} + ratekeeper (${store})`,
    group: 'ratekeeper',
    async build(spec) {
      const rk = await loadRatekeeper();
      if (store === 'redis' && typeof rk.RedisStore !== 'function') {
        throw new Error('src/index.ts exports no RedisStore yet');
      }
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
      const close = async () => {
        await limiter.close();
        if (client) await closeRedis(client);
      };
      if (framework === 'express') {
        const { rateLimit } = await importAdapter<RequestHandler>('express');
        const middleware = rateLimit(limiter);
        return { listener: expressApp(middleware), middleware, close };
      }
      const { rateLimit } = await importAdapter<Middleware>('koa');
      const middleware = rateLimit(limiter);
      return { listener: koaApp(middleware).callback(), middleware, close };
    },
  };
}

/** The variants of one framework; the bare app first (the ratio denominator). */
export function httpVariants(framework: Framework): HttpVariant[] {
  if (framework !== 'express' && framework !== 'koa') return moreHttpVariants(framework);
  if (framework === 'express') {
    return [
      {
        name: 'express (bare)',
        group: 'bare',
        build: async () => ({ listener: expressApp(), close: noClose }),
      },
      expressRateLimitVariant('memory'),
      expressRateLimitVariant('redis'),
      flexibleExpress('memory'),
      flexibleExpress('redis'),
      // ADD NEW HTTP CONTENDERS HERE (ours follow):
      ratekeeperVariant('express', 'memory'),
      ratekeeperVariant('express', 'redis'),
    ];
  }
  return [
    {
      name: 'koa (bare)',
      group: 'bare',
      build: async () => ({ listener: koaApp().callback(), close: noClose }),
    },
    koaRatelimitVariant('memory'),
    koaRatelimitVariant('redis'),
    flexibleKoa('memory'),
    flexibleKoa('redis'),
    ratekeeperVariant('koa', 'memory'),
    ratekeeperVariant('koa', 'redis'),
  ];
}
