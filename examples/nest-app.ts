// Example NestJS app (Express or Fastify platform): login throttling with device cookies, verification codes, an API
// limit. Run: npx tsx --tsconfig tsconfig.nest.json examples/nest-app.ts [fastify]
import { pathToFileURL } from 'node:url';
import {
  BadRequestException,
  Body,
  Controller,
  type DynamicModule,
  Get,
  HttpCode,
  type INestApplication,
  Inject,
  Injectable,
  Module,
  Post,
  Req,
  Res,
  ServiceUnavailableException,
  UnauthorizedException,
  UseGuards,
} from '@nestjs/common';
import { APP_GUARD, HttpAdapterHost, NestFactory } from '@nestjs/core';
import { ExpressAdapter, type NestExpressApplication } from '@nestjs/platform-express';
import { FastifyAdapter } from '@nestjs/platform-fastify';
import { RateLimitGuard } from '../adapters/nest.js';
import {
  createLimiter,
  type Decision,
  type Limiter,
  loginRules,
  MemoryStore,
  normalizeDestination,
  normalizeIdentity,
  verificationCodeRules,
} from '../src/index.js';
import { type DeviceCookies, deviceCookies } from './device-cookie.js';
import {
  type Accounts,
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
export type NestPlatform = 'express' | 'fastify';

/** What the controllers share, provided under EXAMPLE (tokens: the example works without decorator metadata). */
interface Services {
  accounts: Accounts;
  devices: DeviceCookies;
  loginLimiter: Limiter;
  sendCode: (destination: string) => void | Promise<void>;
}
const EXAMPLE = Symbol('example services');
const LIMITER = Symbol('limiter');
const LOGIN_LIMITER = Symbol('login limiter');
const CLOCK = Symbol('clock');

type Credentials = { username?: unknown; password?: unknown } | undefined;
type Request = { rateLimit?: Decision };

/**
 * Login: the recipe's rules, on both login endpoints. No rate-limit headers here: an account's remaining count
 * would tell anyone who asks when its owner last logged in. A 429 has Retry-After.
 */
@Injectable()
class LoginGuard extends RateLimitGuard {
  constructor(@Inject(LOGIN_LIMITER) limiter: Limiter, @Inject(CLOCK) clock: () => number) {
    super(limiter, { headers: false, clock });
  }
}

@Controller()
@UseGuards(LoginGuard)
class LoginController {
  constructor(
    @Inject(EXAMPLE) private readonly services: Services,
    @Inject(HttpAdapterHost) private readonly host: HttpAdapterHost,
  ) {}

  @Post('login')
  @HttpCode(200)
  async login(@Body() body: Credentials, @Res({ passthrough: true }) res: unknown) {
    const { username, password } = body ?? {};
    // Unknown user or wrong password: the same answer.
    if (!(await this.services.accounts.verify(username, password)))
      throw new UnauthorizedException(LOGIN_FAILED);
    this.#trustDevice(res, username as string);
    return { ok: true };
  }

  /** Answers 200 either way, so it reports the outcome itself (the guard would judge a 200 a success). */
  @Post('rpc/login')
  @HttpCode(200)
  async rpcLogin(@Body() body: Credentials, @Req() req: Request, @Res({ passthrough: true }) res: unknown) {
    const { username, password } = body ?? {};
    const ok = await this.services.accounts.verify(username, password);
    if (req.rateLimit) await this.services.loginLimiter.report(req.rateLimit, ok ? 'success' : 'failure');
    if (ok) this.#trustDevice(res, username as string);
    return ok ? { ok: true } : { ok: false, ...LOGIN_FAILED };
  }

  #trustDevice(res: unknown, username: string): void {
    this.host.httpAdapter.setHeader(
      res,
      'set-cookie',
      this.services.devices.issue(normalizeIdentity(username)),
    );
  }
}

@Controller()
class CodeController {
  constructor(@Inject(EXAMPLE) private readonly services: Services) {}

  @Post('sms/code')
  @HttpCode(200)
  sms(@Body() body: Record<string, unknown> | undefined) {
    return this.#send(body?.phone, 'phone', isPhone);
  }

