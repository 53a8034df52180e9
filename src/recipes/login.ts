// Login recipe: the four rules that throttle password guessing per OWASP and NIST SP 800-63B §5.2.2.

import { assertKnownFields, fieldsOf } from '../config/known-fields.js';
import { mustBe, refuse } from '../config/refuse.js';
import { LIMITER_DEFAULTS } from '../defaults.js';
import { createReader, normalizeIdentity, type Reader } from '../keys/extractors.js';
import type { Duration, KeyExtractor, LockoutSpec, MatchSpec, RequestInfo, Rule } from '../types.js';

/** Options of `loginRules`. Every figure has a default; the rule names are `<prefix>-pair` and so on. */
export interface LoginRulesOptions {
  /**
   * Requests that are login attempts. Every endpoint that checks a password must be matched (an
   * attacker uses whichever is not), e.g. `{ method: 'POST', path: ['/login', '/api/login'] }`. `null`:
   * every request the middleware sees, for a middleware mounted on the login route itself.
   * @default 'POST /login'
   */
  match?: string | MatchSpec | null;
  /**
   * Where the username is: a key form (`'body.username'`, `'body.email'`, `'header:x-user'`, a
   * function, or an array such as `['body.tenant', 'body.username']`). Its value is normalized (NFKC,
   * trimmed, lower-cased, as `normalizeIdentity`); a request without a username (missing, `null`, blank)
   * falls under the per-IP rules only (`login-ip`, and `login-pair` on the IP alone); one whose username
   * is an array or an object is refused (`RateLimitRequestError` `ERR_KEY_VALUE`: HTTP 400), and a
   * boolean or a number keys as its text.
   * @default 'body.username'
   */
  username?: string | KeyExtractor | ReadonlyArray<string | KeyExtractor>;
  /** Rule names are `<prefix>-pair`, `<prefix>-ip`, `<prefix>-account`, `<prefix>-account-cap`. @default 'login' */
  prefix?: string;
  /** Failed attempts per username + IP that lock the pair. @default 5 */
  pairLimit?: number;
  /** The pair's fixed window, from its first counted failure. @default '15m' */
  pairWindow?: Duration;
  /** How long the pair stays locked: doubling on each repeated lockout up to an hour, forgotten a day after the last. @default { duration: '1m', escalate: 2, maxDuration: '1h', forgetAfter: '24h' } */
  pairLockout?: LockoutSpec;
  /** Failed attempts per client IP (IPv6 per /56) before that IP is blocked. @default 100 */
  ipLimit?: number;
  /** The per-IP window (sliding: never more than `ipLimit` failures in any such span), also how long the block lasts. @default '1d' */
  ipWindow?: Duration;
  /** Failed attempts per account (all IPs) admitted per `accountWindow` once the burst is spent (GCRA). @default 10 */
  accountLimit?: number;
  /** The span in which `accountLimit` failures are admitted: one every `accountWindow / accountLimit`. @default '1h' */
  accountWindow?: Duration;
  /** Failed attempts per account admitted at once before the slowdown starts. @default 10 */
  accountBurst?: number;
  /** Consecutive failed attempts per account after which it is locked until reset (NIST: at most 100). @default 100 */
  accountCap?: number;
  /** The cap's fixed window from the first failure (a success clears it), and the length of the cap's lock. @default '30d' */
  accountCapWindow?: Duration;
  /**
   * True when the request comes from a device the account's owner logged in from before (OWASP device
   * cookie). Such requests skip `<prefix>-account`, so an attacker elsewhere cannot slow the owner down;
   * the pair, IP and cap rules still apply. `username` is the normalized username the rules key on (a
   * composite form's parts joined by `|`, each escaped). Not asked when the request has none the rules
   * can tell apart (a body nothing parsed, a name over `MAX_KEY_LENGTH`): the account rules then apply.
   * A throw fails the request (nothing is counted). @default () => false
   */
  isTrustedDevice?: (req: RequestInfo, username: string) => boolean;
  /**
   * Requests from the owner's trusted devices (`isTrustedDevice`) skip `<prefix>-account-cap` too, so a
   * stranger who knows only the username cannot lock the owner out of her own browser for 30 days.
   * The trade-off: whoever holds a trusted device for the account (a stolen laptop, a copied device
   * cookie, a shared computer the owner once used) guesses with no per-account cap, held only by the pair
   * rule (5 failures per 15 minutes, locks up to an hour) and the IP rule (100 a day); NIST SP 800-63B's
   * cap of 100 then counts only the other devices. Leave it off unless a device is trusted only after a
   * second factor, and device trust can be revoked. @default false
   */
  trustedDeviceSkipsCap?: boolean | undefined;
}

