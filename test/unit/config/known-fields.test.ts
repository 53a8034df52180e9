// Strict configuration: a misspelled field anywhere is refused at construction (ERR_UNKNOWN_FIELD), naming the
// object, the field and its value, with "did you mean" when one allowed name is close.
import { expect } from 'chai';
import express from 'express';
import { Redis } from 'ioredis';
import Koa from 'koa';
import { rateLimit as expressRateLimit } from '../../../adapters/express.js';
import { rateLimit as koaRateLimit } from '../../../adapters/koa.js';
import { assertKnownFields, closestName } from '../../../src/config/known-fields.js';
import {
  createLimiter,
  type LimiterOptions,
  loginRules,
  MemoryStore,
  RateLimitConfigError,
  RedisStore,
  type Rule,
  verificationCodeRules,
} from '../../../src/index.js';

const base = { name: 'login', key: 'ip', limit: 5, window: { type: 'fixed', size: '1m' } } as Rule;

/** The RateLimitConfigError `build` throws. */
function refusal(build: () => unknown): RateLimitConfigError {
  try {
    build();
  } catch (error) {
    expect(error).to.be.instanceOf(RateLimitConfigError);
    expect((error as RateLimitConfigError).code).to.equal('ERR_UNKNOWN_FIELD');
    return error as RateLimitConfigError;
  }
  throw new Error('expected a RateLimitConfigError');
}

function limiterWith(rule: Record<string, unknown>, options: Record<string, unknown> = {}) {
  return () => createLimiter({ rules: [{ ...base, ...rule } as Rule], ...options } as LimiterOptions);
}

