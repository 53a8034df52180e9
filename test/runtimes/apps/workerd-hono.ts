// A Hono app as a Cloudflare Worker (bundled from src by test/support/workerd.ts, run on workerd without
// nodejs_compat): rateLimit on the memory store with no client-address option, made at import. GET /count:
// 20 a minute per client; GET /daily: 3 per UTC day (a calendar rule with a cron expression); GET /whoami:
// the key the request was counted on.
import { Hono } from 'hono';
import { rateLimit } from '../../../adapters/hono.js';
import type { Rule } from '../../../src/index.js';

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

const app = new Hono();
app.use(rateLimit(rules));
app.get('/whoami', (c) => c.text(c.get('rateLimit')?.rules[0]?.key ?? 'none'));
app.get('*', (c) => c.text(`ok ${c.req.path}`));

export default app;
