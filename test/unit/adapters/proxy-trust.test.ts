// Trusted proxies: Express's `trust proxy` forms compiled over ipaddr.js, the client address read through them,
// right to left, and the client behind a proxy on a Unix domain socket.
import { expect } from 'chai';
import {
  clientAddress,
  compileTrust,
  compileTrustList,
  onUnixSocket,
  unixSocketClient,
} from '../../../adapters/proxy-trust.js';

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

describe('the client behind a proxy on a Unix domain socket (adapters/proxy-trust.ts)', () => {
  it('judges the peer as a loopback address at hop 0, then reads the entries as over TCP', () => {
    const xff = '198.51.100.1, 203.0.113.9';
    expect(unixSocketClient(xff, compileTrust(1) as never)).to.equal('203.0.113.9');
    expect(unixSocketClient(xff, compileTrust(2) as never)).to.equal('198.51.100.1');
    expect(unixSocketClient(xff, compileTrust('loopback') as never)).to.equal('203.0.113.9');
    expect(unixSocketClient(xff, compileTrust(true) as never)).to.equal('198.51.100.1');
    expect(unixSocketClient('203.0.113.9', compileTrust(['loopback', '203.0.113.0/24']) as never)).to.equal(
      '203.0.113.9',
    );
  });

  it('has no client address when the setting does not trust that peer, or no entry came', () => {
    expect(unixSocketClient('203.0.113.9', compileTrust('10.0.0.0/8') as never)).to.equal(undefined);
    expect(unixSocketClient('203.0.113.9', () => false)).to.equal(undefined);
    expect(unixSocketClient(undefined, compileTrust(1) as never)).to.equal(undefined);
  });

  it('knows a Unix socket by its server listening on a path, never by a missing peer address', () => {
    const server = (address: unknown) => ({ address: () => address });
    expect(onUnixSocket({ server: server('/run/app.sock') })).to.equal(true);
    // A TCP connection reset before its address was read has none either: still TCP.
    expect(onUnixSocket({ remoteAddress: undefined, server: server({ port: 80, address: '::' }) })).to.equal(
      false,
    );
    expect(onUnixSocket({ remoteAddress: undefined })).to.equal(false);
    expect(onUnixSocket(undefined)).to.equal(false);
  });

  it('compiles no trust for false, 0 or no setting, and a hop count as Express does', () => {
    for (const none of [undefined, false, 0] as const) expect(compileTrust(none)).to.equal(undefined);
    const two = compileTrust(2) as (address: string, hop: number) => boolean;
    expect([two('203.0.113.1', 0), two('203.0.113.1', 1), two('203.0.113.1', 2)]).to.deep.equal([
      true,
      true,
      false,
    ]);
  });
});
