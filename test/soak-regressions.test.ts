// What `npm run soak` found, each reproduced on its own: a real Redis, the fault that caused it, and
// what must hold instead.
import { expect } from 'chai';
import { createLimiter, RedisStore, type Rule } from '../src/index.js';
import { RECOMMENDED_REDIS_OPTIONS } from './fixtures/redis-options.js';
import { type RedisServer, startRedis } from './support/redis.js';

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

describe('Soak regressions', function () {
  this.timeout(30_000);
  let server: RedisServer;
  const unhandled: unknown[] = [];
  const onUnhandled = (reason: unknown) => void unhandled.push(reason);

  before(async () => {
    server = await startRedis();
    process.on('unhandledRejection', onUnhandled);
  });
  after(async () => {
    process.off('unhandledRejection', onUnhandled);
    await server.stop();
  });

  // The 10-minute soak counted 3 unhandled rejections: an operator's reset sends its script and the
  // PUBLISH announcing it together; when the script call failed, the PUBLISH's own failure was never
  // awaited.
  it('a reset that fails on a stalled Redis rejects once and leaves no rejection unhandled', async () => {
    const client = server.client(RECOMMENDED_REDIS_OPTIONS);
    await new Promise<void>((resolve) => client.once('ready', () => resolve()));
    const rules: Rule[] = [
      {
        name: 'guard',
        key: 'user',
        limit: 1,
        window: { type: 'fixed', size: '1m' },
        lockout: { duration: '1m' },
      },
    ];
    const limiter = createLimiter({ store: new RedisStore({ client, prefix: 'soak-reg' }), rules });
    try {
      await limiter.consume('guard', 'u');
      expect((await limiter.consume('guard', 'u')).allowed).to.equal(false);
      unhandled.length = 0;
      server.pause();
      let failure: unknown;
      try {
        await limiter.reset('guard', 'u').then(
          () => 'reset',
          (error: unknown) => {
            failure = error;
          },
        );
        // Both commands time out (commandTimeout); give the second's rejection time to surface.
        await sleep(RECOMMENDED_REDIS_OPTIONS.commandTimeout + 100);
      } finally {
        server.resume();
      }
      expect(String(failure), 'the reset itself reports the failure').to.match(/timed out/i);
      expect(unhandled.map(String)).to.deep.equal([]);
    } finally {
      await limiter.close();
      client.disconnect();
    }
  });
});