  @Post('email/code')
  @HttpCode(200)
  email(@Body() body: Record<string, unknown> | undefined) {
    return this.#send(body?.email, 'email', isEmail);
  }

  async #send(raw: unknown, field: string, valid: (value: unknown) => value is string) {
    // Send to the form the rules count: '+86 138-0013-8000' is '+8613800138000'.
    const to = typeof raw === 'string' ? normalizeDestination(raw) : undefined;
    if (!valid(to)) throw new BadRequestException({ error: `${field} is missing or not valid` });
    try {
      await this.services.sendCode(to);
    } catch (error) {
      throw new ServiceUnavailableException({ error: 'could not send the code' }, { cause: error });
    }
    return { sent: true };
  }
}

@Controller('api')
class ApiController {
  @Get('items')
  items() {
    return [{ id: 1, name: 'tea' }];
  }
}

@Module({})
class ExampleModule {}

/** The app's module and its two limiters: `loginLimiter` for the login rules, `limiter` for the rest. */
export function nestExample(options: ExampleAppOptions = {}): ExampleApp<DynamicModule> {
  const store = options.store ?? new MemoryStore();
  const clock = options.clock ?? Date.now;
  const timeZone = options.timeZone ?? 'Asia/Shanghai';
  const devices = deviceCookies({ secret: options.deviceSecret, clock });
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
  const loginLimiter = createLimiter({
    ...options.limiterOptions,
    store,
    rules: loginRules({
      match: LOGIN_ROUTES,
      isTrustedDevice: devices.isTrusted,
      trustedDeviceSkipsCap: options.trustedDeviceSkipsCap,
    }),
  });
  const services: Services = {
    accounts: createAccounts(options.scryptCost),
    devices,
    loginLimiter,
    sendCode: options.sendCode ?? (() => {}),
  };
  const app: DynamicModule = {
    module: ExampleModule,
    controllers: [LoginController, CodeController, ApiController],
    providers: [
      { provide: EXAMPLE, useValue: services },
      { provide: LIMITER, useValue: limiter },
      { provide: LOGIN_LIMITER, useValue: loginLimiter },
      { provide: CLOCK, useValue: clock },
      {
        provide: APP_GUARD,
        useFactory: (shared: Limiter, now: () => number) =>
          new RateLimitGuard(shared, { headers: 'both', clock: now }),
        inject: [LIMITER, CLOCK],
      },
    ],
  };
  return { app, limiter, loginLimiter };
}

/**
 * The platform's HTTP adapter. Trusted proxies: the hops within them are believed, the entries they appended;
 * not the ones a client sent. '/LOGIN' and '/login/' reach the login route on both platforms.
 */
export function platformAdapter(platform: NestPlatform, options: ExampleAppOptions = {}) {
  const proxies = options.trustProxy ?? 0;
  if (platform === 'express') return new ExpressAdapter();
  return new FastifyAdapter({
    trustProxy: proxies > 0 ? (_address: string, hop: number) => hop < proxies : false,
    bodyLimit: 10_240,
    routerOptions: { caseSensitive: false, ignoreTrailingSlash: true },
  });
}

/** What the Express platform sets on the app itself: its proxies and a small JSON body limit. */
export function configureApp(app: INestApplication, platform: NestPlatform, options: ExampleAppOptions = {}) {
  if (platform !== 'express') return;
  const express = app as NestExpressApplication;
  express.set('trust proxy', options.trustProxy ?? 0);
  express.useBodyParser('json', { limit: '10kb' });
}

export async function createNestApp(
  options: ExampleAppOptions = {},
  platform: NestPlatform = 'express',
): Promise<ExampleApp<INestApplication>> {
  const { app: module, limiter, loginLimiter } = nestExample(options);
  const app = await NestFactory.create(module, platformAdapter(platform, options), { bodyParser: false });
  configureApp(app, platform, options);
  return { app, limiter, loginLimiter };
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  const platform: NestPlatform = process.argv[2] === 'fastify' ? 'fastify' : 'express';
  const { app } = await createNestApp({}, platform);
  await app.listen(Number(process.env.PORT ?? 3000));
  console.log(`nest example (${platform}) on ${await app.getUrl()}`);
}
