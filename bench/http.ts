// HTTP scenario: autocannon over loopback against each app, bare and limited, interleaved repetitions.

import autocannon from 'autocannon';
import type { BenchConfig } from './config.js';
import { errorMessage } from './contender.js';
import { Child } from './fork.js';
import type { Framework } from './http-apps.js';
import { ms, num, pct, ratio, type Section, type Table } from './report.js';
import { median, pairedRatio, spread } from './stats.js';

/** Admitted: distinct clients, all under their limit. Denied: one client far over its limit. */
export type HttpMode = 'admitted' | 'denied';

interface HttpRun {
  reqPerSec: number;
  p50Ms: number;
  p99Ms: number;
  ok: number;
  limited: number;
  errors: number;
}

export interface HttpRow {
  name: string;
  group: string;
  runs: HttpRun[];
  reqPerSec: number;
  spread: number;
  vsBare: number;
  p50Ms: number;
  p99Ms: number;
  ok: number;
  limited: number;
  errors: number;
  failed?: string;
}

export interface HttpResult {
  framework: Framework;
  mode: HttpMode;
  rows: HttpRow[];
}

const keyHeader = 'x-api-key';

async function drive(
  port: number,
  seconds: number,
  keys: readonly string[],
  connections: number,
): Promise<HttpRun> {
  let next = 0;
  const result = await autocannon({
    url: `http://127.0.0.1:${port}`,
    connections,
    duration: seconds,
    requests: [
      {
        method: 'GET',
        path: '/',
        setupRequest: (request) => ({
          ...request,
          headers: { [keyHeader]: keys[next++ % keys.length] as string },
        }),
      },
    ],
  });
  return {
    reqPerSec: result.requests.total / Math.max(result.duration, 0.001),
    p50Ms: result.latency.p50,
    p99Ms: result.latency.p99,
    ok: result['2xx'],
    limited: result['4xx'],
    errors: result.errors + result['5xx'],
  };
}

async function runMode(
  framework: Framework,
  mode: HttpMode,
  config: BenchConfig,
  redisPort: number,
  filter?: RegExp,
) {
  const child = Child.start('http-server', `${framework} server`);
  const rows: HttpRow[] = [];
  try {
    const ready = await child.ask(
      {
        type: 'start',
        framework,
        label: mode,
        limit: mode === 'admitted' ? config.admittedLimit : config.hotLimit,
        windowMs: config.windowMs,
        redisPort,
        keyHeader,
        filter: filter?.source ?? null,
      },
      config.stallTimeoutMs,
    );
    const servers = ready.servers as Array<{ name: string; group: string; port: number }>;
    for (const f of ready.failed as Array<{ name: string; reason: string }>) {
      rows.push({ ...emptyRow(f.name, 'failed'), failed: `setup: ${f.reason}` });
    }
    const entries = servers.map((server) => ({ server, row: emptyRow(server.name, server.group) }));
    const keys =
      mode === 'admitted'
        ? Array.from({ length: config.distinctKeys }, (_, i) => `client-${i}`)
        : ['attacker'];
    const seconds = mode === 'admitted' ? config.httpSeconds : config.httpDeniedSeconds;
    for (const { server, row } of config.httpWarmupSeconds > 0 ? entries : []) {
      try {
        await drive(server.port, config.httpWarmupSeconds, keys, config.httpConnections);
      } catch (error) {
        row.failed = errorMessage(error);
      }
    }
    for (let rep = 0; rep < config.reps; rep++) {
      for (const { server, row } of entries) {
        if (row.failed) continue;
        try {
          row.runs.push(await drive(server.port, seconds, keys, config.httpConnections));
        } catch (error) {
          row.failed = errorMessage(error);
        }
      }
    }
    await child.ask({ type: 'stop' }, config.stallTimeoutMs).catch(() => {});
    const bare = entries.find((e) => e.row.group === 'bare')?.row.runs.map((r) => r.reqPerSec) ?? [];
    for (const { row } of entries) {
      const rps = row.runs.map((r) => r.reqPerSec);
      row.reqPerSec = median(rps);
      row.spread = spread(rps);
      row.vsBare = pairedRatio(rps, bare);
      row.p50Ms = median(row.runs.map((r) => r.p50Ms));
      row.p99Ms = median(row.runs.map((r) => r.p99Ms));
      row.ok = row.runs.reduce((sum, r) => sum + r.ok, 0);
      row.limited = row.runs.reduce((sum, r) => sum + r.limited, 0);
      row.errors = row.runs.reduce((sum, r) => sum + r.errors, 0);
      rows.push(row);
    }
  } finally {
    await child.stop();
  }
  return { framework, mode, rows };
}

