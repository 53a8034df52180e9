// The HTTP suite and the example app on Koa.
import Router from '@koa/router';
import Koa from 'koa';
import { type KoaRateLimitOptions, rateLimit } from '../../adapters/koa.js';
import { createKoaApp } from '../../examples/koa-app.js';
import { memoryStores, redisStores } from '../support/stores.js';
import { exampleSuite, type Harness, httpSuite, type SuiteOptions } from './suites/http-suite.js';
import { planSuite } from './suites/plans-suite.js';

function koaOptions(o: SuiteOptions = {}): KoaRateLimitOptions {
  const { onLimited, skip, customHandler, ...rest } = o;
  const out: KoaRateLimitOptions = { ...rest };
  if (onLimited) out.onLimited = (decision) => onLimited(decision);
  if (skip) out.skip = (ctx) => skip(ctx.headers);
  if (customHandler) {
    out.handler = (ctx, decision) => {
      ctx.status = 418;
      ctx.body = { custom: true, rule: decision.rule };
    };
  }
  return out;
}

export const koaHarness: Harness = {
  name: 'Koa',
  build(spec) {
    let hits = 0;
    const app = new Koa({
      proxy: spec.trust === 'one-hop' || spec.trust === 'all',
      maxIpsCount: spec.trust === 'one-hop' ? 1 : 0,
    });
    app.use(async (ctx, next) => {
      try {
        await next();
      } catch (error) {
        const err = error as Error & { status?: number; code?: string };
        ctx.status = err.status ?? 500;
        ctx.body = { error: err.message, code: err.code };
      }
    });
    app.use(async (ctx, next) => {
      if (ctx.is('application/json')) {
        ctx.req.setEncoding('utf8');
        let text = '';
        for await (const chunk of ctx.req) text += chunk;
        (ctx.request as { body?: unknown }).body = JSON.parse(text);
      }
      await next();
    });
    // Authentication ahead of the limiter: `x-user: <id>` becomes ctx.state.user (the 'user' key form).
    app.use(async (ctx, next) => {
      const id = ctx.get('x-user');
      if (id !== '') ctx.state.user = { id };
      await next();
    });
    const limit = rateLimit(spec.limiter, koaOptions(spec.options));
    if (spec.mount !== 'route') app.use(limit);
    app.use(async (_ctx, next) => {
      hits++;
      await next();
    });
    const router = new Router();
    router.post('/login', (ctx) => {
      ctx.status = (ctx.request as { body?: { password?: string } }).body?.password === 'right' ? 200 : 401;
      ctx.body = {};
    });
    if (spec.mount === 'route') router.post('/users/:id/like', limit);
    router.post('/users/:id/like', (ctx) => {
      ctx.body = { liked: true };
    });
    router.get('/echo', (ctx) => {
      ctx.body = { rateLimit: ctx.state.rateLimit };
    });
    router.get('/status/:code', (ctx) => {
      ctx.status = Number(ctx.params.code);
      ctx.body = {};
    });
    router.get('/throw/:code', (ctx) => {
      throw Object.assign(new Error('thrown'), { status: Number(ctx.params.code) });
    });
    app.use(router.routes());
    return { listener: app.callback(), hits: () => hits };
  },
  example(options) {
    const { app, limiter } = createKoaApp(options);
    return { listener: app.callback(), limiter };
  },
};

for (const stores of [memoryStores, redisStores]) {
  httpSuite(koaHarness, stores);
  exampleSuite(koaHarness, stores);
  planSuite(koaHarness, stores);
}
