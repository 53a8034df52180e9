// The 'ip' key form: a request's client address as its key (canonical IPv4, IPv4-mapped IPv6 as IPv4,
// other IPv6 by prefix, /56 by default), or the unresolved-IP key. Parsing by ipaddr.js.
import ipaddr from 'ipaddr.js';
import type { RequestInfo } from '../types.js';
import { quoted, UNRESOLVED_IP_WARNING, warnOnce } from '../warnings.js';
import { type ReservedKey, UNRESOLVED_IP, UNRESOLVED_IP_KEY } from './material.js';

/**
 * `'ip'`: the canonical address, or `UNRESOLVED_IP` (with a one-time warning) when there is none.
 * `label`: the rule, for the warning (`rule "api": `).
 */
export function ipReader(ipv6Subnet: number, label: string): (req: RequestInfo) => string | ReservedKey {
  const warn = warnOnce(UNRESOLVED_IP_WARNING);
  return (req) => {
    const raw = req.ip;
    const key = ipKey(raw, ipv6Subnet);
    if (key !== undefined) return key;
    const why =
      raw === undefined || raw === ''
        ? 'a request has no client address (the client reset the connection before it was read, or the server listens on a Unix socket)'
        : `the client address ${quoted(raw)} is not an IP address (an entry a trusted proxy wrote into X-Forwarded-For)`;
    warn(
      `${label}${why}; such requests share the key '${UNRESOLVED_IP_KEY}', so the rule still limits them, together`,
    );
    return UNRESOLVED_IP;
  };
}

/**
 * A rule keyed on `'ip'` alone: the identity of each request. An address's key (ipKey: ASCII, at most 44
 * characters, never a leading '#') is its own identity, as userKey would find it: the usual rule's key
 * goes through no more checks.
 */
export function ipIdentity(ipv6Subnet: number, label: string): (req: RequestInfo) => string {
  const address = ipReader(ipv6Subnet, label);
  return (req) => {
    const key = address(req);
    return typeof key === 'string' ? key : key.identity;
  };
}

/**
 * The key for a client address, or undefined when it is not an IP address. Strips brackets, an IPv4
 * port, and an IPv6 zone; parses to bytes, so `::ffff:cb00:710a` and `203.0.113.10` share a key while
 * `2001:db8::1.2.3.4` stays IPv6.
 */
export function ipKey(raw: unknown, ipv6Subnet: number): string | undefined {
  if (typeof raw !== 'string' || raw.length === 0 || raw.length > 100) return undefined;
  // The usual address, already in canonical form: its own key, without parsing it into bytes.
  if (isCanonicalIPv4(raw)) return raw;
  let text = raw.trim();
  if (text.startsWith('[')) {
    const close = text.indexOf(']');
    if (close < 0) return undefined;
    text = text.slice(1, close);
  } else if (/^\d{1,3}(\.\d{1,3}){3}:\d+$/.test(text)) {
    text = text.slice(0, text.lastIndexOf(':'));
  }
  const zone = text.indexOf('%');
  if (zone >= 0) text = text.slice(0, zone);
  if (ipaddr.IPv4.isValidFourPartDecimal(text)) return ipaddr.IPv4.parse(text).toString();
  if (!ipaddr.IPv6.isValid(text)) return undefined;
  const v6 = ipaddr.IPv6.parse(text);
  if (v6.isIPv4MappedAddress()) return v6.toIPv4Address().toString();
  if (ipv6Subnet >= 128) return v6.toString();
  const bytes = v6.toByteArray();
  for (let bit = ipv6Subnet; bit < 128; bit++) {
    const index = bit >> 3;
    bytes[index] = (bytes[index] as number) & ~(0x80 >> (bit & 7));
  }
  return `${ipaddr.fromByteArray(bytes).toString()}/${ipv6Subnet}`;
}

/** 0 .. 9 as char codes. */
const ZERO = 48;
const NINE = 57;
const DOT = 46;

/**
 * Whether `text` is four decimal numbers 0-255 joined by dots, without leading zeros: exactly how
 * ipaddr.js prints the address it parses to, so the text is its own key.
 */
function isCanonicalIPv4(text: string): boolean {
  const length = text.length;
  if (length < 7 || length > 15) return false;
  let parts = 0;
  let at = 0;
  while (at <= length) {
    const start = at;
    let value = 0;
    while (at < length) {
      const code = text.charCodeAt(at);
      if (code === DOT) break;
      if (code < ZERO || code > NINE) return false;
      value = value * 10 + (code - ZERO);
      at++;
    }
    const digits = at - start;
    if (digits === 0 || digits > 3 || value > 255) return false;
    if (digits > 1 && text.charCodeAt(start) === ZERO) return false;
    parts++;
    if (at === length) return parts === 4;
    if (parts === 4) return false;
    at++;
  }
  return false;
}
