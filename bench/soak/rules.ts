// The soak's rules: every window type, a lockout, the login and verification-code recipes, grouped rules,
// concurrency and settled costs, all with short windows so that ten minutes hold thousands of windows.
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
    // GET /api/feed: four rules on the client's key form, grouped with items-client into one record per
    // client on Redis (docs/stores.md, "One key per identity"), each audited as a rule of its own.
    {
      name: 'feed-burst',
      match: 'GET /api/feed',
      key: 'header:x-client',
      limit: 5,
      window: { type: 'fixed', size: '2s' },
    },
    {
      name: 'feed-minute',
      match: 'GET /api/feed',
      key: 'header:x-client',
      limit: 40,
      window: { type: 'calendar', unit: 'minute' },
    },
    {
      name: 'feed-rate',
      match: 'GET /api/feed',
      key: 'header:x-client',
      limit: 4,
      window: { type: 'gcra', size: '1s', burst: 6 },
    },
    {
      name: 'feed-tokens',
      match: 'GET /api/feed',
      key: 'header:x-client',
      limit: 6,
      window: { type: 'token-bucket', size: '3s', burst: 8 },
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

/** The limits of work in flight: slots held by streamed responses, acquire callers and checks, and settled costs. */
export function flightRules(): Rule[] {
  // Both settled rules key on 'user': one record per user on Redis, as the feed's rules.
  const estimate = (req: { body?: unknown }) => Number((req.body as { max_tokens?: number }).max_tokens ?? 1);
  return [
    {
      name: 'stream-slots',
      match: 'GET /stream',
      key: 'header:x-client',
      limit: 2,
      window: { type: 'concurrency', lease: '1s' },
    },
    // acquire's own key replaces 'user'; the match keeps the rule off the other requests.
    {
      name: 'job-slots',
      match: 'POST /jobs',
      key: 'user',
      limit: 2,
      window: { type: 'concurrency', lease: '3s' },
    },
    {
      name: 'call-slots',
      match: 'POST /call',
      key: 'user',
      limit: 3,
      window: { type: 'concurrency', lease: '2s' },
    },
    {
      name: 'tokens-5s',
      match: 'POST /v1/complete',
      key: 'user',
      limit: 150,
      window: { type: 'calendar', cron: '*/5 * * * * *' },
      cost: estimate,
      settle: true,
    },
    {
      name: 'tokens-minute',
      match: 'POST /v1/complete',
      key: 'user',
      limit: 1200,
      window: { type: 'calendar', unit: 'minute' },
      cost: estimate,
      settle: true,
    },
  ];
}

/** The settled rules' periods (ms, aligned on the epoch as UTC minutes and 5-second cron ticks are). */
export const SETTLE_PERIODS: ReadonlyMap<string, number> = new Map([
  ['tokens-5s', 5_000],
  ['tokens-minute', 60_000],
]);

/** Concurrency rules and their leases (ms), for the slot audit. */
export const SLOT_LEASES: ReadonlyMap<string, number> = new Map([
  ['stream-slots', 1_000],
  ['job-slots', 3_000],
  ['call-slots', 2_000],
]);
