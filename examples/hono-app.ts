// Example Hono app (on Node): login throttling with device cookies, verification codes, an API limit. Run: npx tsx examples/hono-app.ts
import { pathToFileURL } from 'node:url';
import { serve } from '@hono/node-server';
import { getConnInfo } from '@hono/node-server/conninfo';
import { type Context, Hono } from 'hono';
import { bodyLimit } from 'hono/body-limit';
import { HTTPException } from 'hono/http-exception';
import { getPathNoStrict } from 'hono/utils/url';
import { rateLimit } from '../adapters/hono.js';
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

export function createHonoApp(options: ExampleAppOptions = {}): ExampleApp<Hono> {
  const store = options.store ?? new MemoryStore();
  const clock = options.clock ?? Date.now;
  const accounts = createAccounts(options.scryptCost);
  const timeZone = options.timeZone ?? 'Asia/Shanghai';
  // '/LOGIN' and '/login/' reach the login route, as in Express; the rules count them as '/login' too.
  const app = new Hono({ getPath: (req) => getPathNoStrict(req).toLowerCase() });
  app.use(bodyLimit({ maxSize: 10_240 }));
  // The client is the Node socket's peer, or the entry the `trustProxy` proxies appended to X-Forwarded-For.
  const client = { getConnInfo, trustProxy: options.trustProxy ?? 0 };

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
  app.use(rateLimit(limiter, { ...client, headers: 'both', clock }));

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
  const limitLogin = rateLimit(loginLimiter, { ...client, headers: false, clock });

  app.post('/login', limitLogin, async (c) => {
    const { username, password } = await credentials(c);
    if (!(await accounts.verify(username, password))) return c.json(LOGIN_FAILED, 401); // one answer for both
    c.header('set-cookie', devices.issue(normalizeIdentity(username as string)));
    return c.json({ ok: true });
  });

  // Answers 200 either way, so it reports the outcome itself (the middleware would judge a 200 a success).
  app.post('/rpc/login', limitLogin, async (c) => {
    const { username, password } = await credentials(c);
    const ok = await accounts.verify(username, password);
    const decision = c.get('rateLimit');
    if (decision) await loginLimiter.report(decision, ok ? 'success' : 'failure');
    if (ok) c.header('set-cookie', devices.issue(normalizeIdentity(username as string)));
    return c.json(ok ? { ok: true } : { ok: false, ...LOGIN_FAILED });
  });

  const sendCode =
    (field: 'phone' | 'email', valid: (value: unknown) => value is string) => async (c: Context) => {
      const raw = (await body(c))[field];
      // Send to the form the rules count: '+86 138-0013-8000' is '+8613800138000'.
      const to = typeof raw === 'string' ? normalizeDestination(raw) : undefined;
      if (!valid(to)) throw new HTTPException(400, { message: `${field} is missing or not valid` });
      try {
        await (options.sendCode ?? (() => {}))(to);
      } catch (error) {
        throw new HTTPException(503, { message: 'could not send the code', cause: error });
      }
      return c.json({ sent: true });
    };
  app.post('/sms/code', sendCode('phone', isPhone));
  app.post('/email/code', sendCode('email', isEmail));
  app.get('/api/items', (c) => c.json([{ id: 1, name: 'tea' }]));

  app.onError((error, c) => {
    const status = error instanceof HTTPException ? error.status : 500;
    return c.json({ error: status >= 500 ? 'internal error' : error.message }, status);
  });
  return { app, limiter, loginLimiter };
}

/** The JSON body as an object (already parsed and cached by the rate limiter), or an empty one. */
async function body(c: Context): Promise<Record<string, unknown>> {
  const parsed: unknown = await c.req.json().catch(() => undefined);
  return typeof parsed === 'object' && parsed !== null ? (parsed as Record<string, unknown>) : {};
}

async function credentials(c: Context): Promise<{ username?: unknown; password?: unknown }> {
  return body(c);
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  const port = Number(process.env.PORT ?? 3000);
  serve({ fetch: createHonoApp().app.fetch, port }, (info) => {
    console.log(`hono example on http://localhost:${info.port}`);
  });
}
