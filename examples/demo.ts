// `npm run demo`: starts the Express example on the memory store, sends a scripted burst, prints what came back.
import type { AddressInfo } from 'node:net';
import { createExpressApp } from './express-app.js';

interface Step {
  note: string;
  method: 'GET' | 'POST';
  path: string;
  body?: unknown;
  /** The client address, sent as X-Forwarded-For (the demo app trusts one proxy hop). */
  ip: string;
}

const ALICE = '203.0.113.7';
const MALLORY = '198.51.100.23';
const wrong = { username: 'alice', password: 'hunter2' };
const right = { username: 'alice', password: 'correct-horse' };

const steps: Step[] = [
  ...Array.from({ length: 3 }, () => ({
    note: 'wrong password',
    method: 'POST' as const,
    path: '/login',
    body: wrong,
    ip: MALLORY,
  })),
  { note: 'correct password: count cleared', method: 'POST', path: '/login', body: right, ip: MALLORY },
  ...Array.from({ length: 5 }, () => ({
    note: 'wrong password',
    method: 'POST' as const,
    path: '/login',
    body: wrong,
    ip: MALLORY,
  })),
  { note: '6th failure in a row: pair locked', method: 'POST', path: '/login', body: wrong, ip: MALLORY },
  { note: 'right password, still locked', method: 'POST', path: '/login', body: right, ip: MALLORY },
  { note: 'owner from her own IP: not locked', method: 'POST', path: '/login', body: right, ip: ALICE },
  { note: 'SMS code', method: 'POST', path: '/sms/code', body: { phone: '+8613800138000' }, ip: ALICE },
  {
    note: 'again within the minute',
    method: 'POST',
    path: '/sms/code',
    body: { phone: '+8613800138000' },
    ip: ALICE,
  },
  { note: 'another number', method: 'POST', path: '/sms/code', body: { phone: '+8613900139000' }, ip: ALICE },
  { note: 'bad number (400)', method: 'POST', path: '/sms/code', body: { phone: '+1555' }, ip: ALICE },
  {
    note: 'again: the 400 was not charged',
    method: 'POST',
    path: '/sms/code',
    body: { phone: '+1555' },
    ip: ALICE,
  },
  ...Array.from({ length: 23 }, (_, i) => ({
    note: `API burst ${i + 1}/23`,
    method: 'GET' as const,
    path: '/api/items',
    ip: MALLORY,
  })),
];

const { app, limiter } = createExpressApp({ trustProxy: 1, apiPerMinute: 20, timeZone: 'Asia/Shanghai' });
const server = app.listen(0, '127.0.0.1');
await new Promise<void>((resolve) => server.once('listening', resolve));
const base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;

const rows: string[][] = [];
for (const [i, step] of steps.entries()) {
  const res = await fetch(base + step.path, {
    method: step.method,
    headers: { 'content-type': 'application/json', 'x-forwarded-for': step.ip },
    ...(step.body === undefined ? {} : { body: JSON.stringify(step.body) }),
  });
  await res.arrayBuffer();
  const h = (name: string) => res.headers.get(name) ?? '';
  const reset = h('x-ratelimit-reset');
  rows.push([
    String(i + 1),
    `${step.method} ${step.path}`,
    step.ip,
    step.note,
    String(res.status),
    h('x-ratelimit-limit'),
    h('x-ratelimit-remaining'),
    reset === '' ? '' : `+${Math.max(0, Math.floor(Number(reset) - Date.now() / 1000))}s`,
    h('retry-after'),
    h('ratelimit'),
  ]);
}
// Keep the API burst readable: its first two and last three rows.
const burst = rows.findIndex((r) => r[3]?.startsWith('API burst'));
const shown = burst < 0 ? rows : [...rows.slice(0, burst + 2), ['…'], ...rows.slice(-3)];

const head = [
  '#',
  'request',
  'client',
  'what',
  'status',
  'limit',
  'remaining',
  'reset',
  'retry-after',
  'RateLimit',
];
const widths = head.map((title, c) => Math.max(title.length, ...shown.map((r) => (r[c] ?? '').length)));
const line = (cells: string[]) =>
  cells
    .map((cell, c) => cell.padEnd(widths[c] ?? 0))
    .join('  ')
    .trimEnd();
console.log(line(head));
console.log(line(widths.map((w) => '-'.repeat(w))));
for (const row of shown) console.log(line(row));
console.log(
  '\nX-RateLimit-Reset is printed relative to now; the SMS day count resets at midnight Asia/Shanghai.',
);

server.close();
await limiter.close();
process.exit(0);
