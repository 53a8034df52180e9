// The soak's rules: every window type, a lockout, the login and verification-code recipes, all with short
// windows so that ten minutes hold thousands of windows.
import { loginRules, type Rule, verificationCodeRules } from '../../src/index.js';

/** Rules of the HTTP-shaped limiter (`check(req)` and `report`): plain rules plus both recipes. */
export function apiRules(): Rule[] {
  return [
    // GET /api/items: two identities in one all-or-nothing request (two slots on a Cluster).
    {
      name: 'items-client',
      match: 'GET /api/items',
      key: 'header:x-client',
      limit: 10,
      window: { type: 'fixed', size: '3s' },
    },
    {
      name: 'items-ip',
      match: 'GET /api/items',
      key: 'ip',
      limit: 8,
      window: { type: 'sliding-log', size: '2s' },
    },
    {
      name: 'search-client',
      match: 'GET /api/search',
      key: 'header:x-client',
      limit: 12,
      window: { type: 'sliding', size: '4s', buckets: 4 },
    },
    {
      name: 'search-ip',
      match: 'GET /api/search',
      key: 'ip',
      limit: 40,
      window: { type: 'calendar', unit: 'minute' },
    },
    ...loginRules({
      match: 'POST /login',
      pairWindow: '20s',
      pairLockout: { duration: '2s', escalate: 2, maxDuration: '8s', forgetAfter: '20s' },
      ipLimit: 25,
      ipWindow: '10s',
      accountLimit: 6,
      accountWindow: '30s', // one failure per 5 s once the burst is spent: an exact number of µs
      accountBurst: 4,
      accountCap: 12,
      accountCapWindow: '12s',
    }),
    ...verificationCodeRules({
      match: 'POST /sms/code',
      perMinute: 1,
      perDay: 10,
      perIpPerHour: 20,
      globalPerHour: 3000,
    }),
  ];
}

/** Rules of the service limiter (`consume(rule, key, cost)`, no HTTP). */
export function serviceRules(): Rule[] {
  return [
    { name: 'points-token', key: 'user', limit: 4, window: { type: 'token-bucket', size: '2s', burst: 8 } },
    { name: 'points-gcra', key: 'user', limit: 5, window: { type: 'gcra', size: '1s', burst: 3 } },
    {
      name: 'guard',
      key: 'user',
      limit: 5,
      window: { type: 'fixed', size: '2s' },
      lockout: { duration: '3s', escalate: 2, maxDuration: '12s', forgetAfter: '20s' },
    },
    // Fresh keys only: the probe that tells whether decisions come from Redis again.
    { name: 'probe', key: 'user', limit: 1_000_000, window: { type: 'fixed', size: '1m' } },
  ];
}

/** Rules that place locks, whose `locked()` listing is compared with the locks in force at the end. */
export const LOCKOUT_RULES: ReadonlyArray<{ limiter: 'api' | 'service'; rule: string }> = [
  { limiter: 'api', rule: 'login-pair' },
  { limiter: 'api', rule: 'login-ip' },
  { limiter: 'api', rule: 'login-account-cap' },
  { limiter: 'service', rule: 'guard' },
];
