// The bypass and wiring suites' apps on NestJS (Express platform). Nest parses the body and runs every middleware
// before any guard, and routes the URL before that: no rewrite or method override can come after the limiter. Its
// wirings: no body parser at all ('body-after': the app made with bodyParser: false), and a client gone.
import type { RequestListener } from 'node:http';
import {
  Body,
  Controller,
  Delete,
  Get,
  HttpCode,
  HttpException,
  type INestApplication,
  Post,
  Req,
  Res,
} from '@nestjs/common';
import type { NestExpressApplication } from '@nestjs/platform-express';
import { RateLimit, RateLimitGuard } from '../../../adapters/nest.js';
import { configureApp, type NestPlatform, nestExample } from '../../../examples/nest-app.js';
import { type Decision, type Limiter, normalizeIdentity } from '../../../src/index.js';
import { type BypassFramework, held } from '../../fixtures/bypass-apps.js';
import { testingApp } from './nest-harness.js';

const ok = { ok: true };

@Controller()
class WiredController {
  @Post('sms')
  @HttpCode(200)
  sms() {
    held.handled++;
    return ok;
  }

  @Get('api/items')
  items() {
    return ok;
  }

  @Delete('items/:id')
  remove() {
    return ok;
  }

  @Post('login')
  login(@Body() body: { username?: unknown } | undefined) {
    const name = body?.username;
    throw new HttpException({ user: typeof name === 'string' ? normalizeIdentity(name).length : 0 }, 401);
  }
}

function redirectController(limiter: Limiter, reports: boolean) {
  @Controller()
  class RedirectController {
    /** As Passport's failureRedirect and successRedirect answer. */
    @Post('login')
    async login(
      @Body() body: { password?: unknown } | undefined,
      @Req() req: { rateLimit?: Decision },
      @Res() res: { redirect(url: string): void },
    ) {
      const good = body?.password === 'correct-horse';
      if (reports && req.rateLimit) await limiter.report(req.rateLimit, good ? 'success' : 'failure');
      res.redirect(good ? '/' : '/login?failed');
    }
  }
  return RedirectController;
}

function prefixedController(limiter: Limiter) {
  @Controller()
  class PrefixedController {
    @Post('login')
    @RateLimit(limiter)
    login() {
      throw new HttpException({ ok: false }, 401);
    }
  }
  return PrefixedController;
}

/** POST /api/login through `setGlobalPrefix('api')`, the route limited by its own `@RateLimit(limiter)`. */
export function nestPrefixed(platform: NestPlatform, limiter: Limiter): RequestListener {
  return testingApp(platform, { controllers: [prefixedController(limiter)] }, (nest) => {
    nest.setGlobalPrefix('api');
    if (platform === 'express') (nest as NestExpressApplication).useBodyParser('json');
  }).listener;
}

/** A Nest app on the Express platform with the given controller, limited by a global guard. */
function app(
  controller: new (...args: never[]) => unknown,
  configure: (app: NestExpressApplication) => void,
): RequestListener {
  return testingApp('express', { controllers: [controller] }, (nest: INestApplication) =>
    configure(nest as NestExpressApplication),
  ).listener;
}

export const nestApps: BypassFramework = {
  name: 'Nest (express)',
  wirings: ['body-after', 'gone'],
  example(options) {
    const { app: module, limiter, loginLimiter } = nestExample(options);
    const listener = testingApp('express', module, (nest) => configureApp(nest, 'express', options)).listener;
    return { listener, limiter, loginLimiter };
  },
  redirectLogin(limiter, reports) {
    return app(redirectController(limiter, reports), (nest) => {
      nest.useBodyParser('urlencoded', { extended: false });
      nest.useGlobalGuards(new RateLimitGuard(limiter, { headers: false }));
    });
  },
  routePrefixed: (limiter) => nestPrefixed('express', limiter),
  wired(wiring, limiter) {
    if (wiring === 'mounted' || wiring === 'rewritten' || wiring === 'override')
      throw new Error(`Nest has no '${wiring}' wiring`);
    return app(WiredController, (nest) => {
      if (wiring !== 'body-after') nest.useBodyParser('json', { limit: 1 << 20 });
      if (wiring === 'gone')
        nest.use(
          (
            req: { socket: { destroy(): void }; headers: Record<string, unknown> },
            _res: unknown,
            next: () => void,
          ) => {
            held.socket = req.socket;
            if (req.headers['x-reset'] === 'before') req.socket.destroy();
            next();
          },
        );
      nest.useGlobalGuards(new RateLimitGuard(limiter));
    });
  },
};
