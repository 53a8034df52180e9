// Device cookies (OWASP "Slow Down Online Guessing Attacks with Device Cookies"): a signed cookie set on a
// successful login marks the browser as one its account's owner used before.
import { createHmac, randomBytes, timingSafeEqual } from 'node:crypto';
import type { RequestInfo } from '../src/index.js';

/** `__Host-`: only set over HTTPS, for the whole site, never by a subdomain. */
export const DEVICE_COOKIE = '__Host-device';

export interface DeviceCookieOptions {
  /**
   * HMAC-SHA256 key, at least 32 bytes. Every process must share it (load it from your secrets store);
   * changing it makes every device untrusted again. @default 32 random bytes (this process only)
   */
  secret?: Buffer | string | undefined;
  /** How long a device stays trusted after its last successful login. @default 30 days */
  maxAgeMs?: number | undefined;
  /** Epoch-ms clock, for tests. @default Date.now */
  clock?: (() => number) | undefined;
}

export interface DeviceCookies {
  /** The `Set-Cookie` value to send with a successful login of `username` (normalized). */
  issue(username: string): string;
  /** `isTrustedDevice` for `loginRules`: the request carries a valid, unexpired cookie for `username`. */
  isTrusted(req: RequestInfo, username: string): boolean;
}

/**
 * Cookie value `<username, base64url>.<nonce>.<expiry, epoch s>.<HMAC of the rest>`, compared in
 * constant time. A new cookie (new nonce, new expiry) on every successful login; one account per cookie.
 */
export function deviceCookies(options: DeviceCookieOptions = {}): DeviceCookies {
  const secret = options.secret ?? randomBytes(32);
  if (Buffer.byteLength(secret) < 32) throw new Error('deviceCookies: secret must be at least 32 bytes');
  const maxAgeMs = options.maxAgeMs ?? 30 * 24 * 60 * 60 * 1000;
  const clock = options.clock ?? Date.now;
  const sign = (payload: string) => createHmac('sha256', secret).update(`v1.${payload}`).digest();

  return {
    issue(username) {
      const expires = Math.floor((clock() + maxAgeMs) / 1000);
      const payload = `${Buffer.from(username).toString('base64url')}.${randomBytes(16).toString('base64url')}.${expires}`;
      const value = `${payload}.${sign(payload).toString('base64url')}`;
      return `${DEVICE_COOKIE}=${value}; Max-Age=${Math.floor(maxAgeMs / 1000)}; Path=/; Secure; HttpOnly; SameSite=Lax`;
    },
    isTrusted(req, username) {
      const value = readCookie(req.headers.cookie, DEVICE_COOKIE);
      const parts = value?.split('.');
      if (parts?.length !== 4) return false;
      const [user, nonce, expires, mac] = parts as [string, string, string, string];
      const given = Buffer.from(mac, 'base64url');
      const expected = sign(`${user}.${nonce}.${expires}`);
      if (given.length !== expected.length || !timingSafeEqual(given, expected)) return false;
      return Number(expires) * 1000 > clock() && Buffer.from(user, 'base64url').toString() === username;
    },
  };
}

/** The value of cookie `name` in a Cookie header, or undefined. */
function readCookie(header: string | string[] | undefined, name: string): string | undefined {
  const text = Array.isArray(header) ? header.join('; ') : header;
  if (text === undefined) return undefined;
  for (const pair of text.split(';')) {
    const eq = pair.indexOf('=');
    if (eq > 0 && pair.slice(0, eq).trim() === name) return pair.slice(eq + 1).trim();
  }
  return undefined;
}
