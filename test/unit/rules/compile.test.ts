// Bad configuration is refused at construction with a RateLimitConfigError naming the rule, field and value.
import { expect } from 'chai';
import { createLimiter, MemoryStore, RateLimitConfigError, type Rule } from '../../../src/index.js';

const base: Rule = { name: 'r', key: 'ip', limit: 5, window: { type: 'fixed', size: '1m' } };

function configError(rules: unknown[], options: Record<string, unknown> = {}): RateLimitConfigError {
  try {
    createLimiter({ rules: rules as Rule[], store: new MemoryStore(), ...options }).close();
  } catch (error) {
    expect(error).to.be.instanceOf(RateLimitConfigError);
    return error as RateLimitConfigError;
  }
  throw new Error('expected a RateLimitConfigError');
}

describe('configuration errors', () => {
  it('refuses a concurrency rule on a store that cannot renew held slots', () => {
    const store = Object.assign(Object.create(MemoryStore.prototype) as MemoryStore, { renew: undefined });
    const error = configError([{ ...base, window: { type: 'concurrency' } }], { store });
    expect(error.code).to.equal('ERR_OPTION');
    expect(error.message).to.match(/rule "r": a concurrency window needs a store that renews held slots/);
  });

  const cases: Array<[string, unknown[], string, RegExp]> = [
    ['duplicate names', [base, { ...base }], 'ERR_DUPLICATE_RULE', /rule "r": name must be unique/],
    ['limit 0', [{ ...base, limit: 0 }], 'ERR_LIMIT', /rule "r": limit must be a positive integer, got 0/],
    ['limit -1', [{ ...base, limit: -1 }], 'ERR_LIMIT', /got -1/],
    ['limit 1.5', [{ ...base, limit: 1.5 }], 'ERR_LIMIT', /got 1\.5/],
    ['limit NaN', [{ ...base, limit: Number.NaN }], 'ERR_LIMIT', /got NaN/],
    [
      'unknown window type',
      [{ ...base, window: { type: 'hourglass', size: '1m' } }],
      'ERR_WINDOW',
      /window\.type must be one of 'fixed'.*got 'hourglass'/,
    ],
    [
      'unparseable duration',
      [{ ...base, name: 'sms-day', window: { type: 'fixed', size: '1 dya' } }],
      'ERR_DURATION',
      /rule "sms-day": window\.size must be a duration such as '1d' or 86400000, got '1 dya'/,
    ],
    [
      'negative duration',
      [{ ...base, window: { type: 'sliding-log', size: -5 } }],
      'ERR_DURATION',
      /window\.size .* got -5/,
    ],
    [
      'bad cron',
      [{ ...base, window: { type: 'calendar', cron: 'every tuesday' } }],
      'ERR_CRON',
      /window\.cron must be a cron expression .*got 'every tuesday'/,
    ],
    [
      'unknown time zone',
      [{ ...base, window: { type: 'calendar', unit: 'day', timezone: 'Mars/Olympus' } }],
      'ERR_TIMEZONE',
      /window\.timezone must be an IANA time zone .*got 'Mars\/Olympus'/,
    ],
    [
      'unknown calendar unit',
      [{ ...base, window: { type: 'calendar', unit: 'fortnight' } }],
      'ERR_WINDOW',
      /window\.unit .*got 'fortnight'/,
    ],
    [
      'unknown key form',
      [{ ...base, key: 'cookie.session' }],
      'ERR_KEY',
      /key must be a known key form \(unknown key form 'cookie\.session'/,
    ],
    ['empty composite key', [{ ...base, key: [] }], 'ERR_KEY', /at least one part/],
    [
      'invalid path pattern',
      [{ ...base, match: 'POST /users/:' }],
      'ERR_MATCH',
      /rule "r": match must be .*got 'POST \/users\/:'/,
    ],
    ['path without slash', [{ ...base, match: { path: 'login' } }], 'ERR_MATCH', /path must start with '\/'/],
    [
      'burst < 1',
      [{ ...base, window: { type: 'token-bucket', size: '1s', burst: 0 } }],
      'ERR_WINDOW',
      /window\.burst must be a positive integer, got 0/,
    ],
    [
      'escalate < 1',
      [{ ...base, lockout: { duration: '1m', escalate: 0.5 } }],
      'ERR_LOCKOUT',
      /lockout\.escalate must be a number of at least 1, got 0\.5/,
    ],
    [
      'lockout without duration',
      [{ ...base, lockout: {} }],
      'ERR_DURATION',
      /lockout\.duration must be a duration/,
    ],
    [
      'buckets 0',
      [{ ...base, window: { type: 'sliding', size: '1m', buckets: 0 } }],
      'ERR_WINDOW',
      /window\.buckets must be an integer from 1 to 1000, got 0/,
    ],
    [
      'fixed cost 1.5',
      [{ ...base, cost: 1.5 }],
      'ERR_COST',
      /rule "r": cost must be a non-negative integer, got 1\.5/,
    ],
    [
      'bad countOn',
      [{ ...base, countOn: 'sometimes' }],
      'ERR_OPTION',
      /countOn must be 'all', 'failure' or 'success'/,
    ],
    ['bad mode', [{ ...base, mode: 'shadow' }], 'ERR_OPTION', /mode must be 'enforce' or 'dry-run'/],
    ['bad name', [{ ...base, name: 'has space' }], 'ERR_RULE_NAME', /rules\[0\]: name must be/],
    ['a rule that is not an object', [null], 'ERR_RULES', /rules\[0\] must be a rule object/],
    [
      'a concurrency lease below 1 s',
      [{ ...base, window: { type: 'concurrency', lease: '500ms' } }],
      'ERR_DURATION',
      /rule "r": window\.lease must be a duration such as '60s' or 60000, at least 1s, got '500ms'/,
    ],
    [
      'a concurrency window given a size',
      [{ ...base, window: { type: 'concurrency', size: '1m' } }],
      'ERR_UNKNOWN_FIELD',
      /size/,
    ],
    [
      'a lockout on a concurrency window',
      [{ ...base, window: { type: 'concurrency' }, lockout: { duration: '1m' } }],
      'ERR_OPTION',
      /rule "r": lockout does not apply to a concurrency window/,
    ],
    [
      'countOn on a concurrency window',
      [{ ...base, window: { type: 'concurrency' }, countOn: 'failure' }],
      'ERR_OPTION',
      /countOn does not apply to a concurrency window.*got 'failure'/,
    ],
    [
      'settle on a concurrency window',
      [{ ...base, window: { type: 'concurrency' }, settle: true }],
      'ERR_OPTION',
      /settle does not apply to a concurrency window/,
    ],
    [
      'settle not a boolean',
      [{ ...base, settle: 'yes' }],
      'ERR_OPTION',
      /settle must be a boolean, got 'yes'/,
    ],
    [
      'settle with countOn',
      [{ ...base, settle: true, countOn: 'success' }],
      'ERR_OPTION',
      /countOn does not apply with settle: true/,
    ],
    [
      'settle with a lockout',
      [{ ...base, settle: true, lockout: { duration: '1m' } }],
      'ERR_OPTION',
      /lockout does not apply with settle: true/,
    ],
  ];
  for (const [what, rules, code, message] of cases) {
    it(`refuses ${what}`, () => {
      const error = configError(rules);
      expect(error.code).to.equal(code);
      expect(error.message).to.match(message);
    });
  }

  it('refuses rules that are not an array', () => {
    expect(() => createLimiter({ rules: 'nope' as unknown as Rule[] })).to.throw(
      RateLimitConfigError,
      /rules must be a non-empty array of rule objects, got 'nope'/,
    );
  });

  it('refuses an empty rule array, which would limit nothing', () => {
    const error = configError([]);
    expect(error.code).to.equal('ERR_RULES');
    expect(error.message).to.equal('rules must be a non-empty array of rule objects, got []');
  });

  describe('durations written without a unit', () => {
    it("refuses a window size of 60 (60 ms, meant as seconds), showing '60s' and '60ms'", () => {
      for (const size of [60, '60']) {
        const error = configError([{ ...base, window: { type: 'fixed', size } }]);
        expect(error.code).to.equal('ERR_DURATION');
        expect(error.message).to.equal(
          `rule "r": window.size must be a duration with its unit, such as '60s' or '60ms' ` +
            `(a bare number is milliseconds, and is refused below 1000), got ${size === 60 ? '60' : "'60'"}`,
        );
      }
    });

    it('refuses a bare number below 1000 for every window type with a size, and lockout durations', () => {
      for (const type of ['fixed', 'sliding-log', 'sliding', 'token-bucket', 'gcra', 'leaky-bucket']) {
        expect(configError([{ ...base, window: { type, size: 999 } }]).message).to.match(
          /window\.size must be a duration with its unit, such as '999s' or '999ms'/,
        );
      }
      for (const field of ['duration', 'maxDuration', 'forgetAfter']) {
        const lockout = { duration: '1m', [field]: 15 };
        expect(configError([{ ...base, lockout }]).message).to.match(
          new RegExp(
            `rule "r": lockout\\.${field} must be a duration with its unit, such as '15s' or '15ms'`,
          ),
        );
      }
    });

    it('keeps bare numbers of 1000 and more as milliseconds', async () => {
      const limiter = createLimiter({
        rules: [{ ...base, limit: 1, window: { type: 'fixed', size: 1000 } }],
        store: new MemoryStore({ clock: () => 0 }),
      });
      expect((await limiter.consume('r', 'k')).resetMs).to.equal(1000);
      await limiter.close();
    });

    it("points '1mo' to a calendar window per month", () => {
      const error = configError([{ ...base, window: { type: 'fixed', size: '1mo' } }]);
      expect(error.code).to.equal('ERR_DURATION');
      expect(error.message).to.equal(
        `rule "r": window.size must be a fixed length, and months differ in length: for a limit per ` +
          `calendar month, use window { type: 'calendar', unit: 'month' }, got '1mo'`,
      );
      expect(configError([{ ...base, lockout: { duration: '1 month' } }]).message).to.match(
        /lockout\.duration must be a fixed length, and months differ in length: give days, such as '30d'/,
      );
    });
  });

  it('refuses bad limiter options', () => {
    expect(configError([base], { onStoreError: 'panic' }).message).to.match(
      /onStoreError must be 'allow', 'deny' or 'insurance'/,
    );
    expect(configError([base], { ipv6Subnet: 12 }).message).to.match(
      /ipv6Subnet must be an integer from 48 to 128/,
    );
    expect(configError([base], { storeTimeout: 'soon' }).message).to.match(/storeTimeout must be a duration/);
    expect(() => new MemoryStore({ maxKeys: 0 })).to.throw(
      RateLimitConfigError,
      /maxKeys must be a positive integer/,
    );
  });

  it('names unknown rules in direct calls', async () => {
    const limiter = createLimiter({ rules: [base] });
    const error = await limiter.consume('nope', 'k').catch((e: unknown) => e);
    expect(error).to.be.instanceOf(RateLimitConfigError);
    expect((error as Error).message).to.equal(`no rule named 'nope'; rules are r`);
    await limiter.close();
  });

  it('accepts every documented form', async () => {
    const limiter = createLimiter({
      rules: [
        { ...base, name: 'a', match: 'POST /login', key: ['body.user', 'ip'] },
        {
          ...base,
          name: 'b',
          match: { method: ['GET', 'HEAD'], path: ['/a/:id', '/b{/*rest}'] },
          key: 'param.id',
        },
        {
          ...base,
          name: 'c',
          key: 'sms:{body.phone}',
          window: { type: 'calendar', unit: 'day', timezone: 'Asia/Shanghai' },
        },
        {
          ...base,
          name: 'd',
          key: 'header:x-api-key',
          window: { type: 'leaky-bucket', size: 1000, burst: 3 },
        },
        {
          ...base,
          name: 'e',
          key: (r) => r.ip,
          window: { type: 'calendar', cron: '0 0 * * *' },
          cost: (r) => (r.method === 'GET' ? 1 : 2),
        },
        {
          ...base,
          name: 'f',
          key: 'user',
          window: { type: 'sliding', size: '1h' },
          lockout: { duration: '1m', escalate: 2, maxDuration: '1h', forgetAfter: '1d' },
        },
        {
          ...base,
          name: 'g',
          key: 'query.token',
          window: { type: 'token-bucket', size: '1s' },
          countOn: 'failure',
          resetOnSuccess: true,
          mode: 'dry-run',
          normalize: true,
        },
      ],
    });
    expect(limiter.ruleNames).to.deep.equal(['a', 'b', 'c', 'd', 'e', 'f', 'g']);
    await limiter.close();
  });
});