/** The recipe's figures when no option is given. */
export const LOGIN_DEFAULTS = {
  match: 'POST /login',
  username: 'body.username',
  prefix: 'login',
  pairLimit: 5,
  pairWindow: '15m',
  pairLockout: { duration: '1m', escalate: 2, maxDuration: '1h', forgetAfter: '24h' },
  ipLimit: 100,
  ipWindow: '1d',
  accountLimit: 10,
  accountWindow: '1h',
  accountBurst: 10,
  accountCap: 100,
  accountCapWindow: '30d',
} as const;

const LOGIN_FIELDS = fieldsOf<LoginRulesOptions>({
  match: true,
  username: true,
  prefix: true,
  pairLimit: true,
  pairWindow: true,
  pairLockout: true,
  ipLimit: true,
  ipWindow: true,
  accountLimit: true,
  accountWindow: true,
  accountBurst: true,
  accountCap: true,
  accountCapWindow: true,
  isTrustedDevice: true,
  trustedDeviceSkipsCap: true,
});

/** NIST SP 800-63B §5.2.2: "no more than 100" consecutive failed attempts on a single account. */
const NIST_MAX_CONSECUTIVE_FAILURES = 100;

/**
 * Rules that throttle password guessing on a login route, to give `createLimiter` (alone or with other
 * rules). Every rule counts failures only (`countOn: 'failure'`: a 4xx/5xx answer, or
 * `limiter.report(decision, 'failure')`), and none looks at whether the account exists, so an unknown
 * username is counted, answered and timed exactly like a real one.
 *
 * - `login-pair` (username + IP): 5 failures in 15 minutes lock that pair for 1 minute, doubling on
 *   each repeated lockout up to 1 hour; a success clears the count (NIST: "disregard any previous
 *   failed attempts for that user from the same IP address").
 * - `login-ip`: 100 failures per IP in any day block that IP for a day (password spraying); also for
 *   requests without a usable username.
 * - `login-account` (username, all IPs): failures beyond a burst of 10 are slowed to 10 an hour (one
 *   every 6 minutes), never locked, so a stranger cannot lock the owner out (OWASP: lockout DoS).
 *   Requests from the owner's trusted devices (`isTrustedDevice`) skip it.
 * - `login-account-cap`: at most 100 consecutive failures per account (NIST SP 800-63B §5.2.2); the
 *   next attempt locks the account for 30 days, until an operator or the password-reset flow calls
 *   `limiter.reset('login-account-cap', userKey(normalizeIdentity(username)))`. A success clears the count.
 *
 * What an attacker can do to the owner: from a trusted device, nothing but the cap, which takes at
 * least 10 + 90 × 6 min = 9 hours of failures without the owner logging in, and then refuses her, on
 * every device, for 30 days (unless `trustedDeviceSkipsCap`); from a new device, each attempt waits at
 * most one slowdown interval (6 minutes, `Retry-After` ≤ 360 s).
 *
 * Sources: OWASP Authentication Cheat Sheet (account lockout, generic errors) and Credential Stuffing
 * Prevention Cheat Sheet; OWASP "Slow Down Online Guessing Attacks with Device Cookies"; NIST SP
 * 800-63B §5.2.2 "Rate Limiting (Throttling)".
 *
 * @example
 * const limiter = createLimiter({ store, rules: loginRules({ isTrustedDevice: devices.isTrusted }) });
 * app.use(rateLimit(limiter, { headers: false }));
 */
