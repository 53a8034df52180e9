// The shared suites' app on NestJS, Express or Fastify platform, built with @nestjs/testing; each app a request
// listener for supertest or a listening server.
import type { RequestListener } from 'node:http';
import {
  type ArgumentsHost,
  applyDecorators,
  Body,
  type CanActivate,
  Catch,
  Controller,
  type DynamicModule,
  type ExceptionFilter,
  type ExecutionContext,
  Get,
  HttpCode,
  HttpException,
  type INestApplication,
  Param,
  Post,
  Req,
  UseGuards,
} from '@nestjs/common';
import type { AbstractHttpAdapter } from '@nestjs/core';
import type { NestExpressApplication } from '@nestjs/platform-express';
import { FastifyAdapter } from '@nestjs/platform-fastify';
import { Test } from '@nestjs/testing';
import { type NestRateLimitOptions, RateLimitGuard } from '../../../adapters/nest.js';
import { configureApp, type NestPlatform, nestExample, platformAdapter } from '../../../examples/nest-app.js';
import type { ExampleAppOptions } from '../../../examples/rules.js';
import type { Framework } from './attacks/context.js';
import type { AppSpec, Harness, SuiteOptions } from './http-suite.js';

function nestOptions(o: SuiteOptions = {}): NestRateLimitOptions {
  const { onLimited, skip, customHandler, ...rest } = o;
  const out: NestRateLimitOptions = { ...rest };
  if (onLimited) out.onLimited = (decision) => onLimited(decision);
  if (skip) out.skip = (context) => skip(context.switchToHttp().getRequest<{ headers: never }>().headers);
  // Through the app's exception filter, as a Nest app customizes its errors.
  if (customHandler)
    out.handler = (_context, decision) => {
      throw new HttpException({ custom: true, rule: decision.rule }, 418);
    };
  return out;
}

/** Nest's convention for an HTTP error, which the guard's denial follows (through the app's exception filters). */
const NEST_DENIAL = (_retryAfterSeconds: number, statusCode = 429, message = 'Too Many Requests') => ({
  statusCode,
  message,
});

/** Authentication ahead of the limiter: `x-user: <id>` becomes `request.user` (the 'user' key form). */
class UserFromHeader implements CanActivate {
  canActivate(context: ExecutionContext): boolean {
    const req = context.switchToHttp().getRequest<{ headers: Record<string, unknown>; user?: unknown }>();
    const id = req.headers['x-user'];
    if (typeof id === 'string') req.user = { id };
    return true;
  }
}

/** Errors end as JSON `{ error, code }` with the error's `status` (else 500); HTTP exceptions as Nest sends them. */
@Catch()
class SuiteErrors implements ExceptionFilter {
  constructor(private readonly adapter: AbstractHttpAdapter) {}
  catch(error: unknown, host: ArgumentsHost): void {
    const res = host.switchToHttp().getResponse();
    if (error instanceof HttpException)
      return void this.adapter.reply(res, error.getResponse(), error.getStatus());
    const { message, status, code } = error as Error & { status?: number; code?: string };
    this.adapter.reply(res, { error: message, code }, status ?? 500);
  }
}

function suiteController(spec: AppSpec, count: () => void) {
  const onRoute = spec.mount === 'route' ? UseGuards(suiteGuard(spec)) : applyDecorators();

  @Controller()
  class SuiteController {
    @Post('login')
    @HttpCode(200)
    login(@Body() body: { password?: string } | undefined) {
      count();
      if (body?.password !== 'right') throw new HttpException({}, 401);
      return {};
    }

    @Post('users/:id/like')
    @HttpCode(200)
    @onRoute
    like() {
      count();
      return { liked: true };
    }

    @Get('echo')
    echo(@Req() req: { rateLimit?: unknown }) {
      count();
      return { rateLimit: req.rateLimit };
    }

    @Get('status/:code')
    status(@Param('code') code: string) {
      count();
      if (Number(code) >= 400) throw new HttpException({}, Number(code));
      return {};
    }

    @Get('throw/:code')
    throws(@Param('code') code: string) {
      count();
      throw Object.assign(new Error('thrown'), { status: Number(code) });
    }
  }
  return SuiteController;
}

const suiteGuard = (spec: AppSpec) => new RateLimitGuard(spec.limiter, nestOptions(spec.options));

/** A Nest app built by @nestjs/testing, as a request listener that waits for the app to be ready. */
export function testingApp(
  platform: NestPlatform,
  module: DynamicModule | { controllers: Array<new (...args: never[]) => unknown> },
  configure: (app: INestApplication) => void,
  adapter = platformAdapter(platform),
): { listener: RequestListener; app: Promise<INestApplication> } {
  const app = (async () => {
    const ref = await Test.createTestingModule('module' in module ? { imports: [module] } : module).compile();
    const nest = ref.createNestApplication(adapter, { bodyParser: false, logger: false });
    configure(nest);
    await nest.init();
    if (platform === 'fastify') await (adapter as FastifyAdapter).getInstance().ready();
    return nest;
  })();
  const listener: RequestListener = (req, res) => {
    app.then(
      (nest) => nest.getHttpServer().emit('request', req, res),
      (error: unknown) => res.writeHead(599).end(String(error)),
    );
  };
  return { listener, app };
}

export function nestHarness(platform: NestPlatform): Harness {
  return {
    name: `Nest (${platform})`,
    denialBody: NEST_DENIAL,
    build(spec) {
      let hits = 0;
      const controller = suiteController(spec, () => hits++);
      const trust = spec.trust ?? 'none';
      const adapter =
        platform === 'express'
          ? platformAdapter('express')
          : new FastifyAdapter({
              trustProxy: trust === 'one-hop' ? (_address: string, hop: number) => hop < 1 : trust === 'all',
            });
      const { listener } = testingApp(
        platform,
        { controllers: [controller] },
        (app) => {
          if (platform === 'express') {
            const express = app as NestExpressApplication;
            express.set('trust proxy', trust === 'one-hop' ? 1 : trust === 'all');
            express.useBodyParser('json');
          }
          app.useGlobalFilters(new SuiteErrors(app.getHttpAdapter() as AbstractHttpAdapter));
          const guards: CanActivate[] = [new UserFromHeader()];
          if (spec.mount !== 'route') guards.push(suiteGuard(spec));
          app.useGlobalGuards(...guards);
        },
        adapter,
      );
      return { listener, hits: () => hits };
    },
    example(options) {
      const { app: module, limiter } = nestExample(options);
      const { listener } = exampleApp(platform, module, options);
      return { listener, limiter };
    },
  };
}

function exampleApp(platform: NestPlatform, module: DynamicModule, options: ExampleAppOptions) {
  return testingApp(
    platform,
    module,
    (app) => configureApp(app, platform, options),
    platformAdapter(platform, options),
  );
}

/** The example app for the attack suite (which serves it on a listening server). */
export function nestFramework(platform: NestPlatform): Framework {
  return {
    name: `Nest (${platform})`,
    denialBody: NEST_DENIAL,
    create(options) {
      const { app: module, limiter, loginLimiter } = nestExample(options);
      return { listener: exampleApp(platform, module, options).listener, limiter, loginLimiter };
    },
  };
}
