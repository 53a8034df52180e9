// A Cloudflare Worker (bundled from src by test/support/workerd.ts, run on workerd without nodejs_compat):
// withRateLimit on the memory store, its limiter made at import, as users write it. GET /count: 20 a minute
// per client; GET /daily: 3 per UTC day (a calendar rule with a cron expression); GET /whoami: the key the
// request was counted on. `?cf=false`: the same limiter behind `cloudflare: false`, which never reads
// CF-Connecting-IP; `?cf=true`: behind `cloudflare: true`, which always does; `?cf=stripped`: a copy of the
// request without the edge's `cf` properties (as a self-hosted workerd, or a caller's own Request, hands
// one over) to the default wrapper.
import { rateLimitOf, withRateLimit } from '../../../adapters/fetch.js';
import { createLimiter, type Rule } from '../../../src/index.js';

const rules: Rule[] = [
  { name: 'api', match: 'GET /count', key: 'ip', limit: 20, window: { type: 'fixed', size: '1m' } },
  {
    name: 'daily',
    match: 'GET /daily',
    key: 'ip',
    limit: 3,
    window: { type: 'calendar', cron: '0 0 * * *', timezone: 'UTC' },
  },
  { name: 'who', match: 'GET /whoami', key: 'ip', limit: 1000, window: { type: 'fixed', size: '1m' } },
];

// At import: Workers refuse timers and random values in the global scope, so this line is the test.
const limiter = createLimiter({ rules });

const answer = (request: Request): Response => {
  const path = new URL(request.url).pathname;
  if (path === '/whoami') return new Response(rateLimitOf(request)?.rules[0]?.key ?? 'none');
  return new Response(`ok ${path}`);
};

const auto = withRateLimit(answer, limiter);
const never = withRateLimit(answer, limiter, { cloudflare: false });
const always = withRateLimit(answer, limiter, { cloudflare: true });

export default {
  fetch(request: Request, env: unknown, ctx: unknown): Promise<Response> {
    const cf = new URL(request.url).searchParams.get('cf');
    if (cf === 'false') return never(request, env, ctx);
    if (cf === 'true') return always(request, env, ctx);
    if (cf === 'stripped') return auto(new Request(request.url, { headers: request.headers }), env, ctx);
    return auto(request, env, ctx);
  },
};
