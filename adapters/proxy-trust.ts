// Trusted proxies: Express's `trust proxy` forms compiled to a trust function over ipaddr.js (for Hono, which
// has no setting of its own, and Fastify's setting on a Unix socket), the client address read through the
// proxies that function trusts, and the client behind a proxy on a Unix domain socket.
import ipaddr from 'ipaddr.js';

/** Whether the hop `hop` steps from the server (0: the peer) at `address` is a proxy to believe. */
export type Trust = (address: string, hop: number) => boolean;

/** Which proxies' `X-Forwarded-For` entries are believed (Express's `trust proxy` forms, Fastify's `trustProxy`). */
export type TrustProxy = boolean | number | string | string[] | ((address: string, hop: number) => boolean);

/** The trust function of a `trustProxy` setting, as Express compiles its own; none for false, 0 or unset. */
export function compileTrust(trust: TrustProxy | undefined): Trust | undefined {
  if (trust === undefined || trust === false || trust === 0) return undefined;
  if (trust === true) return () => true;
  if (typeof trust === 'number') return (_address, hop) => hop < trust;
  if (typeof trust === 'function') return trust;
  return compileTrustList(typeof trust === 'string' ? trust.split(',').map((s) => s.trim()) : trust);
}

/** Express's named ranges. */
const NAMED: Readonly<Record<string, readonly string[]>> = {
  loopback: ['127.0.0.1/8', '::1/128'],
  linklocal: ['169.254.0.0/16', 'fe80::/10'],
  uniquelocal: ['10.0.0.0/8', '172.16.0.0/12', '192.168.0.0/16', 'fc00::/7'],
};

type Range = [ipaddr.IPv4 | ipaddr.IPv6, number];

/** An IPv4-mapped IPv6 address as the IPv4 address it is. */
function plain(address: ipaddr.IPv4 | ipaddr.IPv6): ipaddr.IPv4 | ipaddr.IPv6 {
  return address.kind() === 'ipv6' && (address as ipaddr.IPv6).isIPv4MappedAddress()
    ? (address as ipaddr.IPv6).toIPv4Address()
    : address;
}

/** `'10.0.0.0/8'`, `'10.0.0.1'`, `'10.0.0.0/255.0.0.0'`, `'::1'`; a TypeError naming the entry otherwise. */
function parseRange(entry: string): Range {
  const slash = entry.lastIndexOf('/');
  const text = slash === -1 ? entry : entry.slice(0, slash);
  if (!ipaddr.isValid(text)) throw new TypeError(`invalid IP address in trustProxy: ${entry}`);
  const address = plain(ipaddr.parse(text));
  const most = address.kind() === 'ipv6' ? 128 : 32;
  if (slash === -1) return [address, most];
  const suffix = entry.slice(slash + 1);
  let bits: number | null = null;
  if (/^\d+$/.test(suffix)) bits = Number(suffix);
  else if (address.kind() === 'ipv4' && ipaddr.IPv4.isValidFourPartDecimal(suffix)) {
    bits = ipaddr.IPv4.parse(suffix).prefixLengthFromSubnetMask();
  }
  if (bits === null || bits > most) throw new TypeError(`invalid range on address in trustProxy: ${entry}`);
  return [address, bits];
}

/** The trust function of a list of addresses, ranges and names ('loopback', 'linklocal', 'uniquelocal'). */
export function compileTrustList(entries: readonly string[]): Trust {
  const ranges = entries.flatMap((entry) => NAMED[entry] ?? [entry]).map(parseRange);
  return (address) => {
    if (!ipaddr.isValid(address)) return false;
    const ip = plain(ipaddr.parse(address));
    for (const [range, bits] of ranges) {
      if (ip.kind() === range.kind() && ip.match(range as never, bits)) return true;
    }
    return false;
  };
}

/**
 * The client's address: the peer, then `X-Forwarded-For` entries from the right (the last proxy's) while
 * each hop so far is trusted; the first untrusted hop is the client, and the left-most entry when all are.
 */
export function clientAddress(peer: string, forwarded: string | undefined, trust: Trust): string {
  const hops = [peer];
  if (forwarded !== undefined) {
    const entries = forwarded.split(',').map((entry) => entry.trim());
    for (let i = entries.length - 1; i >= 0; i--) hops.push(entries[i] as string);
  }
  for (let hop = 0; hop < hops.length - 1; hop++) {
    if (!trust(hops[hop] as string, hop)) return hops[hop] as string;
  }
  return hops[hops.length - 1] as string;
}

/**
 * The address trust settings judge a peer on a Unix domain socket as: such a peer has no address, and is a
 * process on this host, as a client of the loopback interface is.
 */
export const UNIX_PEER = '127.0.0.1';

/**
 * Whether `socket` is a connection to a server listening on a Unix domain socket (or a Windows named pipe),
 * told by the server's address, a path: never by a missing peer address, which a TCP connection also
 * shows once it is reset.
 */
export function onUnixSocket(socket: unknown): boolean {
  const server = (socket as { server?: { address?: () => unknown } } | null | undefined)?.server;
  return typeof server?.address === 'function' && typeof server.address() === 'string';
}

/**
 * The client behind a proxy on a Unix domain socket: the peer is judged as `UNIX_PEER` at hop 0, then the
 * `X-Forwarded-For` entries from the right as `clientAddress` reads them. Undefined when the setting does
 * not trust that peer, or no entry came: the request then has no client address.
 */
export function unixSocketClient(forwarded: string | undefined, trust: Trust): string | undefined {
  if (forwarded === undefined || !trust(UNIX_PEER, 0)) return undefined;
  return clientAddress(UNIX_PEER, forwarded, trust);
}
