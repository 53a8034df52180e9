// Example Fastify app: login throttling with device cookies, verification codes, an API limit. Run: npx tsx examples/fastify-app.ts
import { pathToFileURL } from 'node:url';
import Fastify, { type FastifyError, type FastifyInstance, type FastifyRequest } from 'fastify';
import { rateLimit } from '../adapters/fastify.js';
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

export function createFastifyApp(options: ExampleAppOptions = {}): ExampleApp<FastifyInstance> {
  const store = options.store ?? new MemoryStore();
  const clock = options.clock ?? Date.now;
  const accounts = createAccounts(options.scryptCost);
  const timeZone = options.timeZone ?? 'Asia/Shanghai';
  // trustProxy: the hops within the proxies are believed, the entries they appended; not the ones a client
  // sent. '/LOGIN' and '/login/' reach the login route, as in Express; the rules count them as '/login' too.
  const proxies = options.trustProxy ?? 0;
  const app = Fastify({
    trustProxy: proxies > 0 ? (_address: string, hop: number) => hop < proxies : false,
    bodyLimit: 10_240,
    routerOptions: { caseSensitive: false, ignoreTrailingSlash: true },
  });

  // Verification codes by SMS and by e-mail, and the API: one limiter, every rate-limit header, every route.
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
  void app.register(rateLimit, { limiter, headers: 'both', clock });

  // Login: the recipe's rules, on both login endpoints, registered in their own context with their own
  // options. No rate-limit headers here: an account's remaining count would tell anyone who asks when its
  // owner last logged in. A 429 has Retry-After.
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
  void app.register(async (login) => {
    await login.register(rateLimit, { limiter: loginLimiter, headers: false, clock });
    login.post('/login', async (request, reply) => {
      const { username, password } = credentials(request);
      if (!(await accounts.verify(username, password))) return reply.code(401).send(LOGIN_FAILED);
      reply.header('set-cookie', devices.issue(normalizeIdentity(username as string)));
      return { ok: true };
    });
    // Answers 200 either way, so it reports the outcome itself (the plugin would judge a 200 a success).
    login.post('/rpc/login', async (request, reply) => {
      const { username, password } = credentials(request);
      const ok = await accounts.verify(username, password);
      if (request.rateLimit) await loginLimiter.report(request.rateLimit, ok ? 'success' : 'failure');
      if (ok) reply.header('set-cookie', devices.issue(normalizeIdentity(username as string)));
      return ok ? { ok: true } : { ok: false, ...LOGIN_FAILED };
    });
  });

  const sendCode =
    (field: 'phone' | 'email', valid: (value: unknown) => value is string) =>
    async (request: FastifyRequest) => {
      const raw = (request.body as Record<string, unknown> | undefined)?.[field];
      // Send to the form the rules count: '+86 138-0013-8000' is '+8613800138000'.
      const to = typeof raw === 'string' ? normalizeDestination(raw) : undefined;
      if (!valid(to)) throw Object.assign(new Error(`${field} is missing or not valid`), { statusCode: 400 });
      try {
        await (options.sendCode ?? (() => {}))(to);
      } catch (error) {
        throw Object.assign(new Error('could not send the code', { cause: error }), { statusCode: 503 });
      }
      return { sent: true };
    };
  app.post('/sms/code', sendCode('phone', isPhone));
  app.post('/email/code', sendCode('email', isEmail));
  app.get('/api/items', async () => [{ id: 1, name: 'tea' }]);

  app.setErrorHandler((error: FastifyError, _request, reply) => {
    const status = error.statusCode ?? 500;
    reply.code(status).send({ error: status >= 500 ? 'internal error' : error.message });
  });
  return { app, limiter, loginLimiter };
}

function credentials(request: FastifyRequest): { username?: unknown; password?: unknown } {
  const body = request.body;
  return typeof body === 'object' && body !== null ? body : {};
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  const { app } = createFastifyApp();
  const address = await app.listen({ port: Number(process.env.PORT ?? 3000) });
  console.log(`fastify example on ${address}`);
}
