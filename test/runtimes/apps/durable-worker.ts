// A Cloudflare Worker on DurableObjectStore, from the built package: a fetch handler behind withRateLimit
// (one rule per window type, a rule pair over two identities, a concurrency slot held while a body streams,
// a login lockout, an overridable plan) and a Hono app behind rateLimit under /hono/. The limiter is made on
// the first request (its store needs `env`). For the tests: /admin/* calls the limiter's operator calls,
// /do/<name> hands a store message from Node to the object of that name (the conformance suite drives the
// real objects so), and /rows/<name> lists what that object holds in storage.
import { Hono } from 'hono';
import { DurableObjectStore, RateLimitObject } from '../../../dist/cloudflare.js';
import { withRateLimit } from '../../../dist/fetch.js';
import { rateLimit } from '../../../dist/hono.js';
import { createLimiter, type Limiter, type Rule } from '../../../dist/index.js';

interface Namespace {
  idFromName(name: string): unknown;
  get(id: unknown): { fetch(request: Request): Promise<Response> };
}
interface Env {
  RATE_LIMITER: Namespace;
}

/** What an object asked of its storage: calls, and rows written (put or deleted) and read. */
interface StorageCounts {
  /** Messages from DurableObjectStore: object requests. */
  requests: number;
  list: number;
  rowsRead: number;
  put: number;
  rowsWritten: number;
  delete: number;
  rowsDeleted: number;
  deleteAll: number;
  setAlarm: number;
}

type Storage = {
  list(): Promise<Map<string, unknown>>;
  put(entries: Record<string, unknown>): Promise<void>;
  delete(keys: string[]): Promise<number>;
  deleteAll(): Promise<void>;
  setAlarm(atMs: number): Promise<void>;
};

/** RateLimitObject as users bind it, its storage calls counted; a GET answers its rows and the counts. */
export class InspectedRateLimitObject extends RateLimitObject {
  readonly #counts: StorageCounts;
  readonly #storage: Storage;

  constructor(ctx: { storage: Storage }, env: unknown) {
    const counts: StorageCounts = {
      requests: 0,
      list: 0,
      rowsRead: 0,
      put: 0,
      rowsWritten: 0,
      delete: 0,
      rowsDeleted: 0,
      deleteAll: 0,
      setAlarm: 0,
    };
    const storage = ctx.storage;
    const counted: Storage = {
      list: async () => {
        const rows = await storage.list();
        counts.list++;
        counts.rowsRead += rows.size;
        return rows;
      },
      put: (entries) => {
        counts.put++;
        counts.rowsWritten += Object.keys(entries).length;
        return storage.put(entries);
      },
      delete: (keys) => {
        counts.delete++;
        counts.rowsDeleted += keys.length;
        return storage.delete(keys);
      },
      deleteAll: () => {
        counts.deleteAll++;
        return storage.deleteAll();
      },
      setAlarm: (atMs) => {
        counts.setAlarm++;
        return storage.setAlarm(atMs);
      },
    };
    // The runtime's ctx is a native object: a stand-in with the counted storage in its place.
    const wrapped = new Proxy(ctx, {
      get: (target, name) => {
        if (name === 'storage')
          return new Proxy(storage, {
            get: (s, n) => (n in counted ? counted[n as keyof Storage] : Reflect.get(s, n).bind(s)),
          });
        const value = Reflect.get(target, name);
        return typeof value === 'function' ? value.bind(target) : value;
      },
    });
    super(wrapped as never, env);
    this.#counts = counts;
    this.#storage = storage;
  }

