// The verification-code recipe (src/recipes/verification-code.ts): verificationCodeRules' rules and options,
// and normalizeDestination's one key per phone number or e-mail address.
import { expect } from 'chai';
import {
  createLimiter,
  type Decision,
  normalizeDestination,
  RateLimitConfigError,
  VERIFICATION_CODE_DEFAULTS,
  verificationCodeRules,
} from '../../../src/index.js';

const keysOf = (decision: Decision) => Object.fromEntries(decision.rules.map((r) => [r.rule, r.key]));

describe('verificationCodeRules', () => {
  it('builds the four rules with the documented figures, all counting successes only', () => {
    const rules = verificationCodeRules();
    expect(rules.map((r) => [r.name, r.key, r.limit, r.window, r.countOn, r.match])).to.deep.equal([
      ['code-minute', 'body.phone', 1, { type: 'fixed', size: '1m' }, 'success', 'POST /sms/code'],
      [
        'code-day',
        'body.phone',
        10,
        { type: 'calendar', unit: 'day', timezone: 'UTC' },
        'success',
        'POST /sms/code',
      ],
      ['code-ip', 'ip', 20, { type: 'sliding', size: '1h' }, 'success', 'POST /sms/code'],
      ['code-global', rules[3]?.key, 1000, { type: 'sliding', size: '1h' }, 'success', 'POST /sms/code'],
    ]);
    expect(rules[0]?.normalize).to.equal(normalizeDestination);
    expect(VERIFICATION_CODE_DEFAULTS.timeZone).to.equal('UTC');
  });

  it('takes a prefix, a destination, figures and a time zone', () => {
    const rules = verificationCodeRules({
      prefix: 'email-code',
      match: 'POST /email/code',
      destination: 'body.email',
      perMinute: 2,
      perDay: 5,
      perIpPerHour: 7,
      globalPerHour: 300,
      timeZone: 'Asia/Shanghai',
    });
    expect(rules.map((r) => [r.name, r.limit])).to.deep.equal([
      ['email-code-minute', 2],
      ['email-code-day', 5],
      ['email-code-ip', 7],
      ['email-code-global', 300],
    ]);
    expect(rules[1]?.window).to.deep.equal({ type: 'calendar', unit: 'day', timezone: 'Asia/Shanghai' });
    expect(rules[0]?.key).to.equal('body.email');
    expect(() => createLimiter({ rules: verificationCodeRules({ timeZone: 'Mars/Olympus' }) })).to.throw(
      RateLimitConfigError,
      /rule "code-day": window.timezone/,
    );
  });

  it('normalizes phone numbers and e-mail addresses to one key each', async () => {
    const phones = [
      '+86 138 0013 8000',
      '+86 (138) 0013-8000',
      '+86.138.0013.8000',
      ' ＋８６１３８００１３８０００ ',
    ];
    for (const phone of phones) expect(normalizeDestination(phone), phone).to.equal('+8613800138000');
    expect(normalizeDestination('+1 555‐0100')).to.equal('+15550100'); // a Unicode hyphen
    for (const email of ['Alice@Example.COM', ' alice@example.com ', 'ａｌｉｃｅ@ｅｘａｍｐｌｅ.com'])
      expect(normalizeDestination(email), email).to.equal('alice@example.com');
    // Dots and dashes of an address stay: they are part of it.
    expect(normalizeDestination('first.last-name@example.com')).to.equal('first.last-name@example.com');

    const limiter = createLimiter({ rules: verificationCodeRules() });
    const decision = await limiter.peek({
      method: 'POST',
      path: '/sms/code',
      ip: '2001:db8::1',
      headers: {},
      body: { phone: '+86 (138) 0013-8000' },
    });
    expect(keysOf(decision)).to.deep.equal({
      'code-minute': '+8613800138000',
      'code-day': '+8613800138000',
      'code-ip': '2001:db8::/56',
      'code-global': 'all',
    });
    await limiter.close();
  });
});
