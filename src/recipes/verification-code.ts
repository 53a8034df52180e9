// Verification-code recipe: limits on sending SMS or e-mail codes, per destination, per IP and overall.

import { assertKnownFields, fieldsOf } from '../config/known-fields.js';
import { mustBe, refuse } from '../config/refuse.js';
import { nfkc } from '../keys/material.js';
import type { KeyExtractor, MatchSpec, Rule } from '../types.js';
import { definedOnly } from './login.js';

/** Options of `verificationCodeRules`. Rule names are `<prefix>-minute`, `-day`, `-ip` and `-global`. */
export interface VerificationCodeRulesOptions {
  /**
   * Requests that send a code. `null`: every request the middleware sees, for a middleware mounted on
   * the route itself. @default 'POST /sms/code'
   */
  match?: string | MatchSpec | null;
  /**
   * Where the phone number or e-mail address is: a key form such as `'body.email'`. Missing, empty or `null`:
   * the per-destination rules do not apply to the request; an object or array is refused (400).
   * @default 'body.phone'
   */
  destination?: string | KeyExtractor | ReadonlyArray<string | KeyExtractor>;
  /**
   * Turns a destination into its key, so formatting variants of one number or address share the
   * count. Send codes to the same normalized form (validate it, e.g. as E.164). @default normalizeDestination
   */
  normalize?: (value: string) => string;
  /** Rule names are `<prefix>-minute` and so on; give each code endpoint its own. @default 'code' */
  prefix?: string;
  /** Codes per destination per minute (the resend cooldown). @default 1 */
  perMinute?: number;
  /** Codes per destination per calendar day, the count resetting at midnight in `timeZone`. @default 10 */
  perDay?: number;
  /** IANA time zone of the day's midnight, e.g. `'Asia/Shanghai'`. @default 'UTC' */
  timeZone?: string;
  /** Codes per client IP (IPv6 per /56) in any hour, whatever the destinations (SMS pumping). @default 20 */
  perIpPerHour?: number;
  /** Codes sent in any hour by the whole endpoint, a ceiling on cost. @default 1000 */
  globalPerHour?: number;
}

/** The recipe's figures when no option is given. */
export const VERIFICATION_CODE_DEFAULTS = {
  match: 'POST /sms/code',
  destination: 'body.phone',
  prefix: 'code',
  perMinute: 1,
  perDay: 10,
  timeZone: 'UTC',
  perIpPerHour: 20,
  globalPerHour: 1000,
} as const;

const VERIFICATION_CODE_FIELDS = fieldsOf<VerificationCodeRulesOptions>({
  match: true,
  destination: true,
  normalize: true,
  prefix: true,
  perMinute: true,
  perDay: true,
  timeZone: true,
  perIpPerHour: true,
  globalPerHour: true,
});

/**
 * The key of a phone number or e-mail address: NFKC (in linear time, see `normalizeIdentity`) and
 * trimmed; then an address (it has an `@`) is
 * lower-cased, and a number loses its spaces, dashes, dots and parentheses.
 * `' +86 (138) 0013-8000 '` → `'+8613800138000'`, `'Alice@Example.COM'` → `'alice@example.com'`.
 */
export function normalizeDestination(value: string): string {
  const text = nfkc(value).trim();
  if (text.includes('@')) return text.toLowerCase();
  return text.replace(/[\s.()\-\u2010-\u2015\u2212]/g, '');
}

/**
 * Rules that limit sending verification codes (SMS or e-mail), to give `createLimiter`:
 *
 * - `code-minute`: 1 code per destination per minute;
 * - `code-day`: 10 per destination per calendar day, resetting at midnight in `timeZone`;
 * - `code-ip`: 20 per client IP in any hour, across destinations (SMS pumping: many numbers, one client);
 * - `code-global`: 1000 in any hour for the endpoint as a whole, a ceiling on cost. Reaching it denies
 *   everyone until the hour has slid on: alert on `limited` events of this rule.
 *
 * All count only successes (`countOn: 'success'`): a code that failed to send (5xx) or a request the
 * app refused (4xx) is not charged. The hourly rules use sliding windows, which never admit more than
 * the limit in any hour. A request without a destination is limited by the IP and global rules only;
 * the app must refuse it.
 *
 * @example
 * rules: [...verificationCodeRules({ match: 'POST /sms/code', timeZone: 'Asia/Shanghai' }),
 *   ...verificationCodeRules({ prefix: 'email-code', match: 'POST /email/code', destination: 'body.email' })]
 */
export function verificationCodeRules(options: VerificationCodeRulesOptions = {}): Rule[] {
  assertKnownFields(options, VERIFICATION_CODE_FIELDS, 'verificationCodeRules');
  const o = { ...VERIFICATION_CODE_DEFAULTS, ...definedOnly(options) };
  const normalize = options.normalize ?? normalizeDestination;
  if (typeof normalize !== 'function') {
    refuse(
      'ERR_OPTION',
      'verificationCodeRules',
      mustBe('normalize', 'a function (value) => string', normalize),
    );
  }
  const match = o.match === null ? {} : { match: o.match };
  const success = { countOn: 'success', ...match } as const;
  const destination = o.destination as Rule['key'];
  return [
    {
      name: `${o.prefix}-minute`,
      ...success,
      key: destination,
      // A request without the destination is the IP and global rules': it passes these, and nothing warns
      // (one endpoint may take a phone or an e-mail address, each with rules of its own).
      missing: 'skip',
      normalize,
      limit: o.perMinute,
      window: { type: 'fixed', size: '1m' },
    },
    {
      name: `${o.prefix}-day`,
      ...success,
      key: destination,
      missing: 'skip',
      normalize,
      limit: o.perDay,
      window: { type: 'calendar', unit: 'day', timezone: o.timeZone },
    },
    {
      name: `${o.prefix}-ip`,
      ...success,
      key: 'ip',
      limit: o.perIpPerHour,
      window: { type: 'sliding', size: '1h' },
    },
    {
      name: `${o.prefix}-global`,
      ...success,
      key: () => 'all',
      limit: o.globalPerHour,
      window: { type: 'sliding', size: '1h' },
    },
  ];
}
