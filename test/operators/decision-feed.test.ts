// publishDecisionCounts: what one process publishes for `ratekeeper watch`, read back from a real Redis channel.
import { randomBytes } from 'node:crypto';
import { expect } from 'chai';
import type { Redis } from 'ioredis';
import {
  createLimiter,
  type DecisionCountsMessage,
  decisionChannel,
  type Limiter,
  publishDecisionCounts,
  RateLimitConfigError,
  type Rule,
} from '../../src/index.js';
import { RECOMMENDED_REDIS_OPTIONS } from '../fixtures/redis-options.js';
import { getRedis } from '../support/redis.js';
import { PATIENT, until } from '../support/settle.js';

const LOGIN: Rule = {
  name: 'login',
  key: 'ip',
  limit: 2,
  window: { type: 'fixed', size: '1h' },
  lockout: { duration: '1h' },
};
const SHADOW: Rule = {
  name: 'shadow',
  key: 'ip',
  limit: 1,
  window: { type: 'fixed', size: '1h' },
  mode: 'dry-run',
};

async function ready(client: Redis): Promise<Redis> {
  if (client.status !== 'ready') await new Promise<void>((resolve) => client.once('ready', () => resolve()));
  return client;
}

describe('publishDecisionCounts', () => {
  const cleanups: Array<() => unknown> = [];
  afterEach(async () => {
    for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
  });
  async function client(): Promise<Redis> {
    // The recommended settings, but a commandTimeout no busy machine reaches: a publish that timed out
    // would be dropped, and the message the test waits for with it.
    const c = (await getRedis()).client({
      ...RECOMMENDED_REDIS_OPTIONS,
      commandTimeout: PATIENT.storeTimeout,
    });
    cleanups.push(() => c.disconnect());
    return ready(c);
  }
  function limiterOf(rules: Rule[]): Limiter {
    const limiter = createLimiter({ rules });
    cleanups.push(() => limiter.close());
    return limiter;
  }

  it('publishes the counts per rule and result since its last message on <prefix>:decisions; stop() sends the rest', async () => {
    const prefix = `feed${randomBytes(4).toString('hex')}`;
    const subscriber = await client();
    const messages: DecisionCountsMessage[] = [];
    subscriber.on('message', (_channel: string, text: string) => messages.push(JSON.parse(text)));
    await subscriber.subscribe(decisionChannel(prefix));
    expect(decisionChannel(prefix)).to.equal(`${prefix}:decisions`);

    const limiter = limiterOf([LOGIN, SHADOW]);
    const feed = publishDecisionCounts(limiter, { client: await client(), prefix, interval: '1h' });
    for (let i = 0; i < 4; i++) await limiter.consume('login', 'a'); // 2 allowed, 1 placing the lock, 1 locked
    for (let i = 0; i < 3; i++) await limiter.consume('shadow', 'b'); // 1 allowed, 2 dry_run
    await limiter.check({ method: 'GET', path: '/', ip: '192.0.2.1', headers: {} }); // both rules
    await limiter.peek({ method: 'GET', path: '/', ip: '192.0.2.1', headers: {} }); // not counted
    await feed.stop();
    await feed.stop(); // once
    await limiter.consume('login', 'c'); // after stop: not counted
    // stop() resolved once Redis took the PUBLISH; the subscriber's own round trip after it: every message
    // published before has arrived.
    await subscriber.call('PING');
    expect(messages).to.have.lengthOf(1);
    const [message] = messages as [DecisionCountsMessage];
    expect(message).to.include({ v: 1, intervalMs: 3_600_000 });
    expect(message.from).to.match(/^.+:\d+:[0-9a-z]+$/);
    expect(message.rules).to.deep.equal({ login: [3, 0, 2, 0], shadow: [2, 0, 0, 2] });
    expect(message.sources).to.deep.equal({ store: 8 });
  });

  it('a publish that fails is dropped: decisions go on, nothing thrown', async () => {
    const broken = await client();
    broken.disconnect();
    const failed: unknown[] = [];
    const publish = broken.publish.bind(broken);
    broken.publish = ((...args: Parameters<typeof publish>) =>
      publish(...args).catch((error: unknown) => {
        failed.push(error);
        throw error;
      })) as typeof broken.publish;
    const limiter = limiterOf([LOGIN]);
    const feed = publishDecisionCounts(limiter, { client: broken, interval: 5 });
    for (let i = 0; i < 3; i++) await limiter.consume('login', 'a');
    await until('several failed publishes', () => failed.length >= 3);
    await feed.stop();
    expect((await limiter.consume('login', 'z')).allowed).to.equal(true);
  });

  it('refuses a missing client, a bad prefix or interval, an unknown option', () => {
    const limiter = limiterOf([LOGIN]);
    expect(() => publishDecisionCounts(limiter, {} as never)).to.throw(
      RateLimitConfigError,
      /client must be a Redis client with publish\(\) \(ioredis Redis or Cluster\), got undefined/,
    );
    const publisher = { publish: async () => 0 };
    expect(() => publishDecisionCounts(limiter, { client: publisher, prefix: '' })).to.throw(
      /prefix must be a non-empty string/,
    );
    expect(() => publishDecisionCounts(limiter, { client: publisher, interval: 'often' })).to.throw(
      /interval must be a duration such as '1s' or 500, got 'often'/,
    );
    expect(() => publishDecisionCounts(limiter, { client: publisher, intervl: '1s' } as never)).to.throw(
      "publishDecisionCounts: unknown field 'intervl' (got '1s'), did you mean 'interval'?",
    );
    expect(() => publishDecisionCounts({} as Limiter, { client: publisher })).to.throw(/expects a limiter/);
  });
});
