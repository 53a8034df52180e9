// Nest's `StreamableFile` under a global `RateLimitGuard` with a concurrency rule: each stream holds its slot
// while it is written, and a client that leaves mid-stream frees it (Express and Fastify platforms).
// Legacy decorators.
import { Controller, Get, StreamableFile, UseGuards } from '@nestjs/common';
import { RateLimitGuard } from '../../../adapters/nest.js';
import type { NestPlatform } from '../../../examples/nest-app.js';
import type { StoreFactory } from '../../support/stores.js';
import { testingApp } from './nest-harness.js';
import { endless, streamsSuite } from './streams-suite.js';

export function nestStreamsSuite(platform: NestPlatform, stores: StoreFactory): void {
  streamsSuite(
    `Nest (${platform})`,
    {
      'a StreamableFile of a readable without end': async (limiter) => {
        @Controller()
        @UseGuards(new RateLimitGuard(limiter))
        class ExportController {
          @Get('stream')
          stream(): StreamableFile {
            return new StreamableFile(endless());
          }

          @Get('ok')
          ok(): string {
            return 'ok';
          }
        }
        const { listener, app } = testingApp(platform, { controllers: [ExportController] }, () => {});
        await app;
        return listener;
      },
    },
    stores,
  );
}
