// The HTTP and in-process scenarios for Fastify, Hono and NestJS alone (bare app vs app with ratekeeper), written
// to their own block of bench/RESULTS.md; `npm run bench` runs the same rows among Express's and Koa's.
//
//   npm run bench:frameworks           (BENCH_REPS, BENCH_QUICK as for npm run bench; BENCH_OUT=<file> elsewhere)

import os from 'node:os';
import { startRedis } from '../test/support/redis.js';
import { loadConfig } from './config.js';
import { runHttp } from './http.js';
import type { Framework } from './http-apps.js';
import { runMiddleware } from './middleware.js';
import { markdownTable, type Section, textTable } from './report.js';
import { RESULTS_PATH, writeBlock } from './results-file.js';

const FRAMEWORKS: readonly Framework[] = ['fastify', 'hono', 'nest'];

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
    sections.push((await runMiddleware(config, server.port, undefined, log, FRAMEWORKS)).section);
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
