// A loopback server that speaks Upstash's REST protocol in front of a real redis-server, for the tests of Redis
// over HTTP (@upstash/redis): POST / with a JSON array command, /pipeline and /multi-exec with arrays of them,
// `Authorization: Bearer <token>` (or `?_token=`), `{ result }` / `{ error }` replies, 400 for a command that
// fails and 401 for a wrong token, and every string base64-encoded (but a bare "OK") when the request sends
// `Upstash-Encoding: base64`, as @upstash/redis does by default. Faults on demand: HTTP 500, a body that is
// not JSON, and requests held unanswered. Used by the Node suites and by the Workers harness.
import { randomBytes } from 'node:crypto';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Redis } from 'ioredis5';

/** How the server answers every request from now on. */
export type RestMode = 'redis' | 'http-500' | 'malformed-json' | 'hang';

export interface UpstashRest {
  /** The REST URL (`http://127.0.0.1:<port>`), as `new Redis({ url, token })` takes it. */
  readonly url: string;
  readonly token: string;
  /** Commands forwarded to Redis so far, by upper-case name (`EVALSHA`, `EVAL`; each of a pipeline counts). */
  commands(name: string): number;
  /** Requests received so far (a pipeline is one). */
  readonly requests: number;
  /** Answers every later request this way: `'hang'` holds it unanswered until the client goes away. */
  answer(mode: RestMode): void;
  /** Resolves once `requests` has reached `count`. */
  untilRequests(count: number): Promise<void>;
  /** Resolves once no held request (`'hang'`) is left: each closed by its client, unanswered. */
  untilNoneHeld(): Promise<void>;
  /** Held requests still open. */
  readonly held: number;
  close(): Promise<void>;
}

export interface UpstashRestOptions {
  /** The redis-server the commands go to. */
  redisPort: number;
  /** @default '127.0.0.1' */
  redisHost?: string;
  /** The token requests must carry. @default a random one */
  token?: string;
}

/** What the protocol takes as an argument: strings, numbers and booleans, sent to Redis as their text. */
function argvOf(command: unknown): string[] | undefined {
  if (!Array.isArray(command) || command.length === 0) return undefined;
  const argv: string[] = [];
  for (const arg of command) {
    if (typeof arg === 'string') argv.push(arg);
    else if (typeof arg === 'number' || typeof arg === 'boolean') argv.push(String(arg));
    else return undefined;
  }
  return argv;
}

/** Commands that hold a connection, which a request cannot: Upstash serves them elsewhere, or not at all. */
const NOT_OVER_REST = new Set([
  'SUBSCRIBE',
  'PSUBSCRIBE',
  'MONITOR',
  'BLPOP',
  'BRPOP',
  'BRPOPLPUSH',
  'BZPOPMIN',
  'BZPOPMAX',
]);

function encode(value: unknown, base64: boolean, top: boolean): unknown {
  if (typeof value === 'string') {
    if (!base64 || (top && value === 'OK')) return value;
    return Buffer.from(value, 'utf8').toString('base64');
  }
  if (Array.isArray(value)) return value.map((item) => encode(item, base64, false));
  if (value === undefined) return null;
  return value;
}

function send(res: ServerResponse, status: number, body: unknown): void {
  const text = JSON.stringify(body);
  res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text) });
  res.end(text);
}

function readBody(req: IncomingMessage): Promise<string> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => resolve(Buffer.concat(chunks).toString('utf8')));
    req.on('error', reject);
  });
}

