// What `npm run soak` found, each reproduced on its own: a real Redis, the fault that caused it, and
// what must hold instead.
import { expect } from 'chai';
import { createLimiter, RedisStore, type Rule } from '../../src/index.js';
import { RECOMMENDED_REDIS_OPTIONS } from '../fixtures/redis-options.js';
import { type RedisServer, startRedis } from '../support/redis.js';
import { PATIENT } from '../support/settle.js';

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
    const limiter = createLimiter({
      ...PATIENT,
      store: new RedisStore({ client, prefix: 'soak-reg' }),
      rules,
    });
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
      } finally {
        server.resume();
      }
      // Both commands timed out (commandTimeout). The PUBLISH has settled once a command sent after it on
      // the same connection is answered; a rejection nobody handled is reported before the next turn.
      await client.ping();
      await new Promise((resolve) => setImmediate(resolve));
      expect(String(failure), 'the reset itself reports the failure').to.match(/timed out/i);
      expect(unhandled.map(String)).to.deep.equal([]);
    } finally {
      await limiter.close();
      client.disconnect();
    }
  });
  // The 10-minute soak's audit: a calendar request Redis decided at hh:mm:59.999 was counted in the
  // next minute. The periods an op carries are computed on this process's estimate of the server's
  // clock; estimated from the middle of the TIME call, it was ahead of the server by up to half a round
  // trip, and the script then took "now" to be in the next period. The estimate must never be ahead.
  it("the Redis store's clock is not ahead of the server's, even when its TIME request waited", async () => {
    const client = server.client();
    await new Promise<void>((resolve) => client.once('ready', () => resolve()));
    const serverNow = async () => {
      const [seconds, micros] = await client.time();
      return Number(seconds) * 1000 + Number(micros) / 1000;
    };
    // The store reads TIME as it is made; the server, stopped, runs it 300 ms later and answers at once:
    // the middle of the call would have been 150 ms before the server's time.
    server.pause();
    const store = new RedisStore({ client, prefix: 'soak-clock' });
    try {
      await sleep(300);
      server.resume();
      await client.ping(); // answered after the TIME
      // The TIME reply came first: the store's own continuation, all microtasks, has run by the next turn.
      await new Promise((resolve) => setImmediate(resolve));
      for (let i = 0; i < 20; i++) {
        const estimate = store.now();
        expect(estimate, `sample ${i}`).to.be.at.most(await serverNow());
      }
    } finally {
      server.resume();
      await store.close();
      client.disconnect();
    }
  });
});