function emptyRow(name: string, group: string): HttpRow {
  const nan = Number.NaN;
  return {
    name,
    group,
    runs: [],
    reqPerSec: nan,
    spread: nan,
    vsBare: nan,
    p50Ms: nan,
    p99Ms: nan,
    ok: 0,
    limited: 0,
    errors: 0,
  };
}

function httpTable(result: HttpResult, config: BenchConfig): Table {
  const title =
    result.mode === 'admitted'
      ? `${result.framework}: ${num(config.distinctKeys)} clients, all admitted`
      : `${result.framework}: one client over its limit of ${config.hotLimit} (mostly 429)`;
  return {
    title,
    columns: ['app', 'req/s', 'spread', 'x bare app', 'p50 ms', 'p99 ms', '2xx', '429 / 4xx', 'note'],
    rows: result.rows.map((row) =>
      row.runs.length === 0
        ? [row.name, 'failed', '-', '-', '-', '-', '-', '-', row.failed ?? '']
        : [
            row.name,
            num(row.reqPerSec),
            pct(row.spread),
            ratio(row.vsBare),
            ms(row.p50Ms),
            ms(row.p99Ms),
            num(row.ok),
            num(row.limited),
            [row.errors ? `${num(row.errors)} errors` : '', row.failed ? `failed: ${row.failed}` : '']
              .filter(Boolean)
              .join('; '),
          ],
    ),
  };
}

/** Every framework this scenario knows; Fastify, Hono and Nest with ratekeeper only (no peer rows). */
export const HTTP_FRAMEWORKS: readonly Framework[] = ['express', 'koa', 'fastify', 'hono', 'nest'];

/** Each framework with every limiter: all admitted, then one client over its limit. */
export async function runHttp(
  config: BenchConfig,
  redisPort: number,
  filter: RegExp | undefined,
  log: (line: string) => void,
  frameworks: readonly Framework[] = HTTP_FRAMEWORKS,
): Promise<{ section: Section; results: HttpResult[] }> {
  const results: HttpResult[] = [];
  const plan: Array<[Framework, HttpMode]> = [
    ...frameworks.map((f): [Framework, HttpMode] => [f, 'admitted']),
    ...frameworks.map((f): [Framework, HttpMode] => [f, 'denied']),
  ];
  for (const [framework, mode] of plan) {
    try {
      results.push(await runMode(framework, mode, config, redisPort, filter));
    } catch (error) {
      results.push({
        framework,
        mode,
        rows: [{ ...emptyRow(`${framework} apps`, 'failed'), failed: errorMessage(error) }],
      });
    }
    log(`  http ${framework} ${mode}: done`);
  }
  const section: Section = {
    id: 'http',
    title: 'HTTP over loopback: Express, Koa, Fastify, Hono, NestJS',
    intro:
      `autocannon in the benchmark process, ${config.httpConnections} keep-alive connections, against apps in one ` +
      `child process per framework (one port per app, a GET route answering "ok"). Every limiter keys on the ` +
      `${keyHeader} header with one fixed-window rule (its library's defaults otherwise, headers included). ` +
      `Runs of ${config.httpSeconds} s (all admitted, ${num(config.distinctKeys)} clients cycled) or ` +
      `${config.httpDeniedSeconds} s (one client over its limit), after a ${config.httpWarmupSeconds} s warm-up each; ` +
      `${config.reps} interleaved repetitions, medians; "x bare app" is the median of per-repetition ratios to the ` +
      'same framework without a limiter. rate-limiter-flexible ships no middleware: its README pattern is used. ' +
      'Fastify (plugin), Hono (middleware) and NestJS (global guard, Express platform) are measured with ratekeeper ' +
      'against their bare app only.',
    tables: results.map((r) => httpTable(r, config)),
  };
  return { section, results };
}