/** Starts the server on a free loopback port, its Redis connection made and ready. */
export async function startUpstashRest(options: UpstashRestOptions): Promise<UpstashRest> {
  const token = options.token ?? randomBytes(16).toString('hex');
  const redis = new Redis({
    host: options.redisHost ?? '127.0.0.1',
    port: options.redisPort,
    lazyConnect: true,
    maxRetriesPerRequest: 1,
  });
  redis.on('error', () => {});
  await redis.connect();
  const counts = new Map<string, number>();
  let mode: RestMode = 'redis';
  let requests = 0;
  const arrivals: Array<{ count: number; reached(): void }> = [];
  let noneHeld: Array<() => void> = [];
  const held = new Set<ServerResponse>();

  const count = (argv: readonly string[]) => {
    const name = (argv[0] as string).toUpperCase();
    counts.set(name, (counts.get(name) ?? 0) + 1);
  };

  /** One command: its reply, or Redis's error as the protocol words it. */
  const run = async (argv: string[]): Promise<{ result: unknown } | { error: string }> => {
    if (NOT_OVER_REST.has((argv[0] as string).toUpperCase()))
      return { error: `ERR ${argv[0]} is not supported over the REST API` };
    count(argv);
    try {
      return { result: await redis.call(argv[0] as string, ...argv.slice(1)) };
    } catch (error) {
      return { error: (error as Error).message };
    }
  };

  const handle = async (req: IncomingMessage, res: ServerResponse) => {
    requests++;
    for (const waiter of arrivals.filter((a) => a.count <= requests)) {
      arrivals.splice(arrivals.indexOf(waiter), 1);
      waiter.reached();
    }
    const url = new URL(req.url ?? '/', 'http://localhost');
    const auth = req.headers.authorization;
    const given = auth?.startsWith('Bearer ') ? auth.slice('Bearer '.length) : url.searchParams.get('_token');
    if (given !== token) return send(res, 401, { error: 'WRONGPASS invalid or missing auth token' });
    if (mode === 'hang') {
      held.add(res);
      res.on('close', () => {
        held.delete(res);
        if (held.size > 0) return;
        const waiters = noneHeld;
        noneHeld = [];
        for (const done of waiters) done();
      });
      return;
    }
    if (mode === 'http-500') {
      res.writeHead(500, { 'content-type': 'text/html' });
      res.end('<html><body>500 Internal Server Error</body></html>');
      return;
    }
    if (mode === 'malformed-json') {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end('{"result": [1, 2');
      return;
    }
    if (req.method !== 'POST' && req.method !== 'GET' && req.method !== 'PUT' && req.method !== 'HEAD')
      return send(res, 405, { error: 'ERR method not allowed' });
    const base64 = String(req.headers['upstash-encoding'] ?? '').toLowerCase() === 'base64';
    const text = await readBody(req);
    const path = url.pathname.replace(/\/+$/, '');
    let body: unknown;
    if (text !== '') {
      try {
        body = JSON.parse(text);
      } catch {
        return send(res, 400, { error: 'ERR failed to parse the request body as JSON' });
      }
    }
    if (path === '/pipeline' || path === '/multi-exec') {
      const commands = Array.isArray(body) ? body.map(argvOf) : [];
      if (commands.length === 0 || commands.some((argv) => argv === undefined))
        return send(res, 400, { error: 'ERR a pipeline is a non-empty array of commands' });
      const argvs = commands as string[][];
      if (path === '/pipeline') {
        // Sent at once on one connection: run in order, other clients' commands between them.
        const replies = await Promise.all(argvs.map(run));
        return send(
          res,
          200,
          replies.map((r) => ('error' in r ? r : { result: encode(r.result, base64, true) })),
        );
      }
      for (const argv of argvs) count(argv);
      const multi = redis.multi();
      for (const argv of argvs) multi.call(argv[0] as string, ...argv.slice(1));
      try {
        const replies = (await multi.exec()) ?? [];
        return send(
          res,
          200,
          replies.map(([error, result]) =>
            error ? { error: error.message } : { result: encode(result, base64, true) },
          ),
        );
      } catch (error) {
        return send(res, 400, { error: (error as Error).message });
      }
    }
    // The command in the body, or in the path (`/set/foo/bar`).
    const argv =
      body !== undefined
        ? argvOf(body)
        : path === ''
          ? undefined
          : path.slice(1).split('/').map(decodeURIComponent);
    if (argv === undefined) return send(res, 400, { error: 'ERR the body must be a JSON array command' });
    const reply = await run(argv);
    if ('error' in reply) return send(res, 400, reply);
    send(res, 200, { result: encode(reply.result, base64, true) });
  };

  const server = createServer((req, res) => {
    handle(req, res).catch((error: unknown) => {
      if (!res.headersSent) send(res, 500, { error: `ERR loopback server: ${(error as Error).message}` });
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    token,
    commands: (name) => counts.get(name.toUpperCase()) ?? 0,
    get requests() {
      return requests;
    },
    answer(next) {
      mode = next;
    },
    untilRequests: (count) =>
      new Promise((reached) => {
        if (requests >= count) reached();
        else arrivals.push({ count, reached });
      }),
    untilNoneHeld: () =>
      new Promise((done) => {
        if (held.size === 0) done();
        else noneHeld.push(done);
      }),
    get held() {
      return held.size;
    },
    async close() {
      for (const res of held) res.destroy();
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
      redis.disconnect();
    },
  };
}
