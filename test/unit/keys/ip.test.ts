// Client IP keys (src/keys/ip.ts): IPv4-mapped IPv6 as IPv4, dotted quads as parsing reads them, IPv6 by its
// prefix, odd notations normalized or refused, and a request without a valid address on one shared key.
import { expect } from 'chai';
import fc from 'fast-check';
import ipaddr from 'ipaddr.js';
import { createLimiter, ipKey, type KeySpec, type RequestInfo } from '../../../src/index.js';

const base: RequestInfo = { method: 'POST', path: '/login', ip: '203.0.113.10', headers: {} };

/** The identity one rule keys a request on, or undefined when the rule does not apply. */
async function keyOf(
  key: KeySpec,
  req: Partial<RequestInfo>,
  extra: Record<string, unknown> = {},
): Promise<string | undefined> {
  const limiter = createLimiter({
    rules: [{ name: 'r', key, limit: 100, window: { type: 'fixed', size: '1m' }, ...extra }],
  });
  const d = await limiter.peek({ ...base, ...req });
  await limiter.close();
  return d.rules[0]?.key;
}

describe('IP keys', () => {
  it('keys IPv4-mapped IPv6 as IPv4, in every notation (CVE-2026-30827)', () => {
    expect(ipKey('::ffff:203.0.113.10', 64)).to.equal('203.0.113.10');
    expect(ipKey('::ffff:cb00:710a', 64)).to.equal('203.0.113.10');
    expect(ipKey('203.0.113.10', 64)).to.equal('203.0.113.10');
    expect(ipKey('203.0.113.11', 64)).to.not.equal('203.0.113.10');
  });

  it('keys a dotted quad as parsing it does, whether it is canonical (read as it is) or not', () => {
    const part = fc.oneof(
      fc.integer({ min: 0, max: 300 }).map(String),
      fc.constantFrom('00', '01', '007', '0255', '', 'a', '1e2', ' 1', '-1', '0x1f'),
    );
    const quad = fc.oneof(
      fc.array(part, { minLength: 4, maxLength: 4 }).map((parts) => parts.join('.')),
      fc.array(part, { minLength: 3, maxLength: 5 }).map((parts) => parts.join('.')),
      fc.array(part, { minLength: 4, maxLength: 4 }).map((parts) => `${parts.join('.')}.`),
    );
    fc.assert(
      fc.property(quad, (text) => {
        // A leading space never passes the canonical check: that key comes from parsing (after trim).
        expect(ipKey(text, 56)).to.equal(ipKey(` ${text}`, 56));
        if (ipaddr.IPv4.isValidFourPartDecimal(text)) {
          expect(ipKey(text, 56)).to.equal(ipaddr.IPv4.parse(text).toString());
        }
      }),
      { numRuns: 3000 },
    );
    expect(ipKey('10.0.0.255', 56)).to.equal('10.0.0.255');
    expect(ipKey('10.0.0.256', 56)).to.equal(undefined);
    expect(ipKey('010.0.0.1', 56)).to.equal(undefined);
  });

  it('keeps IPv6 with an embedded dotted quad as IPv6, by prefix', () => {
    expect(ipKey('2001:db8::1.2.3.4', 64)).to.equal('2001:db8::/64');
    expect(ipKey('64:ff9b::1.2.3.4', 64)).to.equal('64:ff9b::/64');
  });

  it('keys IPv6 by its /56 by default (a /48 holds 256 buckets, not 65,536)', async () => {
    expect(await keyOf('ip', { ip: '2001:db8:1:2::1' })).to.equal('2001:db8:1::/56');
    expect(await keyOf('ip', { ip: '2001:db8:1:ff:ffff::1' })).to.equal('2001:db8:1::/56');
    expect(await keyOf('ip', { ip: '2001:db8:1:100::1' })).to.equal('2001:db8:1:100::/56');
  });

  it('keys IPv6 by the configured prefix', () => {
    expect(ipKey('2001:db8:1:2:aaaa::1', 64)).to.equal(ipKey('2001:db8:1:2:ffff:ffff:ffff:ffff', 64));
    expect(ipKey('2001:db8:1:2::1', 64)).to.not.equal(ipKey('2001:db8:1:3::1', 64));
    expect(ipKey('2001:db8:1:2::1', 48)).to.equal('2001:db8:1::/48');
    expect(ipKey('2001:db8:1:2::1', 128)).to.equal('2001:db8:1:2::1');
  });

  it('normalizes or rejects odd notations, never a shared "undefined" bucket', () => {
    expect(ipKey('1.2.3.4:5555', 64)).to.equal('1.2.3.4');
    expect(ipKey('[::1]', 64)).to.equal('::/64');
    expect(ipKey('fe80::1%eth0', 64)).to.equal('fe80::/64');
    for (const bad of [
      undefined,
      '',
      'unknown',
      'undefined',
      '1.2.3',
      '999.1.1.1',
      '0x7f.1',
      ' ',
      'a'.repeat(500),
    ]) {
      expect(ipKey(bad, 64), String(bad)).to.equal(undefined);
    }
  });

  it("keys a request without a valid ip on the one shared '#unresolved-ip': the rule still applies", async () => {
    for (const ip of [undefined, '', 'garbage', 'unknown', '09.9.9.9'])
      expect(await keyOf('ip', { ip }), String(ip)).to.equal('#unresolved-ip');
  });
});
