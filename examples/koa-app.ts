// Example Koa app: login throttling with device cookies, verification codes, an API limit. Run: npx tsx examples/koa-app.ts
import type { AddressInfo } from 'node:net';
import { pathToFileURL } from 'node:url';
import Router from '@koa/router';
import Koa, { type Context, type Next } from 'koa';
import { rateLimit } from '../adapters/koa.js';
import {
  createLimiter,
  loginRules,
  MemoryStore,
  normalizeDestination,
  normalizeIdentity,
  verificationCodeRules,
} from '../src/index.js';
import { deviceCookies } from './device-cookie.js';
import {
  apiRules,
  createAccounts,
  type ExampleApp,
  type ExampleAppOptions,
  isEmail,
  isPhone,
  LOGIN_FAILED,
  LOGIN_ROUTES,
} from './rules.js';

export type { ExampleApp, ExampleAppOptions } from './rules.js';

export function createKoaApp(options: ExampleAppOptions = {}): ExampleApp<Koa> {
  const store = options.store ?? new MemoryStore();
  const clock = options.clock ?? Date.now;
  const accounts = createAccounts(options.scryptCost);
  const timeZone = options.timeZone ?? 'Asia/Shanghai';
  const trustProxy = options.trustProxy ?? 0;
  // maxIpsCount = number of proxies: only the entries they appended are believed.
  const app = new Koa({ proxy: trustProxy > 0, maxIpsCount: trustProxy });
  app.use(errorHandler);
  app.use(jsonBody);
  const router = new Router();

  // Verification codes by SMS and by e-mail, and the API: one limiter, every rate-limit header.
  const limiter = createLimiter({
    ...options.limiterOptions,
    store,
    rules: [
      ...verificationCodeRules({ prefix: 'sms', match: 'POST /sms/code', timeZone }),
      ...verificationCodeRules({
        prefix: 'email',
        match: 'POST /email/code',
        destination: 'body.email',
        timeZone,
      }),
      ...apiRules(options.apiPerMinute),
    ],
  });
  app.use(rateLimit(limiter, { headers: 'both', clock }));

  // Login: the recipe's rules, on both login endpoints. No rate-limit headers here: an account's
  // remaining count would tell anyone who asks when its owner last logged in. A 429 has Retry-After.
  const devices = deviceCookies({ secret: options.deviceSecret, clock });
  const loginLimiter = createLimiter({
    ...options.limiterOptions,
    store,
    rules: loginRules({
      match: LOGIN_ROUTES,
      isTrustedDevice: devices.isTrusted,
      trustedDeviceSkipsCap: options.trustedDeviceSkipsCap,
    }),
  });
  // An account held at the cap reopens when the password-reset flow (or an operator) calls
  // loginLimiter.reset('login-account-cap', userKey(normalizeIdentity(username))).
  const limitLogin = rateLimit(loginLimiter, { headers: false, clock });

  router.post('/login', limitLogin, async (ctx) => {
    const { username, password } = (ctx.request.body ?? {}) as Credentials;
    if (await accounts.verify(username, password)) {
      ctx.set('Set-Cookie', devices.issue(normalizeIdentity(username as string)));
      ctx.body = { ok: true };
    } else {
      ctx.status = 401; // unknown user or wrong password: the same answer
      ctx.body = LOGIN_FAILED;
    }
  });

  // Answers 200 either way, so it reports the outcome itself (the adapter would judge a 200 a success).
  router.post('/rpc/login', limitLogin, async (ctx) => {
    const { username, password } = (ctx.request.body ?? {}) as Credentials;
    const ok = await accounts.verify(username, password);
    if (ctx.state.rateLimit) await loginLimiter.report(ctx.state.rateLimit, ok ? 'success' : 'failure');
    if (ok) ctx.set('Set-Cookie', devices.issue(normalizeIdentity(username as string)));
    ctx.body = ok ? { ok: true } : { ok: false, ...LOGIN_FAILED };
  });

  const sendCode =
    (field: 'phone' | 'email', valid: (value: unknown) => value is string) => async (ctx: Context) => {
      const raw = (ctx.request.body as Record<string, unknown> | undefined)?.[field];
      // Send to the form the rules count: '+86 138-0013-8000' is '+8613800138000'.
      const to = typeof raw === 'string' ? normalizeDestination(raw) : undefined;
      if (!valid(to)) return ctx.throw(400, `${field} is missing or not valid`);
      try {
        await (options.sendCode ?? (() => {}))(to);
      } catch (error) {
        ctx.throw(503, 'could not send the code', { cause: error });
      }
      ctx.body = { sent: true };
    };
  router.post('/sms/code', sendCode('phone', isPhone));
  router.post('/email/code', sendCode('email', isEmail));
  router.get('/api/items', (ctx) => {
    ctx.body = [{ id: 1, name: 'tea' }];
  });
  app.use(router.routes()).use(router.allowedMethods());
  return { app, limiter, loginLimiter };
}

interface Credentials {
  username?: unknown;
  password?: unknown;
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

/** A small JSON body reader (what `@koa/bodyparser` does): at most 10 kB. */
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