describe('Strict configuration: unknown fields', () => {
  it("refuses a rule's lockOut, naming rule, field and value, and suggests lockout (a typo that would turn the lockout off)", () => {
    const error = refusal(limiterWith({ lockOut: { duration: '15m' } }));
    expect(error.message).to.equal(
      `rule "login": unknown field 'lockOut' (got {"duration":"15m"}), did you mean 'lockout'?`,
    );
  });

  it('refuses resetOnSucess and suggests resetOnSuccess', () => {
    const error = refusal(limiterWith({ resetOnSucess: true }));
    expect(error.message).to.equal(
      `rule "login": unknown field 'resetOnSucess' (got true), did you mean 'resetOnSuccess'?`,
    );
  });

  it('refuses lockout.escalte and suggests lockout.escalate', () => {
    const error = refusal(limiterWith({ lockout: { duration: '15m', escalte: 2 } }));
    expect(error.message).to.equal(
      `rule "login": unknown field 'lockout.escalte' (got 2), did you mean 'lockout.escalate'?`,
    );
  });

  it('refuses window.burts on a token bucket and suggests window.burst', () => {
    const error = refusal(limiterWith({ window: { type: 'token-bucket', size: '1s', burts: 10 } }));
    expect(error.message).to.equal(
      `rule "login": unknown field 'window.burts' (got 10), did you mean 'window.burst'?`,
    );
  });

  it("checks a window's fields per type: burst on a fixed window, buckets on GCRA, size on a calendar", () => {
    expect(refusal(limiterWith({ window: { type: 'fixed', size: '1m', burst: 3 } })).message).to.equal(
      `rule "login": unknown field 'window.burst' (got 3); allowed: 'window.type', 'window.size'`,
    );
    expect(refusal(limiterWith({ window: { type: 'gcra', size: '1m', buckets: 3 } })).message).to.match(
      /unknown field 'window\.buckets' \(got 3\)/,
    );
    expect(refusal(limiterWith({ window: { type: 'calendar', unit: 'day', size: '1d' } })).message).to.match(
      /unknown field 'window\.size' \(got '1d'\); allowed: 'window\.type', 'window\.unit'/,
    );
  });

  it('reports a misspelled window type field before the type itself (typ -> type)', () => {
    expect(refusal(limiterWith({ window: { typ: 'fixed', size: '1m' } })).message).to.equal(
      `rule "login": unknown field 'window.typ' (got 'fixed'), did you mean 'window.type'?`,
    );
  });

  it('refuses a misspelled match field and a misspelled rule name field', () => {
    expect(refusal(limiterWith({ match: { methods: 'POST', path: '/login' } })).message).to.equal(
      `rule "login": unknown field 'match.methods' (got 'POST'), did you mean 'match.method'?`,
    );
    const noName = { nmae: 'x', key: 'ip', limit: 1, window: { type: 'fixed', size: '1m' } };
    expect(refusal(() => createLimiter({ rules: [noName as unknown as Rule] })).message).to.equal(
      `rules[0]: unknown field 'nmae' (got 'x'), did you mean 'name'?`,
    );
  });

  it('refuses the limiter option onStoreErr and suggests onStoreError; denyCache.maxkeys too', () => {
    expect(refusal(limiterWith({}, { onStoreErr: 'deny' })).message).to.equal(
      `createLimiter: unknown field 'onStoreErr' (got 'deny'), did you mean 'onStoreError'?`,
    );
    expect(refusal(limiterWith({}, { denyCache: { maxkeys: 5 } })).message).to.equal(
      `createLimiter: unknown field 'denyCache.maxkeys' (got 5), did you mean 'denyCache.maxKeys'?`,
    );
  });

  it('refuses MemoryStore and RedisStore options it does not know', () => {
    expect(refusal(() => new MemoryStore({ maxKey: 10 } as never)).message).to.equal(
      `MemoryStore: unknown field 'maxKey' (got 10), did you mean 'maxKeys'?`,
    );
    const client = new Redis({ lazyConnect: true });
    try {
      expect(refusal(() => new RedisStore({ client, prefx: 'app' } as never)).message).to.equal(
        `RedisStore: unknown field 'prefx' (got 'app'), did you mean 'prefix'?`,
      );
    } finally {
      client.disconnect();
    }
  });

  it("refuses Express and Koa adapter options such as express-rate-limit's standardHeaders, suggesting headers", () => {
    const expected = `rateLimit: unknown field 'standardHeaders' (got true), did you mean 'headers'?`;
    expect(refusal(() => expressRateLimit([base], { standardHeaders: true } as never)).message).to.equal(
      expected,
    );
    expect(refusal(() => koaRateLimit([base], { standardHeaders: true } as never)).message).to.equal(
      expected,
    );
    expect(refusal(() => koaRateLimit([base], { handlr: () => {} } as never)).message).to.match(
      /did you mean 'handler'\?$/,
    );
  });

  it("refuses limiter.locked's and the recipes' options it does not know", async () => {
    const limiter = createLimiter({ rules: [base] });
    const error = await limiter.locked('login', { limt: 5 } as never).then(
      () => expect.fail('locked accepted an unknown option'),
      (e: unknown) => e as RateLimitConfigError,
    );
    expect(error.code).to.equal('ERR_UNKNOWN_FIELD');
    expect(error.message).to.equal(`locked: unknown field 'limt' (got 5), did you mean 'limit'?`);
    await limiter.close();
    expect(refusal(() => loginRules({ pairLimt: 3 } as never)).message).to.match(
      /^loginRules: unknown field 'pairLimt' \(got 3\), did you mean 'pairLimit'\?$/,
    );
    expect(refusal(() => verificationCodeRules({ timezone: 'UTC' } as never)).message).to.match(
      /did you mean 'timeZone'\?$/,
    );
  });

  it('accepts every known field, a function key and cost, and the adapters own handler', async () => {
    const rule: Rule = {
      name: 'all',
      match: { method: 'POST', path: '/login' },
      key: (req) => req.ip,
      limit: 5,
      window: { type: 'sliding', size: '1m', buckets: 6 },
      cost: () => 1,
      countOn: 'failure',
      lockout: { duration: '1m', escalate: 2, maxDuration: '1h', forgetAfter: '1d' },
      resetOnSuccess: true,
      mode: 'enforce',
      normalize: true,
    };
    const limiter = createLimiter({
      rules: [rule],
      store: new MemoryStore({ maxKeys: 10, clock: Date.now, sweepIntervalMs: 1000 }),
      onStoreError: 'deny',
      storeTimeout: 100,
      storeRetryInterval: 100,
      denyCache: { maxKeys: 5 },
      ipv6Subnet: 56,
      debug: false,
    });
    expressRateLimit(limiter, { headers: 'both', handler: (_req, res) => void res.end() });
    koaRateLimit(limiter, { reset: 'delta-seconds', handler: () => {} });
    express().use(expressRateLimit(limiter, {}));
    new Koa().use(koaRateLimit(limiter));
    await limiter.close();
  });
});

describe('closestName', () => {
  it('suggests only when one allowed name is close, ignoring case', () => {
    expect(closestName('LIMIT', ['limit', 'key'])).to.equal('limit');
    expect(closestName('legacyHeaders', ['headers', 'reset'])).to.equal('headers');
    expect(closestName('zzz', ['limit', 'key'])).to.equal(undefined);
    // 'sise' is one edit from both: no single suggestion.
    expect(closestName('sise', ['size', 'site'])).to.equal(undefined);
  });

  it('lists the allowed names when none is close, and ignores values that are not plain objects', () => {
    expect(() => assertKnownFields({ zzz: 1 }, ['a', 'b'], 'x', 'y')).to.throw(
      RateLimitConfigError,
      "x: unknown field 'y.zzz' (got 1); allowed: 'y.a', 'y.b'",
    );
    for (const value of [undefined, null, 5, 'text', ['a']]) assertKnownFields(value, [], 'x');
  });
});
