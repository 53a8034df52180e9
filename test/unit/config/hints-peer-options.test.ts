// Another rate limiter's options object, or a window written as a bare length, is refused with the ratekeeper
// rule that means the same, on every adapter, and the rule the message suggests works as it says.
import { expect } from 'chai';
import Fastify from 'fastify';
import { rateLimit as expressRateLimit } from '../../../adapters/express.js';
import { rateLimit as fastifyRateLimit } from '../../../adapters/fastify.js';
import { rateLimit as honoRateLimit } from '../../../adapters/hono.js';
import { rateLimit as koaRateLimit, slowDown as koaSlowDown } from '../../../adapters/koa.js';
import { RateLimit, RateLimitGuard } from '../../../adapters/nest.js';
import { WINDOW_NAMES } from '../../../src/algorithms/index.js';
import { rulesFromPeerOptions } from '../../../src/config/hints.js';
import { createLimiter, RateLimitConfigError, type Rule } from '../../../src/index.js';

const EXPRESS_STYLE = { windowMs: 60_000, limit: 100 };
const SUGGESTED = "[{ name: 'api', key: 'ip', limit: 100, window: { type: 'fixed', size: '1m' } }]";

async function refusal(build: () => unknown): Promise<RateLimitConfigError> {
  try {
    await build();
  } catch (error) {
    expect(error).to.be.instanceOf(RateLimitConfigError);
    return error as RateLimitConfigError;
  }
  throw new Error('expected a RateLimitConfigError');
}

