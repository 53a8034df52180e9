// An app on the runtime running this file (Bun, Deno, or Node under @hono/node-server), from the built package: a fetch handler behind
// withRateLimit (APP=fetch) or a Hono app behind rateLimit (APP=hono), with no client-address option either
// way, on the memory store or on RedisStore over ioredis (STORE=redis, REDIS_PORT, PREFIX). It prints
// {"port"} once it listens, then serves until killed. GET /stream streams "a", then "b" when the test asks
// for it with GET /finish; GET /whoami answers the key the request was counted on.
import { Hono } from 'hono';
import { stream } from 'hono/streaming';
import { Redis } from 'ioredis';
import { rateLimitOf, withRateLimit } from '../../../dist/fetch.js';
import { rateLimit } from '../../../dist/hono.js';
import { createLimiter, RedisStore, type Rule } from '../../../dist/index.js';

declare const Bun:
  | {
      serve(options: { port: number; hostname: string; fetch: (request: Request) => unknown }): {
        port: number;
      };
    }
  | undefined;
declare const Deno:
  | {
      env: { get(name: string): string | undefined };
      serve(
        options: { port: number; hostname: string; onListen(addr: { port: number }): void },
        fetch: (request: Request, info: unknown) => unknown,
      ): unknown;
    }
  | undefined;
declare const process: { env: Record<string, string | undefined> } | undefined;

const env = (name: string) => (typeof Deno !== 'undefined' ? Deno.env.get(name) : process?.env[name]);

const rules: Rule[] = [
  { name: 'api', match: 'GET /count', key: 'ip', limit: 20, window: { type: 'fixed', size: '1m' } },
  { name: 'streams', match: 'GET /stream', key: 'ip', limit: 1, window: { type: 'concurrency' } },
  { name: 'who', match: 'GET /whoami', key: 'ip', limit: 1000, window: { type: 'fixed', size: '1m' } },
];
const store =
  env('STORE') === 'redis'
    ? new RedisStore({
        client: new Redis({ host: '127.0.0.1', port: Number(env('REDIS_PORT')) }),
        prefix: env('PREFIX') ?? 'rk',
      })
    : undefined;
const limiter = createLimiter({ rules, ...(store ? { store } : {}) });

let finish = () => {};
const body = () =>
  new ReadableStream<Uint8Array>({
    async start(controller) {
      controller.enqueue(new TextEncoder().encode('a'));
      await new Promise<void>((resolve) => {
        finish = resolve;
      });
      controller.enqueue(new TextEncoder().encode('b'));
      controller.close();
    },
  });
const answer = (path: string): Response => {
  if (path === '/stream') return new Response(body());
  if (path === '/finish') finish();
  return new Response(`ok ${path}`);
};

let fetch: (request: Request, info?: unknown) => unknown;
if (env('APP') === 'hono') {
  const app = new Hono();
  app.use(rateLimit(limiter));
  app.get('/stream', (c) =>
    stream(c, async (s) => {
      await s.write('a');
      await new Promise<void>((resolve) => {
        finish = resolve;
      });
      await s.write('b');
    }),
  );
  app.get('/whoami', (c) => new Response(c.get('rateLimit')?.rules[0]?.key ?? 'none'));
  app.get('*', (c) => answer(c.req.path));
  fetch = app.fetch;
} else {
  fetch = withRateLimit((request: Request) => {
    const path = new URL(request.url).pathname;
    if (path === '/whoami') return new Response(rateLimitOf(request)?.rules[0]?.key ?? 'none');
    return answer(path);
  }, limiter);
}

if (typeof Bun !== 'undefined') {
  const server = Bun.serve({ port: 0, hostname: '127.0.0.1', fetch });
  console.log(JSON.stringify({ port: server.port }));
} else if (typeof Deno !== 'undefined') {
  Deno.serve(
    { port: 0, hostname: '127.0.0.1', onListen: ({ port }) => console.log(JSON.stringify({ port })) },
    fetch,
  );
} else {
  const { serve } = await import('@hono/node-server');
  serve({ fetch: fetch as (request: Request) => Response, port: 0, hostname: '127.0.0.1' }, ({ port }) =>
    console.log(JSON.stringify({ port })),
  );
}
