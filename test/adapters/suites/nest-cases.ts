// What only the Nest guard has: @RateLimit and @SkipRateLimit on controllers and handlers, the decorator's own
// guard, a denial through the app's exception filters that no interceptor sees, non-HTTP contexts, strict
// options; on Nest's own listening server.
import {
  type ArgumentsHost,
  type CallHandler,
  Catch,
  Controller,
  type ExceptionFilter,
  type ExecutionContext,
  Get,
  type INestApplication,
  Module,
  type NestInterceptor,
  UseGuards,
} from '@nestjs/common';
import { BaseExceptionFilter, NestFactory } from '@nestjs/core';
import { expect } from 'chai';
import { RateLimit, RateLimitException, RateLimitGuard, SkipRateLimit } from '../../../adapters/nest.js';
import { type NestPlatform, platformAdapter } from '../../../examples/nest-app.js';
import { createLimiter, RateLimitConfigError, RateLimitRequestError, type Rule } from '../../../src/index.js';

const rule = (name: string, limit: number): Rule => ({
  name,
  key: () => 'all',
  limit,
  window: { type: 'fixed', size: '1h' },
});
/** The decorators' limiters, module-wide as decorators are: each test starts them from zero. */
const limiters = {
  controller: createLimiter({ rules: [rule('controller', 1)] }),
  handler: createLimiter({ rules: [rule('handler', 3)] }),
  'open-handler': createLimiter({ rules: [rule('open-handler', 1)] }),
  'per-controller': createLimiter({ rules: [rule('per-controller', 2)] }),
};

@Controller('limited')
@RateLimit(limiters.controller)
class LimitedController {
  @Get('inherits')
  inherits() {
    return 'ok';
  }

  @Get('own')
  @RateLimit(limiters.handler)
  own() {
    return 'ok';
  }

  @Get('skipped')
  @SkipRateLimit()
  skipped() {
    return 'ok';
  }
}

@Controller('open')
@SkipRateLimit()
class OpenController {
  @Get('free')
  free() {
    return 'ok';
  }

  @Get('limited')
  @RateLimit(limiters['open-handler'])
  limited() {
    return 'ok';
  }
}

const perController = new RateLimitGuard(limiters['per-controller']);

@Controller('guarded')
@UseGuards(perController)
class GuardedController {
  @Get()
  get() {
    return 'ok';
  }
}

@Controller()
class PlainController {
  @Get('plain')
  plain() {
    return 'ok';
  }
}

@Module({ controllers: [LimitedController, OpenController, GuardedController, PlainController] })
class CasesModule {}

/** Counts what Nest ran after the guards: exception filters and interceptors. */
const seen = { filtered: 0, intercepted: 0 };

@Catch()
class CountingFilter extends BaseExceptionFilter implements ExceptionFilter {
  override catch(error: unknown, host: ArgumentsHost) {
    seen.filtered++;
    super.catch(error, host);
  }
}

class CountingInterceptor implements NestInterceptor {
  intercept(_context: ExecutionContext, next: CallHandler) {
    seen.intercepted++;
    return next.handle();
  }
}