export function loginRules(options: LoginRulesOptions = {}): Rule[] {
  assertKnownFields(options, LOGIN_FIELDS, 'loginRules');
  const o = { ...LOGIN_DEFAULTS, ...definedOnly(options) };
  if (
    !Number.isSafeInteger(o.accountCap) ||
    o.accountCap < 1 ||
    o.accountCap > NIST_MAX_CONSECUTIVE_FAILURES
  ) {
    refuse(
      'ERR_OPTION',
      'loginRules',
      mustBe(
        'accountCap',
        `an integer from 1 to ${NIST_MAX_CONSECUTIVE_FAILURES} (NIST SP 800-63B §5.2.2)`,
        o.accountCap,
      ),
    );
  }
  const trusted = options.isTrustedDevice ?? (() => false);
  if (typeof trusted !== 'function') {
    refuse(
      'ERR_OPTION',
      'loginRules',
      mustBe('isTrustedDevice', 'a function (req, username) => boolean', trusted),
    );
  }
  const skipsCap = options.trustedDeviceSkipsCap ?? false;
  if (typeof skipsCap !== 'boolean') {
    refuse('ERR_OPTION', 'loginRules', mustBe('trustedDeviceSkipsCap', 'true or false', skipsCap));
  }
  const usernameKey = o.username as Rule['key'];
  let username: Reader;
  try {
    username = createReader(usernameKey, {
      ipv6Subnet: LIMITER_DEFAULTS.ipv6Subnet,
      normalize: normalizeIdentity,
      rule: `${o.prefix}-account`,
    });
  } catch (error) {
    refuse(
      'ERR_KEY',
      'loginRules',
      mustBe('username', `a key form such as 'body.username' (${(error as Error).message})`, o.username),
    );
  }
  // The username as the account rules key it, unless the device is trusted for it: its text (normalized; a
  // composite's parts joined), or a reserved key (a body nothing parsed, a name past MAX_KEY_LENGTH), counted as
  // the cap counts it and never handed to isTrustedDevice as if it were someone's name. The function returns
  // the ReservedKey object itself, which the limiter keys on as such: a string would be a user's text.
  const accountKey = ((req: RequestInfo) => {
    const name = username(req);
    return name === undefined || (typeof name === 'string' && trusted(req, name) === true) ? undefined : name;
  }) as KeyExtractor;
  const match = o.match === null ? {} : { match: o.match };
  const failures = { countOn: 'failure', ...match } as const;

  return [
    {
      name: `${o.prefix}-pair`,
      ...failures,
      key: [...(Array.isArray(usernameKey) ? usernameKey : [usernameKey]), 'ip'],
      normalize: true,
      limit: o.pairLimit,
      window: { type: 'fixed', size: o.pairWindow },
      resetOnSuccess: true,
      lockout: { ...o.pairLockout },
    },
    {
      name: `${o.prefix}-ip`,
      ...failures,
      key: 'ip',
      limit: o.ipLimit,
      window: { type: 'sliding', size: o.ipWindow },
      lockout: { duration: o.ipWindow },
    },
    {
      name: `${o.prefix}-account`,
      ...failures,
      // The username exactly as the cap keys it, unless the device is trusted for it. No `normalize` here:
      // the text is normalized already.
      key: accountKey,
      // A request without a username is the IP rule's: it passes these, and nothing warns.
      missing: 'skip',
      limit: o.accountLimit,
      window: { type: 'gcra', size: o.accountWindow, burst: o.accountBurst },
    },
    {
      name: `${o.prefix}-account-cap`,
      ...failures,
      // As login-account's key, when trusted devices skip the cap; else the username form itself.
      ...(skipsCap ? { key: accountKey } : { key: usernameKey, normalize: true }),
      missing: 'skip',
      limit: o.accountCap,
      window: { type: 'fixed', size: o.accountCapWindow },
      resetOnSuccess: true,
      lockout: { duration: o.accountCapWindow },
    },
  ];
}

/** Drops keys whose value is undefined, so `{ pairLimit: undefined }` keeps the default. */
export function definedOnly<T extends object>(options: T): Partial<T> {
  return Object.fromEntries(Object.entries(options).filter(([, v]) => v !== undefined)) as Partial<T>;
}
