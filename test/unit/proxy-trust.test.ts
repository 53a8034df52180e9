// Hono's trusted proxies: Express's `trust proxy` forms compiled over ipaddr.js, and the client address read
// through them, right to left.
import { expect } from 'chai';
import { clientAddress, compileTrustList } from '../../adapters/proxy-trust.js';

describe('trusted proxies (adapters/proxy-trust.ts)', () => {
  it('trusts names, addresses, CIDR ranges and netmasks, an IPv4-mapped peer as its IPv4 address', () => {
    const trust = compileTrustList([
      'loopback',
      '10.0.0.0/8',
      '192.0.2.7',
      '198.51.100.0/255.255.255.0',
      'fc00::/7',
    ]);
    for (const address of [
      '127.0.0.1',
      '::1',
      '10.200.3.4',
      '::ffff:10.1.2.3',
      '192.0.2.7',
      '198.51.100.99',
      'fd00::1',
    ]) {
      expect(trust(address, 0), address).to.equal(true);
    }
    for (const address of ['192.0.2.8', '11.0.0.1', '198.51.101.1', '2001:db8::1', 'unknown', '']) {
      expect(trust(address, 0), address).to.equal(false);
    }
  });

  it('refuses an entry that is not an address or a range, naming it', () => {
    expect(() => compileTrustList(['10.0.0.0/33'])).to.throw(
      TypeError,
      'invalid range on address in trustProxy: 10.0.0.0/33',
    );
    expect(() => compileTrustList(['proxy.internal'])).to.throw(
      TypeError,
      'invalid IP address in trustProxy: proxy.internal',
    );
  });

  it('takes the first untrusted hop from the right, the left-most entry when every hop is trusted', () => {
    const trust = compileTrustList(['loopback', '10.0.0.0/8']);
    expect(clientAddress('127.0.0.1', '203.0.113.9, 10.0.0.2', trust)).to.equal('203.0.113.9');
    // The client wrote its own entry first: the proxies' entries are read from the right, so it is ignored.
    expect(clientAddress('127.0.0.1', '1.2.3.4, 203.0.113.9, 10.0.0.2', trust)).to.equal('203.0.113.9');
    expect(clientAddress('203.0.113.50', '1.2.3.4', trust)).to.equal('203.0.113.50');
    expect(clientAddress('127.0.0.1', undefined, trust)).to.equal('127.0.0.1');
    expect(clientAddress('127.0.0.1', '10.0.0.3,10.0.0.2', trust)).to.equal('10.0.0.3');
    expect(clientAddress('127.0.0.1', '203.0.113.9, 10.0.0.2', (_address, hop) => hop < 1)).to.equal(
      '10.0.0.2',
    );
  });
});
