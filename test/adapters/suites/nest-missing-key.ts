// A NestJS app for the missing-key tests (test/adapters/missing-key.test.ts): an authentication guard that sets
// request.user from `x-user`, then the RateLimitGuard, both global, on the Express or the Fastify platform.
import type { RequestListener } from 'node:http';
import { type CanActivate, Controller, type ExecutionContext, HttpCode, Post } from '@nestjs/common';
import { RateLimitGuard } from '../../../adapters/nest.js';
import type { NestPlatform } from '../../../examples/nest-app.js';
import type { Limiter } from '../../../src/index.js';
import { testingApp } from './nest-harness.js';

/** As Passport's AuthGuard sets it: `request.user`, here `{ id }` from the `x-user` header when there is one. */
class UserFromHeader implements CanActivate {
  canActivate(context: ExecutionContext): boolean {
    const req = context.switchToHttp().getRequest<{ headers: Record<string, unknown>; user?: unknown }>();
    const id = req.headers['x-user'];
    if (typeof id === 'string') req.user = { id };
    return true;
  }
}

/** POST /v1/complete behind authentication and `limiter`; `handled()` counts the handler's runs. */
export function nestCompletionApp(
  platform: NestPlatform,
  limiter: Limiter,
): { listener: RequestListener; handled: () => number; close: () => Promise<void> } {
  let handled = 0;
  @Controller()
  class CompletionController {
    @Post('v1/complete')
    @HttpCode(200)
    complete() {
      handled++;
      return { ok: true };
    }
  }
  const { listener, app } = testingApp(platform, { controllers: [CompletionController] }, (app) => {
    // Authentication first: guards run in the order given.
    app.useGlobalGuards(new UserFromHeader(), new RateLimitGuard(limiter));
  });
  return { listener, handled: () => handled, close: () => app.then((nest) => nest.close()) };
}
