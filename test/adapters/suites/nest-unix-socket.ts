// The Unix socket suite's apps on NestJS (test/adapters/suites/unix-socket-suite.ts), on the Express and the Fastify
// platform, each trusting its proxy with the platform's own setting.
import { Controller, Get } from '@nestjs/common';
import type { NestExpressApplication } from '@nestjs/platform-express';
import { FastifyAdapter } from '@nestjs/platform-fastify';
import { RateLimitGuard } from '../../../adapters/nest.js';
import type { NestPlatform } from '../../../examples/nest-app.js';
import { testingApp } from './nest-harness.js';
import type { SocketTrust, UnixSocketFramework } from './unix-socket-suite.js';

@Controller()
class RootController {
  @Get()
  root() {
    return 'ok';
  }
}

/** One proxy by count (Fastify 5.12's types no longer list a number, as it ignores hops over TCP), by address, none. */
const setting = (trust: SocketTrust) =>
  (trust === 'hops' ? 1 : trust === 'loopback' ? 'loopback' : false) as string | boolean;

export function nestSocketApps(platform: NestPlatform): UnixSocketFramework {
  return {
    name: `Nest (${platform})`,
    settings:
      platform === 'express'
        ? {
            hops: "app.set('trust proxy', 1)",
            loopback: "app.set('trust proxy', 'loopback')",
            none: 'the default',
          }
        : {
            hops: 'FastifyAdapter({ trustProxy: 1 })',
            loopback: "FastifyAdapter({ trustProxy: 'loopback' })",
            none: 'the default',
          },
    async app(trust, limiter) {
      const adapter = platform === 'fastify' ? new FastifyAdapter({ trustProxy: setting(trust) }) : undefined;
      const { listener, app } = testingApp(
        platform,
        { controllers: [RootController] },
        (nest) => {
          if (platform === 'express') (nest as NestExpressApplication).set('trust proxy', setting(trust));
          nest.useGlobalGuards(new RateLimitGuard(limiter));
        },
        adapter,
      );
      const nest = await app;
      return { listener, close: () => nest.close() };
    },
  };
}
