// `npm run demo`: starts the Express example on the memory store, plays a scripted session, prints what came back;
// then per-plan limits and paced outgoing calls (demo-plans.ts).
import type { AddressInfo } from 'node:net';
import { pacedCallsDemo, plansDemo } from './demo-plans.js';
import { createExpressApp } from './express-app.js';

interface Step {
  note: string;
  method: 'GET' | 'POST';
  path: string;
  body?: unknown;
  /** The client address, sent as X-Forwarded-For (the demo app trusts one proxy hop). */
  ip: string;
  /** Send the device cookie alice received on her last successful login. */
  device?: boolean;
}

const ALICE = '203.0.113.7';
const ALICE_LAPTOP = '203.0.113.99';
const MALLORY = '198.51.100.23';
const wrong = { username: 'alice', password: 'hunter2' };
const right = { username: 'alice', password: 'correct-horse' };
const login = (note: string, ip: string, body: unknown, device = false): Step => ({
  note,
  method: 'POST',
  path: '/login',
  body,
  ip,
  device,
});
const code = (note: string, body: unknown, path = '/sms/code'): Step => ({
  note,
  method: 'POST',
  path,
  body,
  ip: ALICE,
});

const sections: Array<[title: string, steps: Step[]]> = [
  [
    'Login: failures per username + IP lock the pair (no rate-limit headers on login routes)',
    [
      ...Array.from({ length: 3 }, () => login('alice mistypes her password', ALICE, wrong)),
      login('then gets it right: her pair count cleared', ALICE, right),
      ...Array.from({ length: 5 }, (_, i) => login(`mallory guesses ${i + 1}/5`, MALLORY, wrong)),
      login('6th failure in a row: pair locked', MALLORY, wrong),
      login('even the right password, while locked', MALLORY, right),
      login('alice from her own IP: not locked', ALICE, right),
      login('unknown user: the same answer as a wrong password', MALLORY, { username: 'bob', password: 'x' }),
    ],
  ],
  [
    'Login: one account guessed from many IPs is slowed down, never locked; trusted devices pass',
    [
      login('9th failure for alice, from a new IP', '192.0.2.1', wrong),
      login('10th failure for alice, from another', '192.0.2.2', wrong),
      login('11th: slowed to one per 6 min', '192.0.2.3', wrong),
      login('alice on a new laptop: waits at most 6 min', ALICE_LAPTOP, right),
      login('alice with her device cookie: in at once', ALICE, right, true),
    ],
  ],
  [
    'Verification codes: 1 per number per minute, 10 a day, 20 per IP an hour, 1000 overall',
    [
      code('SMS code', { phone: '+8613800138000' }),
      code('same number, formatted, within the minute', { phone: '+86 138-0013-8000' }),
      code('another number', { phone: '+8613900139000' }),
      code('bad number (400)', { phone: '+1555' }),
      code('again: the 400 was not charged', { phone: '+1555' }),
      code('e-mail code', { email: 'Alice@Example.com' }, '/email/code'),
      code('same address, other case', { email: ' alice@example.COM' }, '/email/code'),
    ],
  ],
  [
    'API: 20 requests a minute per client (GCRA)',
    Array.from({ length: 23 }, (_, i) => ({
      note: `API burst ${i + 1}/23`,
      method: 'GET' as const,
      path: '/api/items',
      ip: MALLORY,
    })),
  ],
];

const { app, limiter, loginLimiter } = createExpressApp({
  trustProxy: 1,
  apiPerMinute: 20,
  timeZone: 'Asia/Shanghai',
});
const server = app.listen(0, '127.0.0.1');
await new Promise<void>((resolve) => server.once('listening', resolve));
const base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;

const head = [
  '#',
  'request',
  'client',
  'what',
  'answer',
  'retry-after',
  'remaining',
  'RateLimit (left per rule)',
];
let deviceCookie = '';
let n = 0;
for (const [title, steps] of sections) {
  const rows: string[][] = [];
  for (const step of steps) {
    const res = await fetch(base + step.path, {
      method: step.method,
      headers: {
        'content-type': 'application/json',
        'x-forwarded-for': step.ip,
        ...(step.device && deviceCookie !== '' ? { cookie: deviceCookie } : {}),
      },
      ...(step.body === undefined ? {} : { body: JSON.stringify(step.body) }),
    });
    const body = (await res.json()) as { error?: string };
    const setCookie = res.headers.get('set-cookie');
    if (setCookie !== null) deviceCookie = setCookie.slice(0, setCookie.indexOf(';'));
    const h = (name: string) => res.headers.get(name) ?? '';
    rows.push([
      String(++n),
      `${step.method} ${step.path}`,
      step.ip,
      step.note,
      `${res.status}${body.error ? ` ${body.error}` : ''}${setCookie ? ' +device cookie' : ''}`,
      h('retry-after'),
      h('x-ratelimit-remaining'),
      h('ratelimit').replace(/"([^"]+)";r=(\d+);t=\d+/g, '$1 $2'),
    ]);
  }
  // Keep the API burst readable: its first two and last three rows.
  const shown = title.startsWith('API') ? [...rows.slice(0, 2), ['…'], ...rows.slice(-3)] : rows;
  // Only the header columns this section has values for.
  const columns = head.map((_, c) => c).filter((c) => c < 5 || rows.some((r) => r[c] !== ''));
  const widths = head.map((t, c) => Math.max(t.length, ...shown.map((r) => (r[c] ?? '').length)));
  const line = (cells: string[]) =>
    columns
      .map((c) => (cells[c] ?? '').padEnd(widths[c] ?? 0))
      .join('  ')
      .trimEnd();
  console.log(`\n${title}\n`);
  console.log(line(head));
  console.log(line(widths.map((w) => '-'.repeat(w))));
  for (const row of shown) console.log(line(row));
}

// What an operator sees: locked keys, one key's state, and an unlock.
const [pair] = await loginLimiter.locked('login-pair');
const account = await loginLimiter.status('login-account', 'alice');
console.log(
  `\nOperator: login-pair locked: ${pair?.key} for ${Math.round((pair?.remainingMs ?? 0) / 1000)} s more;` +
    ` login-account for alice: ${account.remaining}/${account.limit} left, locked: ${account.locked}`,
);
if (pair) await loginLimiter.reset('login-pair', pair.key);
console.log(`after reset: ${(await loginLimiter.locked('login-pair')).length} pairs locked`);
console.log('\nThe SMS and e-mail day counts reset at midnight Asia/Shanghai.');

await plansDemo(console.log);
await pacedCallsDemo(console.log);

server.close();
await Promise.all([limiter.close(), loginLimiter.close()]);
process.exit(0);
