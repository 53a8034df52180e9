// A Cloudflare Worker (bundled from src by test/support/workerd.ts, run on workerd without nodejs_compat):
// withRateLimit on RedisStore over @upstash/redis (Redis over HTTP, its Workers build), the REST endpoint
// and token from the Worker's bindings as on Cloudflare. GET /count: 20 a minute per client, the limit a
// Node process on ioredis shares through the same Redis; GET /stream: one concurrency slot per client,
// held while the body streams (the body ends once /finish was asked for).
import { Redis } from '@upstash/redis/cloudflare';
import { withRateLimit } from '../../../adapters/fetch.js';
import { createLimiter, RedisStore, type Rule } from '../../../src/index.js';

interface Env {
  UPSTASH_URL: string;
  UPSTASH_TOKEN: string;
  PREFIX: string;
}

const rules: Rule[] = [
  { name: 'api', match: 'GET /count', key: 'ip', limit: 20, window: { type: 'fixed', size: '1m' } },
  {
    name: 'streams',
    match: 'GET /stream',
    key: 'ip',
    limit: 1,
    window: { type: 'concurrency', lease: '30s' },
  },
];

let finished = false;
const body = () =>
  new ReadableStream<Uint8Array>({
    async pull(controller) {
      controller.enqueue(new TextEncoder().encode('a'));
      // Workers cancel a request whose only wait is a promise another request resolves: poll a flag.
      while (!finished) await new Promise((resolve) => setTimeout(resolve, 10));
      controller.enqueue(new TextEncoder().encode('b'));
      controller.close();
    },
  });

const answer = (request: Request): Response => {
  const path = new URL(request.url).pathname;
  if (path === '/stream') {
    finished = false;
    return new Response(body());
  }
  if (path === '/finish') finished = true;
  return new Response(`ok ${path}`);
};

// Made on the first request: the client needs `env`.
let limited: ((request: Request, env: Env, ctx: unknown) => Promise<Response>) | undefined;

export default {
  fetch(request: Request, env: Env, ctx: unknown): Promise<Response> {
    limited ??= withRateLimit(
      answer,
      createLimiter({
        store: new RedisStore({
          client: new Redis({ url: env.UPSTASH_URL, token: env.UPSTASH_TOKEN, retry: false }),
          prefix: env.PREFIX,
        }),
        rules,
      }),
      { cloudflare: true },
    );
    return limited(request, env, ctx);
  },
};
