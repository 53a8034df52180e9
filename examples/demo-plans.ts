// Two parts of `npm run demo`: per-plan limits with an operator override (through Express), and outgoing
// calls paced by `acquire` to a gateway's own limit.
import type { AddressInfo } from 'node:net';
import express, { type Request } from 'express';
import { rateLimit } from '../adapters/express.js';
import { createLimiter, type RequestInfo } from '../src/index.js';

const PLAN_LIMITS = { free: 3, pro: 6 } as const;
type Plan = keyof typeof PLAN_LIMITS;

/** The plan of the signed-in user; an unknown caller (and a direct call) gets the free plan's limit. */
const planOf = (req: RequestInfo): Plan => (req.user as { plan?: Plan } | undefined)?.plan ?? 'free';

/** One rule for every plan, an operator raising one user, all through the Express middleware. */
export async function plansDemo(log: (line: string) => void): Promise<void> {
  const limiter = createLimiter({
    rules: [
      {
        name: 'api',
        key: 'user',
        limit: (req) => PLAN_LIMITS[planOf(req)],
        window: { type: 'fixed', size: '1m' },
      },
    ],
  });
  const app = express();
  // Authentication ahead of the limiter: `x-user: <id>:<plan>`.
  app.use((req, _res, next) => {
    const [id, plan] = (req.get('x-user') ?? '').split(':');
    (req as Request & { user?: unknown }).user = { id, plan };
    next();
  });
  app.use(rateLimit(limiter));
  app.get('/api/items', (_req, res) => void res.json({ items: [] }));
  const server = app.listen(0, '127.0.0.1');
  await new Promise<void>((resolve) => server.once('listening', resolve));
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/api/items`;

  const burst = async (user: string, calls: number): Promise<string> => {
    const answers: string[] = [];
    for (let i = 0; i < calls; i++) {
      const res = await fetch(url, { headers: { 'x-user': user } });
      answers.push(
        `${res.status} ${res.headers.get('x-ratelimit-remaining')}/${res.headers.get('x-ratelimit-limit')}`,
      );
    }
    return answers.join(', ');
  };
  log('\nPlans: one rule, the limit read per request (free 3 a minute, pro 6); an operator override\n');
  log(`ann (free), 4 calls:  ${await burst('ann:free', 4)}`);
  log(`bob (pro), 7 calls:   ${await burst('bob:pro', 7)}`);
  await limiter.override('api', 'ann', 5, { for: '1h' });
  const status = await limiter.status('api', 'ann');
  log(
    `operator: override('api', 'ann', 5, { for: '1h' }) -> limit ${status.limit}, overridden: ${status.overridden}`,
  );
  log(`ann, 3 more calls:    ${await burst('ann:free', 3)}   (status, remaining/limit)`);
  server.close();
  await limiter.close();
}

/** Twelve SMS through a gateway that takes 4 a second: each send waits its turn instead of failing. */
export async function pacedCallsDemo(log: (line: string) => void): Promise<void> {
  const gateway = createLimiter({
    rules: [{ name: 'sms-gateway', key: 'ip', limit: 4, window: { type: 'sliding-log', size: '1s' } }],
  });
  log(
    '\nPaced outgoing calls: 12 SMS to a gateway that allows 4 a second, each acquire() waiting its turn\n',
  );
  const start = Date.now();
  const sent: string[] = [];
  await Promise.all(
    Array.from({ length: 12 }, async (_, i) => {
      await gateway.acquire('sms-gateway', 'provider', { maxWait: '10s' });
      sent.push(`#${i + 1} +${((Date.now() - start) / 1000).toFixed(1)} s`);
    }),
  );
  for (let i = 0; i < sent.length; i += 4) log(sent.slice(i, i + 4).join('   '));
  const late = await gateway.acquire('sms-gateway', 'provider', { maxWait: '100ms' }).then(
    () => 'sent',
    (error: Error) => error.message,
  );
  log(`one more with maxWait 100 ms: ${late}`);
  await gateway.close();
}
