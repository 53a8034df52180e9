// The HTTP and in-process scenarios for Fastify, Hono and NestJS alone (bare app vs app with ratekeeper), written
// to their own block of bench/RESULTS.md; `npm run bench` runs the same rows among Express's and Koa's.
//
//   npm run bench:frameworks           (BENCH_REPS, BENCH_QUICK as for npm run bench; BENCH_OUT=<file> elsewhere)

import os from 'node:os';
import { startRedis } from '../test/support/redis.js';
import { type BenchConfig, loadConfig } from './config.js';
import { runHttp } from './http.js';
import { type Framework, httpVariants } from './http-apps.js';
import { inProcess } from './http-frameworks.js';
import { injectRunner, measure, runMiddleware } from './middleware.js';
import { markdownTable, num, pct, type Section, type Table, textTable } from './report.js';
import { RESULTS_PATH, writeBlock } from './results-file.js';
import { median, spread } from './stats.js';

const FRAMEWORKS: readonly Framework[] = ['fastify', 'hono', 'nest'];

/**
 * Express measured as the three are (the whole app per request, in process), bare and with ratekeeper: the scale
 * for their "added" figures, which include the framework's cost of the response headers, not the limiter alone.
 */
async function expressWholeApp(config: BenchConfig, redisPort: number): Promise<Table> {
  const keys = Array.from({ length: config.distinctKeys }, (_, i) => `client-${i}`);
  const entries: Array<{
    name: string;
    run: ReturnType<typeof injectRunner>;
    close(): Promise<void>;
    cpu: number[];
  }> = [];
  for (const [index, variant] of httpVariants('express').entries()) {
    if (variant.group === 'peer') continue;
    const built = await variant.build({
      limit: config.admittedLimit,
      windowMs: config.windowMs,
      redisPort,
      keyHeader: 'x-api-key',
      prefix: `fw-express-${index}:`,
    });
    const run = injectRunner(inProcess(built.listener, 'x-api-key'));
    await measure(run, keys, Math.max(1000, config.middlewareRequests / 4));
    entries.push({
      name: variant.group === 'bare' ? 'express (bare app)' : variant.name,
      run,
      close: built.close,
      cpu: [],
    });
  }
  for (let rep = 0; rep < config.reps; rep++)
    for (const entry of entries) entry.cpu.push(await measure(entry.run, keys, config.middlewareRequests));
  const bare = entries[0]?.cpu ?? [];
  const rows = entries.map((e, i) => [
    e.name,
    num(median(e.cpu), 2),
    pct(spread(e.cpu)),
    i === 0 ? '-' : num(median(e.cpu.map((c, j) => c - (bare[j] ?? Number.NaN))), 2),
    '',
  ]);
  for (const e of entries) await e.close();
  return {
    title: `express (the scale): whole app CPU per request, ${num(config.distinctKeys)} clients, all admitted`,
    columns: ['app', 'CPU µs / request', 'spread', 'added µs / request', 'note'],
    rows,
  };
}

function log(line: string): void {
  process.stdout.write(`${line}\n`);
}

async function main(): Promise<void> {
  const config = loadConfig();
  const server = await startRedis();
  const started = Date.now();
  const sections: Section[] = [];
  try {
    sections.push((await runHttp(config, server.port, undefined, log, FRAMEWORKS)).section);
    const inProcessSection = (await runMiddleware(config, server.port, undefined, log, FRAMEWORKS)).section;
    try {
      inProcessSection.tables.push(await expressWholeApp(config, server.port));
    } catch (error) {
      log(`  express whole app: failed: ${error instanceof Error ? error.message : String(error)}`);
    }
    sections.push(inProcessSection);
  } finally {
    await server.stop();
  }
  const cpus = os.cpus();
  const out = [
    '## Fastify, Hono and NestJS (frameworks)',
    '',
    `Written by \`npm run bench:frameworks\`${config.quick ? ' with BENCH_QUICK=1 (a smoke run, not for quoting)' : ''} ` +
      `on ${new Date().toISOString().replace(/\.\d+Z$/, 'Z')} in ${Math.round((Date.now() - started) / 1000)} s: ` +
      `${cpus[0]?.model.trim() ?? 'unknown CPU'}, ${cpus.length} cores shared by the load generator, the apps and ` +
      `redis-server (and, here, other work): read the ratios to each framework's bare app, measured side by side, ` +
      `not the absolute figures. Node ${process.version}. The method is that of the HTTP and middleware sections above.`,
  ];
  for (const section of sections) {
    out.push('', `### ${section.title}`, '', section.intro);
    for (const table of section.tables) {
      out.push('', markdownTable(table).replace(/^### /m, '#### '));
      log(`\n${textTable(table)}`);
    }
  }
  await writeBlock('bench:frameworks', out.join('\n'), process.env.BENCH_OUT ?? RESULTS_PATH);
}

await main();
