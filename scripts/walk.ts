// The walk: the files whose code runs for one Express request on RedisStore (a fixed rule and a concurrency
// rule, over ioredis, on a standalone server spawned for the run), to the headers and on to the slot's
// release, after a warm-up. TypeScript by V8's precise coverage (a file counts when one of its functions
// was called); Lua by running the same script call again with every module function marked.
// Usage: npx tsx scripts/walk.ts [--json]   (ARCHITECTURE.md "The walk" draws what it prints)

import { Agent, createServer, request, type Server } from 'node:http';
import { Session } from 'node:inspector';
import type { AddressInfo } from 'node:net';
import { dirname, join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..');
const WARM_UP = 2_000;
const IN_FLIGHT = 10;

/** What one walk ran, as paths from the repository root. */
export interface Walk {
  readonly toHeaders: { readonly ts: string[]; readonly lua: string[] };
  readonly release: { readonly ts: string[]; readonly lua: string[] };
}

interface ScriptCall {
  readonly fn: string;
  readonly keys: string[];
  readonly args: string[];
}

interface FunctionCoverage {
  readonly functionName: string;
  readonly ranges: ReadonlyArray<{ readonly count: number }>;
}
interface ScriptCoverage {
  readonly url: string;
  readonly functions: readonly FunctionCoverage[];
}

function post<T>(session: Session, method: string, params: object = {}): Promise<T> {
  return new Promise((resolve, reject) => {
    session.post(method, params, (error, result) => (error ? reject(error) : resolve(result as T)));
  });
}

/** The repository's files (not node_modules, not this script) with a function called since the last take. */
async function ranFiles(session: Session, label?: string): Promise<string[]> {
  const { result } = await post<{ result: ScriptCoverage[] }>(session, 'Profiler.takePreciseCoverage');
  const files = new Set<string>();
  for (const script of result) {
    if (!script.url.startsWith('file://')) continue;
    const file = relative(ROOT, fileURLToPath(script.url));
    if (file.startsWith('..') || file.includes('node_modules') || file.startsWith('scripts/')) continue;
    if (script.functions.some((f) => (f.ranges[0]?.count ?? 0) > 0)) files.add(file);
    // WALK_FUNCTIONS=1: each function the request ran, on stderr, to see why a file is on the walk.
    if (process.env.WALK_FUNCTIONS && label) {
      for (const f of script.functions) {
        const count = f.ranges[0]?.count ?? 0;
        if (count > 0) console.error(`${label} ${file} ${f.functionName || '(anonymous)'} ${count}`);
      }
    }
  }
  return [...files].sort();
}

/**
 * The Lua modules whose functions one script call runs: the driver call of `fn` (scripts.ts DRIVERS) run
 * twice in one EVAL over modules marked at every function's start, the second call counted (the first
 * builds what a function library keeps between calls).
 */
async function luaModulesRun(
  eval_: (script: string, keys: string[], args: string[]) => Promise<unknown>,
  texts: Readonly<Record<string, string>>,
  call: ScriptCall,
): Promise<string[]> {
  const drivers: Record<string, string> = {
    check: "require('check')(KEYS, ARGV, 1, 1, #KEYS)",
    refund: "require('refund')(KEYS, ARGV)",
  };
  const driver = Object.entries(drivers).find(([name]) => call.fn.endsWith(`_${name}`))?.[1];
  if (driver === undefined) throw new Error(`walk: no driver known for the function ${call.fn}`);
  const sources = new Map<string, string>();
  const add = (code: string) => {
    for (const [, name] of code.matchAll(/require\('([\w-]+)'\)/g)) {
      if (name === undefined || sources.has(name)) continue;
      const text = texts[name];
      if (text === undefined) throw new Error(`walk: no Lua module ${name}`);
      sources.set(name, text);
      add(text);
    }
  };
  add(driver);
  const modules = [...sources].map(([name, text]) => {
    const marked = text.replace(
      /\bfunction\b\s*[\w.:]*\s*\([^)]*\)/g,
      (header) => `${header} WALK['${name}'] = true;`,
    );
    return `['${name}'] = function()\n${marked}\nend,`;
  });
  const script = [
    'local WALK = {}',
    'local LOADED, MODULES = {}, nil',
    'local function require(name)',
    '  local exports = LOADED[name]',
    '  if exports == nil then exports = MODULES[name](); LOADED[name] = exports end',
    '  return exports',
    'end',
    'MODULES = {',
    ...modules,
    '}',
    `local _ = ${driver}`,
    'WALK = {}',
    `_ = ${driver}`,
    'local ran = {}',
    'for name in pairs(WALK) do ran[#ran + 1] = name end',
    'return ran',
  ].join('\n');
  const ran = (await eval_(script, call.keys, call.args)) as string[];
  return ran.map((name) => `lua/${name}.lua`).sort();
}

