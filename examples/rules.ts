// What both example apps share: their rules (login lockout, SMS codes, a general API limit), options and fake users.
import type { Rule, Store } from '../src/index.js';

export interface ExampleRuleOptions {
  /** Where the SMS day count resets at midnight. @default 'Asia/Shanghai' */
  timeZone?: string;
  /** Requests per minute per client on `/api`. @default 100 */
  apiPerMinute?: number;
}

/**
 * Login: 5 consecutive failures per username + client IP lock that pair for 1 minute, doubling on each
 * repeated lockout up to 1 hour; a success clears the count. Only failures (4xx/5xx) stay counted, so
 * the account's owner logging in from elsewhere is unaffected. A per-IP daily ceiling on failures also
 * covers requests without a username.
 */
export const loginRules: Rule[] = [
  {
    name: 'login-pair',
    match: 'POST /login',
    key: ['body.username', 'ip'],
    normalize: true,
    limit: 5,
    window: { type: 'fixed', size: '15m' },
    countOn: 'failure',
    resetOnSuccess: true,
    lockout: { duration: '1m', escalate: 2, maxDuration: '1h' },
  },
  {
    name: 'login-ip',
    match: 'POST /login',
    key: 'ip',
    limit: 100,
    window: { type: 'fixed', size: '1d' },
    countOn: 'failure',
  },
];

/**
 * Verification codes: per phone number 1 per minute and 10 per calendar day (the day resets at midnight
 * in `timeZone`). Only codes that were sent (2xx/3xx) are charged.
 */
export function smsRules(timeZone = 'Asia/Shanghai'): Rule[] {
  return [
    {
      name: 'sms-minute',
      match: 'POST /sms/code',
      key: 'body.phone',
      limit: 1,
      window: { type: 'fixed', size: '1m' },
      countOn: 'success',
    },
    {
      name: 'sms-day',
      match: 'POST /sms/code',
      key: 'body.phone',
      limit: 10,
      window: { type: 'calendar', unit: 'day', timezone: timeZone },
      countOn: 'success',
    },
  ];
}

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

export function exampleRules(options: ExampleRuleOptions = {}): Rule[] {
  return [...loginRules, ...smsRules(options.timeZone), ...apiRules(options.apiPerMinute)];
}

export interface ExampleAppOptions extends ExampleRuleOptions {
  /** Where counts live (a `RedisStore` to share them between processes). @default new MemoryStore() */
  store?: Store;
  /** Number of reverse proxies in front of the app, whose `X-Forwarded-For` entries are believed. @default 0 */
  trustProxy?: number;
  /** Sends a verification code; a throw answers 503 and the send is not charged. @default does nothing */
  sendCode?: (phone: string) => void | Promise<void>;
  /** Epoch-ms clock for `X-RateLimit-Reset` (give the store's clock in tests). @default Date.now */
  clock?: () => number;
}

/** A fake user table: one user, `alice` / `correct-horse`. A real app stores password hashes. */
export const USERS: ReadonlyMap<string, string> = new Map([['alice', 'correct-horse']]);

/** True when the credentials are right. Unknown users fail exactly like wrong passwords. */
export function checkPassword(username: unknown, password: unknown): boolean {
  return (
    typeof username === 'string' &&
    typeof password === 'string' &&
    USERS.get(username.trim().toLowerCase()) === password
  );
}

/** E.164 phone numbers only: `+` and 7 to 15 digits. */
export function isPhone(value: unknown): value is string {
  return typeof value === 'string' && /^\+[1-9]\d{6,14}$/.test(value);
}
