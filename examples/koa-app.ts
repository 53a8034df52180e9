// Example Koa app: login lockout, SMS-code limits and a general API limit. Run: npx tsx examples/koa-app.ts
import type { AddressInfo } from 'node:net';
import { pathToFileURL } from 'node:url';
import Router from '@koa/router';
import Koa, { type Context, type Next } from 'koa';
import { rateLimit } from '../adapters/koa.js';
import { createLimiter, type Limiter } from '../src/index.js';
import { checkPassword, type ExampleAppOptions, exampleRules, isPhone } from './rules.js';

export type { ExampleAppOptions } from './rules.js';

export function createKoaApp(options: ExampleAppOptions = {}): { app: Koa; limiter: Limiter } {
  const limiter = createLimiter(
    options.store ? { store: options.store, rules: exampleRules(options) } : { rules: exampleRules(options) },
  );
  const trustProxy = options.trustProxy ?? 0;
  // maxIpsCount = number of proxies: only the entries they appended are believed.
  const app = new Koa({ proxy: trustProxy > 0, maxIpsCount: trustProxy });
  app.use(errorHandler);
  app.use(jsonBody);
  // One middleware for every rule: each rule's `match` picks its routes.
  app.use(rateLimit(limiter, { headers: 'both', ...(options.clock ? { clock: options.clock } : {}) }));

  const router = new Router();
  router.post('/login', (ctx) => {
    const body = ctx.request.body as { username?: unknown; password?: unknown } | undefined;
    if (checkPassword(body?.username, body?.password)) ctx.body = { ok: true };
    else {
      ctx.status = 401;
      ctx.body = { error: 'invalid username or password' };
    }
  });
  router.post('/sms/code', async (ctx) => {
    const phone = (ctx.request.body as { phone?: unknown } | undefined)?.phone;
    if (!isPhone(phone)) return ctx.throw(400, 'phone must be an E.164 number such as +8613800138000');
    try {
      await (options.sendCode ?? (() => {}))(phone);
    } catch (error) {
      ctx.throw(503, 'could not send the code', { cause: error });
    }
    ctx.body = { sent: true };
  });
  router.get('/api/items', (ctx) => {
    ctx.body = [{ id: 1, name: 'tea' }];
  });
  app.use(router.routes()).use(router.allowedMethods());
  return { app, limiter };
}

declare module 'koa' {
  interface Request {
    body?: unknown;
  }
}

/** Errors as JSON; the status an error carries is kept (the rate limiter judges outcomes by it too). */
async function errorHandler(ctx: Context, next: Next): Promise<void> {
  try {
    await next();
  } catch (error) {
    const status = (error as { status?: number }).status ?? 500;
    ctx.status = status;
    ctx.body = { error: status >= 500 ? 'internal error' : (error as Error).message };
  }
}

/** A small JSON body reader (what `@koa/bodyparser` does): at most 10 kB, JSON objects only. */
async function jsonBody(ctx: Context, next: Next): Promise<void> {
  if (ctx.is('application/json')) {
    ctx.req.setEncoding('utf8');
    let text = '';
    for await (const chunk of ctx.req) {
      text += chunk;
      if (text.length > 10_240) ctx.throw(413, 'request body too large');
    }
    try {
      ctx.request.body = text === '' ? {} : JSON.parse(text);
    } catch {
      ctx.throw(400, 'request body is not valid JSON');
    }
  }
  await next();
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  const port = Number(process.env.PORT ?? 3000);
  const server = createKoaApp().app.listen(port, () => {
    console.log(`koa example on http://localhost:${(server.address() as AddressInfo).port}`);
  });
}
