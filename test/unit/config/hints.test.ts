// The configuration mistakes a newcomer makes first get a message that says what to write instead.
import { expect } from 'chai';
import { createLimiter, type LimiterOptions, RateLimitConfigError, type Rule } from '../../../src/index.js';

const base = { name: 'api', key: 'ip', limit: 5, window: { type: 'fixed', size: '1m' } } as Rule;

function refusal(build: () => unknown): RateLimitConfigError {
  try {
    build();
  } catch (error) {
    expect(error).to.be.instanceOf(RateLimitConfigError);
    return error as RateLimitConfigError;
  }
  throw new Error('expected a RateLimitConfigError');
}

const withRule = (fields: Record<string, unknown>) => () =>
  createLimiter({ rules: [{ ...base, ...fields } as Rule] });

describe('Configuration messages for first mistakes', () => {
  it('createLimiter([rule]) says it takes { rules: [...] }', () => {
    const error = refusal(() => createLimiter([base] as unknown as LimiterOptions));
    expect(error.code).to.equal('ERR_OPTION');
    expect(error.message).to.equal(
      'createLimiter takes an options object { rules: [...] }, got an array: pass the rules as createLimiter({ rules: [...] })',
    );
  });

  it('a rule without a key says the key is required and lists the key forms, not "got undefined"', () => {
    const { key: _, ...keyless } = base;
    const error = refusal(() => createLimiter({ rules: [keyless as Rule] }));
    expect(error.code).to.equal('ERR_KEY');
    expect(error.message).to.equal(
      `rule "api": key is required (one of 'ip', 'user', 'header:<name>', 'body.<path>', 'query.<name>', ` +
        `'param.<name>', a template such as 'sms:{body.phone}', a function (req) => string, or an array of these)`,
    );
  });

  it('window { size: 60 } without a type says both at once: the missing type and the bare number', () => {
    const error = refusal(withRule({ window: { size: 60 } }));
    expect(error.code).to.equal('ERR_WINDOW');
    expect(error.message).to.equal(
      `rule "api": window.type must be one of 'fixed', 'calendar', 'sliding-log', 'sliding', 'token-bucket', ` +
        `'gcra', 'concurrency', 'leaky-bucket', got undefined; and window.size must be a duration with its unit, such as '60s' ` +
        `or '60ms' (a bare number is milliseconds, and is refused below 1000), got 60`,
    );
    expect(refusal(withRule({ window: { size: '1m' } })).message, 'a good size is not named').to.match(
      /got undefined$/,
    );
  });

  it("'GET /api/*' explains path-to-regexp 8 wildcards, and both suggested patterns work", async () => {
    const error = refusal(withRule({ match: 'GET /api/*' }));
    expect(error.code).to.equal('ERR_MATCH');
    expect(error.message).to.equal(
      `rule "api": match must be in path-to-regexp 8 syntax: a wildcard needs a name, as in ` +
        `'/api/*rest' (one or more segments) or '/api{/*rest}' (also /api itself), got 'GET /api/*'`,
    );
    expect(error.message).not.to.include('Missing parameter name');
    const limiter = createLimiter({
      rules: [
        { ...base, name: 'below', match: 'GET /api/*rest' },
        { ...base, name: 'with-bare', match: 'GET /api{/*rest}' },
      ],
    });
    const rulesFor = async (path: string) =>
      (await limiter.peek({ method: 'GET', path, ip: '192.0.2.1', headers: {} })).rules.map((r) => r.rule);
    expect(await rulesFor('/api/users/7')).to.deep.equal(['below', 'with-bare']);
    expect(await rulesFor('/api')).to.deep.equal(['with-bare']);
    expect(await rulesFor('/other')).to.deep.equal([]);
    await limiter.close();
  });

  it("explains Express 4 habits: ':id?' becomes '{/:id}', ':id(\\d+)' and '(.*)' are gone", async () => {
    expect(refusal(withRule({ match: 'GET /users/:id?' })).message).to.equal(
      `rule "api": match must be in path-to-regexp 8 syntax: optional parts are written in braces, ` +
        `as in '/users{/:id}', not with '?', got 'GET /users/:id?'`,
    );
    expect(refusal(withRule({ match: { path: '/users/:id(\\d+)' } })).message).to.match(
      /match must be in path-to-regexp 8 syntax: a parameter cannot carry its own pattern/,
    );
    expect(refusal(withRule({ match: '/files/(.*)' })).message).to.match(
      /regular-expression groups are not supported; use a named wildcard such as '\*rest'/,
    );
    const limiter = createLimiter({ rules: [{ ...base, match: 'GET /users{/:id}' }] });
    for (const path of ['/users', '/users/5']) {
      const decision = await limiter.peek({ method: 'GET', path, ip: '192.0.2.1', headers: {} });
      expect(decision.rules, path).to.have.length(1);
    }
    await limiter.close();
  });

  it('a 4-field cron says cron needs 5 or 6 fields, not a range error', () => {
    const error = refusal(withRule({ window: { type: 'calendar', cron: '0 0 * *' } }));
    expect(error.code).to.equal('ERR_CRON');
    expect(error.message).to.equal(
      `rule "api": window.cron must be a cron expression of 5 fields (minute hour day-of-month month ` +
        `day-of-week) or 6 with seconds first, got '0 0 * *' (4 fields)`,
    );
    expect(refusal(withRule({ window: { type: 'calendar', cron: '0 0 0 * * * 2030' } })).message).to.match(
      /got '0 0 0 \* \* \* 2030' \(7 fields\)$/,
    );
  });

  it('accepts 5- and 6-field crons and aliases such as @daily', async () => {
    for (const cron of ['0 0 * * *', '30 0 0 * * *', '@daily']) {
      const limiter = createLimiter({ rules: [{ ...base, window: { type: 'calendar', cron } }] });
      await limiter.close();
    }
  });
});
