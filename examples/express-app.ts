// Example Express app: login throttling with device cookies, verification codes, an API limit. Run: npx tsx examples/express-app.ts
import type { AddressInfo } from 'node:net';
import { pathToFileURL } from 'node:url';
import express, { type Express, type NextFunction, type Request, type Response } from 'express';
import { rateLimit } from '../adapters/express.js';
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

export function createExpressApp(options: ExampleAppOptions = {}): ExampleApp<Express> {
  const store = options.store ?? new MemoryStore();
  const clock = options.clock ?? Date.now;
  const accounts = createAccounts(options.scryptCost);
  const timeZone = options.timeZone ?? 'Asia/Shanghai';
  const app = express();
  app.set('trust proxy', options.trustProxy ?? 0);
  app.use(express.json({ limit: '10kb' }));

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

  app.post('/login', limitLogin, async (req, res) => {
    const { username, password } = req.body ?? {};
    if (await accounts.verify(username, password)) {
      res.setHeader('Set-Cookie', devices.issue(normalizeIdentity(username)));
      res.json({ ok: true });
    } else res.status(401).json(LOGIN_FAILED); // unknown user or wrong password: the same answer
  });

  // Answers 200 either way, so it reports the outcome itself (the adapter would judge a 200 a success).
  app.post('/rpc/login', limitLogin, async (req, res) => {
    const { username, password } = req.body ?? {};
    const ok = await accounts.verify(username, password);
    if (req.rateLimit) await loginLimiter.report(req.rateLimit, ok ? 'success' : 'failure');
    if (ok) res.setHeader('Set-Cookie', devices.issue(normalizeIdentity(username)));
    res.json(ok ? { ok: true } : { ok: false, ...LOGIN_FAILED });
  });

  const sendCode =
    (field: 'phone' | 'email', valid: (value: unknown) => value is string) =>
    async (req: Request, res: Response, next: NextFunction) => {
      const raw: unknown = req.body?.[field];
      // Send to the form the rules count: '+86 138-0013-8000' is '+8613800138000'.
      const to = typeof raw === 'string' ? normalizeDestination(raw) : undefined;
      if (!valid(to)) return void res.status(400).json({ error: `${field} is missing or not valid` });
      try {
        await (options.sendCode ?? (() => {}))(to);
      } catch (error) {
        return next(Object.assign(new Error('could not send the code'), { status: 503, cause: error }));
      }
      res.json({ sent: true });
    };
  app.post('/sms/code', sendCode('phone', isPhone));
  app.post('/email/code', sendCode('email', isEmail));

  app.get('/api/items', (_req, res) => {
    res.json([{ id: 1, name: 'tea' }]);
  });

  app.use(
    (error: { status?: number; message?: string }, _req: Request, res: Response, _next: NextFunction) => {
      const status = error.status ?? 500;
      res.status(status).json({ error: status >= 500 ? 'internal error' : error.message });
    },
  );
  return { app, limiter, loginLimiter };
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  const port = Number(process.env.PORT ?? 3000);
  const server = createExpressApp().app.listen(port, () => {
    console.log(`express example on http://localhost:${(server.address() as AddressInfo).port}`);
  });
}