/** Runs the walk once, in this process, on a Redis server of its own. */
export async function measureWalk(): Promise<Walk> {
  const session = new Session();
  session.connect();
  await post(session, 'Profiler.enable');
  await post(session, 'Profiler.startPreciseCoverage', { callCount: true, detailed: false });

  const { startRedis } = await import('../test/support/redis.js');
  const { default: express } = await import('express');
  const { createLimiter, RedisStore } = await import('../src/index.js');
  const { rateLimit } = await import('../adapters/express.js');
  const { LUA_TEXTS } = await import('../src/stores/redis/lua-texts.js');
  const { DEADLINE_TICK_MS } = await import('../src/limiter/deadlines.js');

  const redis = await startRedis();
  const client = redis.client();
  const admin = redis.client();
  // The script calls the store makes, recorded as they go out, and a way to learn when a refund is answered.
  const calls: ScriptCall[] = [];
  let refunded: (() => void) | undefined;
  let inFlight = 0;
  const call = client.call.bind(client) as (command: string, args: string[]) => Promise<unknown>;
  (client as unknown as { call: typeof call }).call = (command: string, args: string[]) => {
    const reply = call(command, args);
    inFlight++;
    const settled = () => {
      inFlight--;
    };
    reply.then(settled, settled);
    if (command.toUpperCase() === 'FCALL') {
      const [fn = '', count = '0', ...rest] = args;
      calls.push({ fn, keys: rest.slice(0, Number(count)), args: rest.slice(Number(count)) });
      if (fn.endsWith('_refund') && refunded) {
        const done = refunded;
        reply.then(done, done);
      }
    }
    return reply;
  };

  const limiter = createLimiter({
    store: new RedisStore({ client, prefix: 'walk' }),
    rules: [
      { name: 'api', key: 'ip', limit: 1e9, window: { type: 'fixed', size: 3_600_000 } },
      { name: 'apc', key: 'ip', limit: 1e9, window: { type: 'concurrency', lease: 60_000 } },
    ],
  });
  let atHandler: ((files: Promise<string[]>) => void) | undefined;
  const app = express();
  app.disable('x-powered-by');
  app.disable('etag');
  app.use(rateLimit(limiter));
  app.get('/', (_req, res) => {
    if (atHandler) {
      const take = ranFiles(session, 'headers');
      atHandler(take);
      atHandler = undefined;
      take.then(() => res.send('ok'));
    } else {
      res.send('ok');
    }
  });
  const server = await new Promise<Server>((resolve) => {
    const s = createServer({ keepAliveTimeout: 600_000 }, app);
    s.listen(0, '127.0.0.1', () => resolve(s));
  });
  const port = (server.address() as AddressInfo).port;
  const agent = new Agent({ keepAlive: true, maxSockets: IN_FLIGHT });
  const get = () =>
    new Promise<void>((resolve, reject) => {
      const req = request({ port, host: '127.0.0.1', path: '/', agent }, (res) => {
        if (res.statusCode !== 200) reject(new Error(`walk: status ${res.statusCode}`));
        res.resume();
        res.on('end', resolve);
      });
      req.on('error', reject);
      req.end();
    });
  try {
    for (let sent = 0; sent < WARM_UP; sent += IN_FLIGHT) {
      await Promise.all(Array.from({ length: IN_FLIGHT }, get));
    }
    // The warm-up's last releases answered, and a few turns with nothing sent: the walk sees one request alone.
    const turns = async (n: number) => {
      for (let turn = 0; turn < n; turn++) await new Promise((resolve) => setImmediate(resolve));
    };
    for (let quiet = 0; quiet < 3; ) {
      await turns(5);
      quiet = inFlight === 0 ? quiet + 1 : 0;
    }
    // And past a few ticks of the store calls' deadline ticker, which stops once no call is pending: the
    // request starts it again, as one reaching an idle server does (without this wait it ran or not by chance).
    await new Promise((resolve) => setTimeout(resolve, 5 * DEADLINE_TICK_MS));
    await turns(5);
    const released = new Promise<void>((resolve) => {
      refunded = resolve;
    });
    const headers = new Promise<Promise<string[]>>((resolve) => {
      atHandler = resolve;
    });
    calls.length = 0;
    await ranFiles(session);
    const answered = get();
    const toHeaders = await await headers;
    await answered;
    await released;
    // The refund's reply settles the slot's promises a few turns later.
    await turns(5);
    const release = await ranFiles(session, 'release');
    const evalScript = (script: string, keys: string[], args: string[]) =>
      admin.call('EVAL', [script, String(keys.length), ...keys, ...args]);
    const check = calls.find((c) => c.fn.endsWith('_check'));
    const refund = calls.find((c) => c.fn.endsWith('_refund'));
    if (check === undefined || refund === undefined) throw new Error('walk: no check or no refund was sent');
    return {
      toHeaders: {
        ts: toHeaders.filter((file) => !file.startsWith('test/')),
        lua: await luaModulesRun(evalScript, LUA_TEXTS, check),
      },
      release: {
        ts: release.filter((file) => !file.startsWith('test/')),
        lua: await luaModulesRun(evalScript, LUA_TEXTS, refund),
      },
    };
  } finally {
    agent.destroy();
    server.close();
    await limiter.close();
    await redis.stop();
    session.disconnect();
  }
}

if (process.argv[1] !== undefined && fileURLToPath(import.meta.url) === process.argv[1]) {
  const walk = await measureWalk();
  if (process.argv.includes('--json')) {
    console.log(JSON.stringify(walk));
  } else {
    const headers = [...walk.toHeaders.ts, ...walk.toHeaders.lua];
    const release = [...walk.release.ts, ...walk.release.lua].filter((file) => !headers.includes(file));
    console.log(`to the headers: ${headers.length} files`);
    for (const file of headers) console.log(`  ${file}`);
    console.log(`the release adds: ${release.length} files`);
    for (const file of release) console.log(`  ${file}`);
  }
  process.exit(0);
}