  override async fetch(request: Request): Promise<Response> {
    if (request.method === 'GET') {
      const rows = [...(await this.#storage.list()).keys()];
      return Response.json({ rows, counts: this.#counts });
    }
    this.#counts.requests++;
    return super.fetch(request);
  }
}

const hour = { type: 'fixed', size: '1h' } as const;
const rules: Rule[] = [
  { name: 'fixed', match: 'GET /fixed', key: 'ip', limit: 50, window: hour },
  { name: 'sliding', match: 'GET /sliding', key: 'ip', limit: 40, window: { type: 'sliding', size: '1h' } },
  { name: 'log', match: 'GET /log', key: 'ip', limit: 30, window: { type: 'sliding-log', size: '1h' } },
  {
    name: 'bucket',
    match: 'GET /bucket',
    key: 'ip',
    limit: 25,
    window: { type: 'token-bucket', size: '1h' },
  },
  { name: 'gcra', match: 'GET /gcra', key: 'ip', limit: 20, window: { type: 'gcra', size: '1h' } },
  { name: 'day', match: 'GET /day', key: 'ip', limit: 15, window: { type: 'calendar', unit: 'day' } },
  { name: 'hot', match: 'GET /hot', key: 'ip', limit: 500, window: hour },
  { name: 'pair-ip', match: 'GET /pair', key: 'ip', limit: 40, window: hour },
  { name: 'pair-user', match: 'GET /pair', key: 'header:x-user', limit: 25, window: hour },
  {
    name: 'streams',
    match: 'GET /stream',
    key: 'ip',
    limit: 2,
    window: { type: 'concurrency', lease: '2s' },
  },
  {
    name: 'login',
    match: 'POST /login',
    key: 'header:x-user',
    limit: 3,
    window: { type: 'fixed', size: '5m' },
    lockout: { duration: '15m' },
  },
  { name: 'plan', match: 'GET /plan', key: 'header:x-user', limit: 2, window: hour },
];

/**
 * Ids of streams /finish?id= ended. A stream looks every 10 ms: Workers cancel a request whose only wait is a
 * promise that another request would resolve (taken for a hang), but never one waiting on a timer.
 */
const finished = new Set<string>();

function streamed(id: string): Response {
  const body = new ReadableStream<Uint8Array>({
    async start(controller) {
      controller.enqueue(new TextEncoder().encode('a'));
      while (!finished.has(id)) await new Promise((resolve) => setTimeout(resolve, 10));
      controller.enqueue(new TextEncoder().encode('b'));
      controller.close();
    },
  });
  return new Response(body);
}

async function admin(limiter: Limiter, url: URL): Promise<Response> {
  const rule = url.searchParams.get('rule') ?? '';
  const key = url.searchParams.get('key') ?? '';
  switch (url.pathname) {
    case '/admin/status':
      return Response.json(await limiter.status(rule, key));
    case '/admin/locked':
      return Response.json(await limiter.locked(rule));
    case '/admin/reset':
      await limiter.reset(rule, key);
      return new Response('reset');
    case '/admin/override':
      await limiter.override(rule, key, Number(url.searchParams.get('limit')));
      return new Response('set');
    default:
      return new Response('no such call', { status: 404 });
  }
}

let app: ((request: Request, env: Env) => Promise<Response>) | undefined;

function appFor(env: Env): (request: Request, env: Env) => Promise<Response> {
  const store = new DurableObjectStore(env.RATE_LIMITER);
  const limiter = createLimiter({ store, rules, onStoreError: 'deny' });
  const limited = withRateLimit(
    async (request: Request) => {
      const url = new URL(request.url);
      if (url.pathname === '/stream') return streamed(url.searchParams.get('id') ?? '');
      if (url.pathname === '/finish') {
        finished.add(url.searchParams.get('id') ?? '');
        return new Response('finished');
      }
      if (url.pathname.startsWith('/admin/')) return admin(limiter, url);
      return new Response(`ok ${url.pathname}`);
    },
    limiter,
    { cloudflare: true },
  );
  const hono = new Hono();
  const honoLimiter = createLimiter({
    store,
    rules: [{ name: 'hono', key: 'header:x-client', limit: 30, window: hour }],
    onStoreError: 'deny',
  });
  hono.use('/hono/*', rateLimit(honoLimiter));
  hono.get('/hono/*', (c) => c.text('ok hono'));
  return (request, env) => {
    const { pathname } = new URL(request.url);
    return pathname.startsWith('/hono/') ? Promise.resolve(hono.fetch(request, env)) : limited(request, env);
  };
}

export default {
  async fetch(request: Request, env: Env): Promise<Response> {
    const { pathname } = new URL(request.url);
    const name = decodeURIComponent(pathname.slice(pathname.indexOf('/', 1) + 1));
    if (pathname.startsWith('/do/') || pathname.startsWith('/rows/')) {
      const stub = env.RATE_LIMITER.get(env.RATE_LIMITER.idFromName(name));
      return stub.fetch(
        new Request('https://ratekeeper.invalid/', {
          method: pathname.startsWith('/do/') ? 'POST' : 'GET',
          ...(pathname.startsWith('/do/') ? { body: await request.text() } : {}),
        }),
      );
    }
    app ??= appFor(env);
    return app(request, env);
  },
};
