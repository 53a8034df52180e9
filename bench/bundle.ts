// `npm run bench -- bundle`: what a Worker or an edge function ships. Small apps bundled with esbuild as
// wrangler bundles a Worker (ESM, the workerd/worker/browser conditions, platform neutral, minified, nothing
// external but the framework the app brings itself), gzipped: ratekeeper/fetch with the memory store, with
// RedisStore over @upstash/redis, Hono's rateLimit, and @upstash/ratelimit beside them in the same run;
// with what weighs most in ratekeeper/fetch's (esbuild's metafile). Writes its block in bench/RESULTS.md.
import { fileURLToPath } from 'node:url';
import { gzipSync } from 'node:zlib';
import { build, type Metafile } from 'esbuild';
import { markdownTable, textTable } from './report.js';
import { RESULTS_PATH, writeBlock } from './results-file.js';

const ROOT = fileURLToPath(new URL('..', import.meta.url));
/** The package's entry points as users import them, from this checkout's sources. */
const INDEX = `${ROOT}src/index.ts`;
const FETCH = `${ROOT}adapters/fetch.ts`;
const HONO = `${ROOT}adapters/hono.ts`;

/** The gzip level of the figures: the highest, as a CDN compresses static assets. */
const GZIP_LEVEL = 9;
/** ratekeeper/fetch with the memory store: the target, gzipped. */
const TARGET_GZIP_BYTES = 30 * 1024;

interface App {
  name: string;
  /** The Worker's source (an ES module). */
  source: string;
  /** Packages the app brings and pays for anyway (Hono for a Hono app): left out of the figure. */
  external?: string[];
}

const RULES = `[{ name: 'api', key: 'ip', limit: 100, window: { type: 'fixed', size: '1m' } }]`;

const APPS: App[] = [
  {
    name: 'ratekeeper/fetch + memory store',
    source: `import { withRateLimit } from ${JSON.stringify(FETCH)};
export default { fetch: withRateLimit(() => new Response('ok'), ${RULES}) };`,
  },
  {
    name: 'ratekeeper/hono + memory store (Hono itself left out)',
    source: `import { rateLimit } from ${JSON.stringify(HONO)};
export const limit = rateLimit(${RULES});`,
    external: ['hono', 'hono/*'],
  },
  {
    name: 'ratekeeper/fetch + RedisStore + @upstash/redis',
    source: `import { Redis } from '@upstash/redis/cloudflare';
import { createLimiter, RedisStore } from ${JSON.stringify(INDEX)};
import { withRateLimit } from ${JSON.stringify(FETCH)};
let handler;
export default { fetch(request, env, ctx) {
  handler ??= withRateLimit(() => new Response('ok'), createLimiter({
    store: new RedisStore({ client: Redis.fromEnv(env) }), rules: ${RULES} }));
  return handler(request, env, ctx);
} };`,
  },
  {
    name: '@upstash/ratelimit 2.2.0 + @upstash/redis',
    source: `import { Ratelimit } from '@upstash/ratelimit';
import { Redis } from '@upstash/redis/cloudflare';
let limiter;
export default { async fetch(request, env) {
  limiter ??= new Ratelimit({ redis: Redis.fromEnv(env), limiter: Ratelimit.fixedWindow(100, '1 m') });
  const { success } = await limiter.limit(request.headers.get('cf-connecting-ip') ?? 'anonymous');
  return new Response(success ? 'ok' : 'Too Many Requests', { status: success ? 200 : 429 });
} };`,
  },
];

interface Measured {
  name: string;
  minified: number;
  gzipped: number;
  meta: Metafile;
}

async function measure(app: App): Promise<Measured> {
  const result = await build({
    stdin: { contents: app.source, loader: 'js', resolveDir: ROOT, sourcefile: 'worker.js' },
    bundle: true,
    format: 'esm',
    platform: 'neutral',
    conditions: ['workerd', 'worker', 'browser'],
    mainFields: ['module', 'main'],
    target: 'es2022',
    minify: true,
    write: false,
    metafile: true,
    logLevel: 'silent',
    external: app.external ?? [],
  });
  const code = result.outputFiles[0]?.contents ?? new Uint8Array();
  return {
    name: app.name,
    minified: code.length,
    gzipped: gzipSync(code, { level: GZIP_LEVEL }).length,
    meta: result.metafile,
  };
}

/** A package's name, or a source file's path from the repository root. */
function owner(input: string): string {
  const at = input.lastIndexOf('node_modules/');
  if (at < 0) return input.replace(ROOT, '');
  const parts = input.slice(at + 'node_modules/'.length).split('/');
  return parts[0]?.startsWith('@') ? `${parts[0]}/${parts[1]}` : (parts[0] ?? input);
}

/** Minified bytes in the output per package and per folder of ratekeeper, largest first. */
function weights(meta: Metafile): [string, number][] {
  const by = new Map<string, number>();
  for (const output of Object.values(meta.outputs)) {
    for (const [input, { bytesInOutput }] of Object.entries(output.inputs)) {
      const name = owner(input);
      const group = name.includes('/') && !name.startsWith('@') ? name.replace(/\/[^/]+$/, '/') : name;
      by.set(group, (by.get(group) ?? 0) + bytesInOutput);
    }
  }
  return [...by].sort((a, b) => b[1] - a[1]);
}

const kb = (bytes: number) => (bytes / 1024).toFixed(1);

export async function runBundle(log: (line: string) => void): Promise<void> {
  const measured: Measured[] = [];
  for (const app of APPS) measured.push(await measure(app));
  const sizes = {
    title: 'Bundle sizes (KiB)',
    columns: ['app', 'minified', 'gzipped'],
    rows: measured.map((m) => [m.name, kb(m.minified), kb(m.gzipped)]),
  };
  const fetchApp = measured[0] as Measured;
  const heavy = weights(fetchApp.meta).slice(0, 12);
  const parts = {
    title: `What ratekeeper/fetch + memory store is made of (minified KiB, of ${kb(fetchApp.minified)})`,
    columns: ['package or folder', 'minified'],
    rows: heavy.map(([name, bytes]) => [name, kb(bytes)]),
  };
  for (const table of [sizes, parts]) log(textTable(table));
  const verdict =
    fetchApp.gzipped <= TARGET_GZIP_BYTES
      ? `within the target of ${kb(TARGET_GZIP_BYTES)} KiB gzipped`
      : `over the target of ${kb(TARGET_GZIP_BYTES)} KiB gzipped by ${kb(fetchApp.gzipped - TARGET_GZIP_BYTES)} KiB`;
  const body = [
    '## Bundle size on the edge',
    '',
    `Made by \`npm run bench -- bundle\` on Node ${process.version}, ${new Date().toISOString().slice(0, 10)}: each app ` +
      'bundled from this checkout with esbuild as wrangler bundles a Worker (ESM, conditions workerd/worker/browser, ' +
      `platform neutral, minified, target es2022), gzip level ${GZIP_LEVEL}. Hono's own code is left out of the Hono row. ` +
      `ratekeeper/fetch + memory store is ${kb(fetchApp.gzipped)} KiB gzipped: ${verdict}.`,
    '',
    markdownTable(sizes),
    '',
    markdownTable(parts),
  ].join('\n');
  await writeBlock('bench:bundle', body, process.env.BENCH_OUT ?? RESULTS_PATH);
}
