// What both example apps share: options, the login routes and failure answer, the API rule, fake accounts, validators.
import { randomBytes, scrypt, timingSafeEqual } from 'node:crypto';
import {
  type Limiter,
  type LimiterOptions,
  MAX_KEY_LENGTH,
  type MatchSpec,
  normalizeIdentity,
  type Rule,
  type Store,
} from '../src/index.js';

export interface ExampleRuleOptions {
  /** Where the verification-code day counts reset at midnight. @default 'Asia/Shanghai' */
  timeZone?: string;
  /** Requests per minute per client on `/api`. @default 100 */
  apiPerMinute?: number;
  /** The login recipe's `trustedDeviceSkipsCap`: the owner's trusted browser is never held at the cap. @default false */
  trustedDeviceSkipsCap?: boolean;
}

export interface ExampleAppOptions extends ExampleRuleOptions {
  /** Where counts live (a `RedisStore` to share them between processes). @default new MemoryStore() */
  store?: Store;
  /** Number of reverse proxies in front of the app, whose `X-Forwarded-For` entries are believed. @default 0 */
  trustProxy?: number;
  /** Sends a verification code; a throw answers 503 and the send is not charged. @default does nothing */
  sendCode?: (destination: string) => void | Promise<void>;
  /** Epoch-ms clock for `X-RateLimit-Reset` and device-cookie expiry (give the store's clock in tests). @default Date.now */
  clock?: () => number;
  /** HMAC key of the device cookies, at least 32 bytes, shared by every process. @default random per app */
  deviceSecret?: Buffer | string;
  /** scrypt cost (N) of the fake password hashes; production: see the OWASP Password Storage Cheat Sheet. @default 16384 */
  scryptCost?: number;
  /** Further options of both limiters, such as `storeTimeout` or `onStoreError`. @default {} */
  limiterOptions?: Omit<LimiterOptions, 'store' | 'rules'>;
}

/** An example app with its two limiters: `loginLimiter` for the login rules, `limiter` for the rest. */
export interface ExampleApp<App> {
  app: App;
  limiter: Limiter;
  loginLimiter: Limiter;
}

/** Every endpoint that checks a password shares one set of counters, or an attacker alternates them. */
export const LOGIN_ROUTES: MatchSpec = { method: 'POST', path: ['/login', '/rpc/login'] };

/** One answer for a wrong password and an unknown user alike: status, body and headers reveal nothing. */
export const LOGIN_FAILED = { error: 'invalid username or password' } as const;

/** General API: `apiPerMinute` requests per minute per client IP, smoothed by GCRA (no burst at a window edge). */
export function apiRules(apiPerMinute = 100): Rule[] {
  return [
    {
      name: 'api',
      match: { method: 'GET', path: '/api{/*rest}' },
      key: 'ip',
      limit: apiPerMinute,
      window: { type: 'gcra', size: '1m' },
    },
  ];
}

/** Fake accounts: one user, `alice` / `correct-horse`. A real app loads password hashes from its database. */
export const USERS: ReadonlyMap<string, string> = new Map([['alice', 'correct-horse']]);

export interface Accounts {
  /** True when the credentials are right. Unknown users cost the same scrypt work and fail the same way. */
  verify(username: unknown, password: unknown): Promise<boolean>;
}

export function createAccounts(cost = 16384): Accounts {
  const hash = (password: string, salt: Buffer) =>
    new Promise<Buffer>((resolve, reject) =>
      scrypt(password, salt, 32, { N: cost, maxmem: 2048 * cost }, (error, key) =>
        error ? reject(error) : resolve(key),
      ),
    );
  const records = new Map<string, Promise<{ salt: Buffer; hash: Buffer }>>();
  const record = (password: string) => {
    const salt = randomBytes(16);
    const made = hash(password, salt).then((key) => ({ salt, hash: key }));
    made.catch(() => {}); // a bad cost surfaces on the first login (a 500), not as an unhandled rejection
    return made;
  };
  // Looked up by the normalized username, the very string the rate-limit rules key on.
  for (const [name, password] of USERS) records.set(normalizeIdentity(name), record(password));
  const nobody = record(randomBytes(16).toString('base64url'));
  return {
    async verify(username, password) {
      if (typeof username !== 'string' || typeof password !== 'string') return false;
      // A name longer than the rate limiter reads is counted on its shared '#oversized' key: never let
      // one stand for an account ('alice' padded with 9000 spaces), or padding buys a fresh budget.
      const known = username.length > MAX_KEY_LENGTH ? undefined : records.get(normalizeIdentity(username));
      const { salt, hash: expected } = await (known ?? nobody);
      const ok = timingSafeEqual(await hash(password, salt), expected);
      return ok && known !== undefined;
    },
  };
}

/** E.164 phone numbers only: `+` and 7 to 15 digits. */
export function isPhone(value: unknown): value is string {
  return typeof value === 'string' && /^\+[1-9]\d{6,14}$/.test(value);
}

/** A plausible e-mail address, at most 254 characters. */
export function isEmail(value: unknown): value is string {
  return typeof value === 'string' && value.length <= 254 && /^[^\s@]+@[^\s@]+\.[^\s@]+$/.test(value);
}