/** The rule array a message suggests, read back from its text (object literals only, no code). */
function suggested(message: string): Rule[] {
  const text = /(\[\{ name: .*\}\])/.exec(message)?.[1];
  expect(text, message).to.be.a('string');
  const json = (text as string).replace(/'/g, '"').replace(/(\w+):/g, '"$1":');
  return JSON.parse(json) as Rule[];
}

/** How many of `n` requests from one address the rules admit at once. */
async function admitted(rules: Rule[], n: number): Promise<number> {
  const limiter = createLimiter({ rules });
  let count = 0;
  for (let i = 0; i < n; i++) {
    const decision = await limiter.check({ method: 'GET', path: '/', ip: '203.0.113.7', headers: {} });
    if (decision.allowed) count++;
  }
  await limiter.close();
  return count;
}

describe("Another rate limiter's options: the same limit suggested as rules", () => {
  it('Express: rateLimit({ windowMs, limit }) names the shape and gives the rule, which admits 100 of 101', async () => {
    const error = await refusal(() => expressRateLimit(EXPRESS_STYLE as never));
    expect(error.code).to.equal('ERR_OPTION');
    expect(error.message).to.equal(
      `rateLimit: expects an array of rules or a limiter from createLimiter, got {"windowMs":60000,"limit":100}; ` +
        `that is another rate limiter's options (windowMs, limit), and ratekeeper takes rules: the same limit is ${SUGGESTED}`,
    );
    expect(await admitted(suggested(error.message), 101)).to.equal(100);
  });

  it('Koa, Hono, slowDown and the NestJS guard and decorator refuse the same object with the same rule', async () => {
    for (const build of [
      () => new RateLimitGuard(EXPRESS_STYLE as never),
      () => RateLimit(EXPRESS_STYLE as never),
      () => koaRateLimit(EXPRESS_STYLE as never),
      () => honoRateLimit(EXPRESS_STYLE as never),
      () => koaSlowDown(EXPRESS_STYLE as never, { delay: 100 }),
    ]) {
      const error = await refusal(build);
      expect(error.code).to.equal('ERR_OPTION');
      expect(error.message).to.include(`the same limit is ${SUGGESTED}`);
    }
  });

  it("Fastify: @fastify/rate-limit's { max, timeWindow } as the plugin's options, and { windowMs, limit } as its rules", async () => {
    const app = Fastify();
    app.register(fastifyRateLimit, { max: 5, timeWindow: '1 minute' } as never);
    const error = await refusal(() => app.ready());
    expect(error.message).to.equal(
      `ratekeeper/fastify: options in another rate limiter's shape (timeWindow, max); ratekeeper takes rules, ` +
        `and the same limit is app.register(rateLimit, { rules: [{ name: 'api', key: 'ip', limit: 5, ` +
        `window: { type: 'fixed', size: '1 minute' } }] })`,
    );
    expect(await admitted(suggested(error.message), 6)).to.equal(5);
    await app.close().catch(() => {});

    const other = Fastify();
    other.register(fastifyRateLimit, { rules: EXPRESS_STYLE as never });
    expect((await refusal(() => other.ready())).message).to.include(`the same limit is ${SUGGESTED}`);
    await other.close().catch(() => {});
  });

  it("reads koa-ratelimit's { duration, max } and @nestjs/throttler's { ttl, limit } in ms", () => {
    expect(rulesFromPeerOptions({ duration: 3_600_000, max: 2500 })).to.deep.equal({
      fields: ['duration', 'max'],
      rules: "[{ name: 'api', key: 'ip', limit: 2500, window: { type: 'fixed', size: '1h' } }]",
    });
    expect(rulesFromPeerOptions({ ttl: 1500, limit: 3 })?.rules).to.include("size: '1500ms'");
  });

  it('leaves a limit it was not given for the user to write, and names a limit function as one', () => {
    expect(rulesFromPeerOptions({ windowMs: 900_000 })?.rules).to.equal(
      "[{ name: 'api', key: 'ip', limit: <limit>, window: { type: 'fixed', size: '15m' } }]",
    );
    expect(rulesFromPeerOptions({ windowMs: 60_000, limit: () => 5 })?.rules).to.include(
      'limit: (req) => number',
    );
  });

  it("is not fooled by a rule's own limit: a rule outside an array is told to go in one", async () => {
    expect(rulesFromPeerOptions({ name: 'api', key: 'ip', limit: 5 })).to.equal(undefined);
    const rule = { name: 'api', key: 'ip', limit: 5, window: { type: 'fixed', size: '1m' } };
    const error = await refusal(() => expressRateLimit(rule as never));
    expect(error.message).to.match(/; one rule goes in an array: \[\{ name: 'api', \.\.\. \}\]$/);
  });

  it("an object holding the rules (Fastify's plugin form) given to rateLimit is told to pass the array", async () => {
    const error = await refusal(() => koaRateLimit({ rules: [] } as never));
    expect(error.message).to.match(/; give the rules array itself, not an object holding it$/);
  });
});

describe('A window that is not an object: the types listed, and a window suggested', () => {
  const types = WINDOW_NAMES.map((t) => `'${t}'`).join(', ');
  const withWindow = (window: unknown) => () =>
    createLimiter({ rules: [{ name: 'api', key: 'ip', limit: 5, window } as Rule] });

  it("window: '1m' lists every window type of the algorithm registry and suggests { type: 'fixed', size: '1m' }", async () => {
    const error = await refusal(withWindow('1m'));
    expect(error.code).to.equal('ERR_WINDOW');
    expect(error.message).to.equal(
      `rule "api": window must be an object with a type (one of ${types}), such as { type: 'fixed', size: '1m' }, got '1m'`,
    );
    expect(WINDOW_NAMES).to.include.members(['fixed', 'calendar', 'gcra', 'concurrency', 'leaky-bucket']);
  });

  it('a length in ms, a type name or anything else gets a window of its own to copy', async () => {
    expect((await refusal(withWindow(60_000))).message).to.include(
      "such as { type: 'fixed', size: 60000 }, got",
    );
    expect((await refusal(withWindow('gcra'))).message).to.include(
      "such as { type: 'gcra', size: '1m' }, got",
    );
    expect((await refusal(withWindow('calendar'))).message).to.include(
      "such as { type: 'calendar', unit: 'day' }, got",
    );
    expect((await refusal(withWindow('concurrency'))).message).to.include(
      "such as { type: 'concurrency' }, got",
    );
    expect((await refusal(withWindow(null))).message).to.include(
      "such as { type: 'fixed', size: '1m' }, got null",
    );
  });

  it('each suggested window is accepted as written', async () => {
    for (const window of [
      { type: 'fixed', size: '1m' },
      { type: 'fixed', size: 60_000 },
      { type: 'gcra', size: '1m' },
      { type: 'calendar', unit: 'day' },
      { type: 'concurrency' },
    ]) {
      await createLimiter({ rules: [{ name: 'api', key: 'ip', limit: 5, window } as Rule] }).close();
    }
  });
});