export function nestCases(platform: NestPlatform): void {
  describe(`Nest (${platform}) guard and decorators, on Nest's own listening server`, () => {
    let app: INestApplication | undefined;
    afterEach(async () => {
      await app?.close();
      app = undefined;
      seen.filtered = 0;
      seen.intercepted = 0;
      for (const [name, limiter] of Object.entries(limiters)) await limiter.reset(name, 'all');
    });

    /** The cases module listening on a free port; `global`: a guard for every route. */
    async function boot(global?: RateLimitGuard) {
      app = await NestFactory.create(CasesModule, platformAdapter(platform), { logger: false });
      if (global) app.useGlobalGuards(global);
      app.useGlobalFilters(new CountingFilter(app.getHttpAdapter()));
      app.useGlobalInterceptors(new CountingInterceptor());
      await app.listen(0, '127.0.0.1');
      const url = await app.getUrl();
      return async (path: string, times = 1) => {
        const statuses: number[] = [];
        for (let i = 0; i < times; i++) statuses.push((await fetch(`${url}${path}`)).status);
        return statuses;
      };
    }

    it("limits by the controller's @RateLimit, a handler's own wins, @SkipRateLimit exempts a handler", async () => {
      const get = await boot();
      expect(await get('/limited/inherits', 2)).to.deep.equal([200, 429]);
      expect(await get('/limited/own', 4)).to.deep.equal([200, 200, 200, 429]);
      expect(await get('/limited/skipped', 3)).to.deep.equal([200, 200, 200]);
    });

    it("exempts a @SkipRateLimit controller's handlers, except one with its own @RateLimit", async () => {
      const get = await boot(new RateLimitGuard([rule('global', 1)]));
      expect(await get('/open/free', 3)).to.deep.equal([200, 200, 200]);
      expect(await get('/open/limited', 2)).to.deep.equal([200, 429]);
    });

    it("decides a route's own limiter once under a global guard too, with that guard's options", async () => {
      const global = new RateLimitGuard([rule('global', 100)], { headers: 'standard', statusCode: 503 });
      const get = await boot(global);
      const res = await fetch(`${await app?.getUrl()}/limited/own`);
      expect(res.headers.get('ratelimit-policy')).to.equal('"handler";q=3;w=3600');
      expect(res.headers.get('x-ratelimit-limit')).to.equal(null);
      expect(await get('/limited/own', 3)).to.deep.equal([200, 200, 503]);
      // The global guard's own rules for every other route.
      expect(await get('/plain', 2)).to.deep.equal([200, 200]);
    });

    it('limits a controller guarded by @UseGuards(new RateLimitGuard(rules)), and no other', async () => {
      const get = await boot();
      expect(await get('/guarded', 3)).to.deep.equal([200, 200, 429]);
      expect(await get('/plain', 3)).to.deep.equal([200, 200, 200]);
    });

    it("denies through the app's exception filters, Nest's { statusCode, message } with the headers; no interceptor or handler runs", async () => {
      const get = await boot(new RateLimitGuard([rule('global', 1)]));
      expect(await get('/plain', 1)).to.deep.equal([200]);
      const res = await fetch(`${await app?.getUrl()}/plain`);
      expect(res.status).to.equal(429);
      expect(await res.json()).to.deep.equal({ statusCode: 429, message: 'Too Many Requests' });
      expect([res.headers.get('x-ratelimit-remaining'), res.headers.get('retry-after')]).to.deep.equal([
        '0',
        '3600',
      ]);
      expect(seen).to.deep.equal({ filtered: 1, intercepted: 1 });
    });

    it('lets a global filter catch the denial as a RateLimitException carrying the decision', async () => {
      @Catch(RateLimitException)
      class TooMany implements ExceptionFilter {
        catch(error: RateLimitException, host: ArgumentsHost) {
          const adapter = app?.getHttpAdapter();
          const body = { limited: error.decision.rule, status: error.getStatus() };
          adapter?.reply(host.switchToHttp().getResponse(), body, 503);
        }
      }
      app = await NestFactory.create(CasesModule, platformAdapter(platform), { logger: false });
      app.useGlobalGuards(new RateLimitGuard([rule('global', 1)], { message: 'Slow down' }));
      app.useGlobalFilters(new TooMany());
      await app.listen(0, '127.0.0.1');
      const url = await app.getUrl();
      expect((await fetch(`${url}/plain`)).status).to.equal(200);
      const res = await fetch(`${url}/plain`);
      expect([res.status, await res.json()]).to.deep.equal([503, { limited: 'global', status: 429 }]);
      expect(res.headers.get('retry-after')).to.equal('3600');
    });

    it('sends a string message as Nest does, and an object message as the whole body', async () => {
      const get = async (message: unknown) => {
        await app?.close();
        app = await NestFactory.create(CasesModule, platformAdapter(platform), { logger: false });
        app.useGlobalGuards(new RateLimitGuard([rule(`m${typeof message}`, 1)], { message }));
        await app.listen(0, '127.0.0.1');
        const url = await app.getUrl();
        await fetch(`${url}/plain`);
        const res = await fetch(`${url}/plain`);
        return [res.status, await res.json()];
      };
      expect(await get('Slow down')).to.deep.equal([429, { statusCode: 429, message: 'Slow down' }]);
      expect(await get({ code: 'RATE_LIMITED' })).to.deep.equal([429, { code: 'RATE_LIMITED' }]);
    });
  });
}

export function nestUnits(): void {
  describe('Nest guard and decorators: arguments and contexts', () => {
    it('refuses an unknown option with a did-you-mean, and a bad status code', () => {
      const rules: Rule[] = [{ name: 'r', key: 'ip', limit: 1, window: { type: 'fixed', size: '1m' } }];
      expect(() => new RateLimitGuard(rules, { header: 'both' } as never))
        .to.throw(RateLimitConfigError, /header.*did you mean 'headers'/)
        .with.property('code', 'ERR_UNKNOWN_FIELD');
      expect(() => new RateLimitGuard(rules, { statusCode: 200 }))
        .to.throw(RateLimitConfigError, /statusCode must be an integer from 400 to 599, got 200/)
        .with.property('code', 'ERR_OPTION');
    });

    it('refuses @RateLimit of something not rules nor a limiter, and bad rules when it decorates', () => {
      expect(() => RateLimit('login' as never))
        .to.throw(RateLimitConfigError, /@RateLimit: expects an array of rules or a limiter/)
        .with.property('code', 'ERR_OPTION');
      expect(() =>
        RateLimit([{ name: 'x', key: 'ip', limit: 0, window: { type: 'fixed', size: '1m' } }]),
      ).to.throw(RateLimitConfigError, /rule "x": limit/);
    });

    it('refuses a context it cannot key (a microservice message) with ERR_CONTEXT, without asking the limiter', async () => {
      const limiter = createLimiter({ rules: [rule('all', 1)] });
      let checks = 0;
      const check = limiter.check.bind(limiter);
      limiter.check = (req) => {
        checks++;
        return check(req);
      };
      const guard = new RateLimitGuard(limiter);
      const rpc = {
        getType: () => 'rpc',
        getHandler: () => () => undefined,
        getClass: () => class {},
      } as unknown as ExecutionContext;
      for (let i = 0; i < 2; i++) {
        const error = await guard.canActivate(rpc).then(
          () => undefined,
          (e: unknown) => e,
        );
        expect(error).to.be.instanceOf(RateLimitRequestError);
        expect((error as RateLimitRequestError).code).to.equal('ERR_CONTEXT');
        expect((error as Error).message).to.match(/cannot limit a 'rpc' context/);
      }
      expect(checks).to.equal(0);
      await limiter.close();
    });
  });
}
