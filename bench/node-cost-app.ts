// Child process of bench/node-callgrind.ts, run under valgrind: one Express 5 app and a keep-alive client in
// this one process. It sends the warm-up, says `warm`, waits for SIGUSR2 (`go`: the parent has zeroed
// callgrind's counters), sends the measured requests, says `done` and exits when its stdin closes.
// Usage: node --import tsx bench/node-cost-app.ts <app> <redis port> <warm-up> <measured>
// <app>: bare | erl-memory | erl-redis | rk-memory | rk-redis | rk-memory-concurrency | rk-redis-concurrency.

import { writeSync } from 'node:fs';
import { Agent, createServer, request, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { fileURLToPath } from 'node:url';
import express, { type RequestHandler } from 'express';
import { rateLimit as expressRateLimit, MemoryStore } from 'express-rate-limit';
import { type RedisReply, RedisStore } from 'rate-limit-redis';
import { openRedis } from './contender.js';
import { loadRatekeeper } from './ratekeeper.js';

export const NODE_COST_APPS = [
  'bare',
  'erl-memory',
  'erl-redis',
  'rk-memory',
  'rk-redis',
  'rk-memory-concurrency',
  'rk-redis-concurrency',
] as const;
export type NodeCostApp = (typeof NODE_COST_APPS)[number];

/** Requests in flight from the client. */
export const IN_FLIGHT = 10;
const LIMIT = 1e9;
const WINDOW_MS = 3_600_000;

/**
 * The limiter in front of the route, configured as the issue measures it (one rule keyed by IP); the
 * `-concurrency` apps hold a slot of a concurrency rule (limit 1e9, lease 60 s) per request instead,
 * released when the response ends.
 */
async function limiterOf(app: NodeCostApp, redisPort: number): Promise<RequestHandler | undefined> {
  if (app === 'bare') return undefined;
  if (app === 'erl-memory' || app === 'erl-redis') {
    const client = app === 'erl-redis' ? openRedis(redisPort) : undefined;
    return expressRateLimit({
      windowMs: WINDOW_MS,
      limit: LIMIT,
      standardHeaders: 'draft-6',
      legacyHeaders: true,
      store: client
        ? new RedisStore({
            sendCommand: (command: string, ...args: string[]) =>
              client.call(command, ...args) as Promise<RedisReply>,
            prefix: 'ncg-erl:',
          })
        : new MemoryStore(),
    });
  }
  const rk = await loadRatekeeper();
  // The adapter from the same build as the core (node-callgrind.ts: dist/ unless NODE_COST_SOURCE=src).
  const adapter = process.env.BENCH_RATEKEEPER_MODULE
    ? new URL('../dist/express.js', import.meta.url).href
    : new URL('../adapters/express.js', import.meta.url).href;
  const { rateLimit } = (await import(adapter)) as { rateLimit(limiter: unknown): RequestHandler };
  const redis = app === 'rk-redis' || app === 'rk-redis-concurrency';
  const window =
    app === 'rk-memory-concurrency' || app === 'rk-redis-concurrency'
      ? { type: 'concurrency', lease: 60_000 }
      : { type: 'fixed', size: WINDOW_MS };
  const limiter = rk.createLimiter({
    store: redis
      ? new rk.RedisStore({ client: openRedis(redisPort), prefix: 'ncg-rk' })
      : new rk.MemoryStore(),
    // Another name, of the same length, for the concurrency rule: the apps share one Redis and prefix.
    rules: [{ name: window.type === 'concurrency' ? 'apc' : 'api', key: 'ip', limit: LIMIT, window }],
    ...(redis && { storeTimeout: 600_000, onStoreError: 'deny' }),
  } as Parameters<typeof rk.createLimiter>[0]);
  return rateLimit(limiter);
}

/** `count` GET / requests, IN_FLIGHT at a time on the agent's keep-alive sockets; rejects on a non-200. */
function send(port: number, agent: Agent, count: number): Promise<void> {
  let sent = 0;
  let done = 0;
  return new Promise((resolve, reject) => {
    const next = () => {
      if (sent === count) return;
      sent++;
      const req = request({ port, host: '127.0.0.1', path: '/', agent }, (res) => {
        if (res.statusCode !== 200) reject(new Error(`status ${res.statusCode}`));
        res.resume();
        res.on('end', () => {
          done++;
          if (done === count) resolve();
          else next();
        });
      });
      req.on('error', reject);
      req.end();
    };
    for (let i = 0; i < IN_FLIGHT; i++) next();
  });
}

async function main(): Promise<void> {
  const [app, redisPort, warmUp, measured] = process.argv.slice(2) as [NodeCostApp, string, string, string];
  const handler = await limiterOf(app, Number(redisPort));
  const routes = express();
  routes.disable('x-powered-by');
  routes.disable('etag');
  if (handler) routes.use(handler);
  routes.get('/', (_req, res) => {
    res.send('ok');
  });
  const server = await new Promise<Server>((resolve, reject) => {
    const s = createServer({ keepAliveTimeout: 600_000 }, routes);
    s.once('error', reject);
    s.listen(0, '127.0.0.1', () => resolve(s));
  });
  const port = (server.address() as AddressInfo).port;
  const agent = new Agent({ keepAlive: true, maxSockets: IN_FLIGHT });
  // No stream of this process carries a byte inside the measured window: Node makes process.stdin and
  // process.stdout on first use, and the first data through their pipes generalizes the maps Node's
  // net and HTTP code was optimized for, which then deoptimizes and compiles again. So the words go out
  // by writeSync, `go` comes as SIGUSR2, and stdin is only watched for its end (after the dump).
  const go = new Promise<void>((resolve) => process.once('SIGUSR2', () => resolve()));
  const closed = new Promise<void>((resolve) => {
    process.stdin.once('end', resolve).resume();
  });
  // The warm-up in two halves with the sockets idle in between, as they are while the counters are
  // zeroed: the first requests after a pause take idle sockets from the agent's free list (a path the
  // requests of a continuous run never take), which deoptimizes Node's HTTP code once more.
  await send(port, agent, Math.ceil(Number(warmUp) / 2));
  await new Promise((resolve) => setImmediate(resolve));
  await send(port, agent, Math.floor(Number(warmUp) / 2));
  writeSync(1, 'warm\n');
  await go;
  await send(port, agent, Number(measured));
  writeSync(1, 'done\n');
  // Until the parent closes stdin (or kills it), which then dumps the counters.
  await closed;
  process.exit(0);
}

if (process.argv[1] === fileURLToPath(import.meta.url)) await main();
