// The login recipe (src/recipes/login.ts): loginRules' rules and figures, its options refused when wrong, and the
// keys it gives requests (one normalized username, tenants, trusted devices, reserved keys), on the memory store.
import { expect } from 'chai';
import {
  createLimiter,
  type Decision,
  LOGIN_DEFAULTS,
  loginRules,
  MAX_KEY_LENGTH,
  OVERSIZED_KEY,
  RateLimitConfigError,
  type RateLimitRequestError,
  type RequestInfo,
  UNPARSED_BODY_KEY,
} from '../../../src/index.js';

const loginRequest = (body: unknown, ip = '198.51.100.1'): RequestInfo => ({
  method: 'POST',
  path: '/login',
  ip,
  headers: {},
  body,
});
const keysOf = (decision: Decision) => Object.fromEntries(decision.rules.map((r) => [r.rule, r.key]));

describe('loginRules', () => {
  it('builds the four rules with the documented figures', () => {
    const rules = loginRules();
    expect(rules.map((r) => r.name)).to.deep.equal([
      'login-pair',
      'login-ip',
      'login-account',
      'login-account-cap',
    ]);
    const [pair, ip, account, cap] = rules;
    expect(pair).to.deep.include({
      match: 'POST /login',
      key: ['body.username', 'ip'],
      normalize: true,
      limit: 5,
      window: { type: 'fixed', size: '15m' },
      countOn: 'failure',
      resetOnSuccess: true,
      lockout: { duration: '1m', escalate: 2, maxDuration: '1h', forgetAfter: '24h' },
    });
    expect(ip).to.deep.include({
      key: 'ip',
      limit: 100,
      window: { type: 'sliding', size: '1d' },
      countOn: 'failure',
      lockout: { duration: '1d' },
    });
    expect(ip?.resetOnSuccess).to.equal(undefined);
    expect(account).to.deep.include({
      limit: 10,
      window: { type: 'gcra', size: '1h', burst: 10 },
      countOn: 'failure',
    });
    expect(account?.lockout).to.equal(undefined);
    expect(account?.resetOnSuccess).to.equal(undefined);
    expect(cap).to.deep.include({
      key: 'body.username',
      normalize: true,
      limit: 100,
      window: { type: 'fixed', size: '30d' },
      countOn: 'failure',
      resetOnSuccess: true,
      lockout: { duration: '30d' },
    });
    expect(LOGIN_DEFAULTS.accountCap).to.equal(100);
  });

  it('takes figures, a prefix, another username field and match: null for a middleware on the route', () => {
    const rules = loginRules({
      prefix: 'admin-login',
      match: null,
      username: 'body.email',
      pairLimit: 3,
      ipLimit: 50,
      accountLimit: 5,
      accountBurst: 3,
      accountCap: 20,
    });
    expect(rules.map((r) => r.name)).to.deep.equal([
      'admin-login-pair',
      'admin-login-ip',
      'admin-login-account',
      'admin-login-account-cap',
    ]);
    expect(rules.every((r) => !('match' in r))).to.equal(true);
    expect(rules.map((r) => r.limit)).to.deep.equal([3, 50, 5, 20]);
    expect(rules[0]?.window).to.deep.equal({ type: 'fixed', size: '15m' });
    expect(rules[2]?.window).to.deep.equal({ type: 'gcra', size: '1h', burst: 3 });
    expect(rules[3]?.key).to.equal('body.email');
  });

  it('refuses a cap above NIST’s 100, a trusted-device check that is not a function, and a bad username form', () => {
    const refuses = (fn: () => unknown, message: RegExp) => {
      expect(fn).to.throw(RateLimitConfigError, message);
    };
    refuses(() => loginRules({ accountCap: 101 }), /accountCap must be an integer from 1 to 100 .*got 101/);
    refuses(() => loginRules({ accountCap: 0 }), /accountCap/);
    refuses(
      () => loginRules({ isTrustedDevice: true as unknown as () => boolean }),
      /isTrustedDevice must be a function/,
    );
    refuses(() => loginRules({ username: 'cookie:user' }), /username must be a key form/);
    refuses(
      () => loginRules({ trustedDeviceSkipsCap: 'yes' as unknown as boolean }),
      /trustedDeviceSkipsCap must be true or false, got 'yes'/,
    );
    expect(() => createLimiter({ rules: loginRules({ pairLimit: 0 }) })).to.throw(
      RateLimitConfigError,
      /rule "login-pair": limit must be a positive integer, got 0/,
    );
  });

  it('keys every rule on one normalized username, so an operator resets the account by its plain name', async () => {
    const limiter = createLimiter({ rules: loginRules() });
    for (const username of [' ALICE ', 'Ａｌｉｃｅ', 'alice']) {
      const decision = await limiter.peek(loginRequest({ username, password: 'x' }));
      expect(keysOf(decision)).to.deep.equal({
        'login-pair': 'alice|198.51.100.1',
        'login-ip': '198.51.100.1',
        'login-account': 'alice',
        'login-account-cap': 'alice',
      });
    }
    const long = await limiter.peek(loginRequest({ username: `${'A'.repeat(300)}x`, password: 'x' }));
    const keys = keysOf(long);
    expect(keys['login-account']).to.match(/^#[\w-]{43}$/);
    expect(keys['login-account']).to.equal(keys['login-account-cap']);
    await limiter.close();
  });

  it('applies only the per-IP rules when the username is missing, empty or null; refuses an object or array; keys a number or boolean as its text', async () => {
    const limiter = createLimiter({ rules: loginRules() });
    for (const username of [undefined, '', ' \t', null]) {
      const decision = await limiter.peek(loginRequest({ username, password: 'x' }));
      expect(keysOf(decision), JSON.stringify(username)).to.deep.equal({
        'login-pair': '|198.51.100.1',
        'login-ip': '198.51.100.1',
      });
    }
    for (const username of [{ $ne: '' }, ['alice'], { toString: 'x' }]) {
      const error = await limiter.check(loginRequest({ username, password: 'x' })).then(
        () => undefined,
        (e: unknown) => e as RateLimitRequestError,
      );
      expect([error?.code, error?.field], JSON.stringify(username)).to.deep.equal([
        'ERR_KEY_VALUE',
        'body.username',
      ]);
    }
    expect((await limiter.status('login-ip', '198.51.100.1')).count, 'nothing consumed').to.equal(0);
    expect(keysOf(await limiter.peek(loginRequest({ username: 12345 })))['login-account']).to.equal('12345');
    expect(keysOf(await limiter.peek(loginRequest({ username: true })))['login-account']).to.equal('true');
    await limiter.close();
  });

  it('keys a tenant-qualified username per username when the tenant is null: failures on bob never lock alice', async () => {
    const limiter = createLimiter({ rules: loginRules({ username: ['body.tenant', 'body.username'] }) });
    const as = (username: string) => loginRequest({ tenant: null, username, password: 'x' });
    expect(keysOf(await limiter.peek(as('Bob')))).to.deep.equal({
      'login-pair': '|bob|198.51.100.1',
      'login-ip': '198.51.100.1',
      'login-account': '|bob',
      'login-account-cap': '|bob',
    });
    for (let i = 0; i < 5; i++) {
      const decision = await limiter.check(as('bob'));
      await limiter.report(decision, 'failure');
    }
    expect((await limiter.check(as('bob'))).allowed, "bob's pair is locked").to.equal(false);
    const alice = await limiter.check(as('alice'));
    expect([alice.allowed, alice.rules.map((r) => r.key)]).to.deep.equal([
      true,
      ['|alice|198.51.100.1', '198.51.100.1', '|alice', '|alice'],
    ]);
    await limiter.close();
  });

  it('skips the account slowdown only when isTrustedDevice returns true for the normalized username', async () => {
    const seen: string[] = [];
    const limiter = createLimiter({
      rules: loginRules({
        isTrustedDevice: (req, username) => {
          seen.push(username);
          const vouched = req.headers['x-device'];
          return (vouched === 'yes' ? true : vouched) as boolean;
        },
      }),
    });
    const as = (device: string | undefined) =>
      limiter.peek({ ...loginRequest({ username: ' Alice ' }), headers: { 'x-device': device } });
    expect(Object.keys(keysOf(await as('yes')))).to.deep.equal([
      'login-pair',
      'login-ip',
      'login-account-cap',
    ]);
    for (const device of [undefined, 'truthy'])
      expect(Object.keys(keysOf(await as(device)))).to.include('login-account');
    expect(seen).to.deep.equal(['alice', 'alice', 'alice']);
    await limiter.close();
  });

  it('never asks isTrustedDevice about a sentinel: a body nothing parsed or an oversized name counts on the account rules', async () => {
    const seen: string[] = [];
    const limiter = createLimiter({
      rules: loginRules({
        isTrustedDevice: (_req, username) => {
          seen.push(username);
          return true;
        },
        trustedDeviceSkipsCap: true,
      }),
    });
    const unparsed: RequestInfo = {
      ...loginRequest('username=alice'),
      headers: { 'content-type': 'application/x-www-form-urlencoded', 'content-length': '14' },
    };
    const oversized = loginRequest({ username: 'a'.repeat(MAX_KEY_LENGTH + 1) });
    for (const [req, key] of [
      [unparsed, UNPARSED_BODY_KEY],
      [oversized, OVERSIZED_KEY],
    ] as const) {
      const keys = keysOf(await limiter.peek(req));
      expect([keys['login-account'], keys['login-account-cap']]).to.deep.equal([key, key]);
    }
    expect(seen, 'asked about no sentinel').to.deep.equal([]);
    // A user whose name is a sentinel's text is asked about under that name, and keyed apart.
    const named = keysOf(await limiter.peek(loginRequest({ username: ' #Unparsed-Body ' })));
    expect(seen, 'once per account rule').to.deep.equal(['#unparsed-body', '#unparsed-body']);
    expect(named).to.deep.equal({
      'login-pair': '%23unparsed-body|198.51.100.1',
      'login-ip': '198.51.100.1',
    });
    await limiter.close();
  });

  it('holds trusted devices at the account cap unless trustedDeviceSkipsCap, which keys the cap as the account', async () => {
    const isTrustedDevice = (req: RequestInfo) => req.headers['x-device'] === 'yes';
    const trusted = { ...loginRequest({ username: ' Alice ' }), headers: { 'x-device': 'yes' } };
    const byDefault = createLimiter({ rules: loginRules({ isTrustedDevice }) });
    expect(Object.keys(keysOf(await byDefault.peek(trusted)))).to.include('login-account-cap');
    const skipping = createLimiter({ rules: loginRules({ isTrustedDevice, trustedDeviceSkipsCap: true }) });
    expect(Object.keys(keysOf(await skipping.peek(trusted)))).to.deep.equal(['login-pair', 'login-ip']);
    const other = await skipping.peek(loginRequest({ username: ' Alice ' }));
    expect(keysOf(other)['login-account-cap']).to.equal('alice');
    const long = keysOf(await skipping.peek(loginRequest({ username: `${'A'.repeat(300)}x` })));
    expect(long['login-account-cap'])
      .to.equal(long['login-account'])
      .and.match(/^#[\w-]{43}$/);
    await Promise.all([byDefault.close(), skipping.close()]);
  });

  it('fails the request, counting nothing, when isTrustedDevice throws', async () => {
    const limiter = createLimiter({
      rules: loginRules({
        isTrustedDevice: () => {
          throw new Error('device store down');
        },
      }),
    });
    let error: unknown;
    try {
      await limiter.check(loginRequest({ username: 'alice' }));
    } catch (e) {
      error = e;
    }
    expect(error).to.have.property('code', 'ERR_KEY_FUNCTION');
    expect((await limiter.status('login-ip', '198.51.100.1')).count).to.equal(0);
    await limiter.close();
  });
});
