// Middleware scenario: the CPU each limiter's Express or Koa middleware adds to a request, in process.
//
// The HTTP scenario's req/s ratios are what users see, but on a small shared machine autocannon, the
// apps and Redis compete for the same cores and two runs of the same bare app differ by 20% or more.
// Here each middleware is called directly on requests built in memory (the framework's own request,
// response and context objects, no socket), 64 in flight, and the process's CPU time is divided by
// the requests: what the middleware costs the app, to a fraction of a microsecond, whatever the load
// generator does. The bare row calls a pass-through middleware on the same requests; "added" is the
// difference. Redis rows count the client side only (ioredis and the limiter), not redis-server.
// Fastify, Hono and NestJS run each request through the whole app in process instead (fastify.inject, Hono's
// app.request, Nest's Express app on a request built in memory), bare and with ratekeeper: "added" is the same
// difference, "CPU" includes the framework's whole request handling.

import { IncomingMessage, ServerResponse } from 'node:http';
import { Socket } from 'node:net';
import express, { type RequestHandler } from 'express';
import Koa, { type Middleware } from 'koa';
import type { BenchConfig } from './config.js';
import { errorMessage } from './contender.js';
import { HTTP_FRAMEWORKS } from './http.js';
import { type Framework, httpVariants } from './http-apps.js';
import { num, pct, type Section, type Table } from './report.js';
import { median, spread } from './stats.js';

export interface MiddlewareRow {
  framework: Framework;
  name: string;
  group: string;
  /** Median CPU µs per request, request building included. */
  cpuUs: number;
  /** Median of per-repetition (this - pass-through). */
  addedUs: number;
  spread: number;
  failed?: string;
}

const keyHeader = 'x-api-key';
const concurrency = 64;

/** One socket shared by every request built here: only its address is read. */
const socket = new Socket();
Object.defineProperty(socket, 'remoteAddress', { value: '127.0.0.1' });

function fabricate(): { req: IncomingMessage; res: ServerResponse } {
  const req = new IncomingMessage(socket);
  req.method = 'GET';
  req.url = '/';
  req.httpVersion = '1.1';
  req.httpVersionMajor = 1;
  req.httpVersionMinor = 1;
  req.headers = { host: '127.0.0.1', [keyHeader]: '' };
  return { req, res: new ServerResponse(req) };
}

/**
 * Runs requests through a middleware, one at a time per lane: `lane()` gives a lane its function,
 * which resolves when the middleware passes the request on and rejects when it answers or fails.
 * Each lane reuses its own request and response objects (building them costs more than some
 * middlewares, and would bury their figures in allocation noise); Koa gets a fresh context each time.
 */
export type Runner = () => (key: string) => Promise<void>;

function expressRunner(middleware: RequestHandler): Runner {
  const app = express();
  return () => {
    const { req, res } = fabricate();
    // What Express's own init middleware does to every request.
    Object.setPrototypeOf(req, app.request);
    Object.setPrototypeOf(res, app.response);
    Object.assign(req, { app, res });
    Object.assign(res, { app, req });
    let settle: (error?: unknown) => void = () => {};
    res.end = (() => {
      settle(new Error(`answered ${res.statusCode} instead of passing the request on`));
      return res;
    }) as ServerResponse['end'];
    return (key) =>
      new Promise<void>((resolve, reject) => {
        settle = (error) => (error ? reject(error) : resolve());
        req.headers[keyHeader] = key;
        Promise.resolve(middleware(req as express.Request, res as express.Response, settle)).catch(reject);
      });
  };
}

function koaRunner(middleware: Middleware): Runner {
  const app = new Koa();
  return () => {
    const { req, res } = fabricate();
    return async (key) => {
      req.headers[keyHeader] = key;
      const ctx = app.createContext(req, res);
      let passed = false;
      await middleware(ctx, async () => {
        passed = true;
      });
      if (!passed) throw new Error(`answered ${ctx.status} instead of passing the request on`);
    };
  };
}

/** A whole app answering in process: each request must be admitted (2xx). */
export function injectRunner(inject: (key: string) => Promise<number>): Runner {
  return () => async (key) => {
    const status = await inject(key);
    if (status >= 300) throw new Error(`answered ${status} instead of admitting the request`);
  };
}

/** CPU µs per request over `count` requests, `concurrency` in flight. */
export async function measure(runner: Runner, keys: readonly string[], count: number): Promise<number> {
  let issued = 0;
  const lane = async () => {
    const run = runner();
    while (issued < count) await run(keys[issued++ % keys.length] as string);
  };
  const before = process.cpuUsage();
  await Promise.all(Array.from({ length: concurrency }, lane));
  const used = process.cpuUsage(before);
  return (used.user + used.system) / count;
}

/** Every limiter's middleware of both frameworks, interleaved repetitions, against a pass-through. */
export async function runMiddleware(
  config: BenchConfig,
  redisPort: number,
  filter: RegExp | undefined,
  log: (line: string) => void,
  frameworks: readonly Framework[] = HTTP_FRAMEWORKS,
): Promise<{ section: Section; rows: MiddlewareRow[] }> {
  const rows: MiddlewareRow[] = [];
  const keys = Array.from({ length: config.distinctKeys }, (_, i) => `client-${i}`);
  for (const framework of frameworks) {
    const entries: Array<{ row: MiddlewareRow; run: Runner; close: () => Promise<void>; cpu: number[] }> = [];
    for (const [index, variant] of httpVariants(framework).entries()) {
      if (filter && variant.group !== 'bare' && !filter.test(variant.name)) continue;
      const row: MiddlewareRow = {
        framework,
        name:
          variant.group !== 'bare'
            ? variant.name
            : `${framework} (${wholeApp(framework) ? 'bare app' : 'pass-through'})`,
        group: variant.group,
        cpuUs: Number.NaN,
        addedUs: Number.NaN,
        spread: Number.NaN,
      };
      try {
        const built = await variant.build({
          limit: config.admittedLimit,
          windowMs: config.windowMs,
          redisPort,
          keyHeader,
          prefix: `mw-${framework}-${index}:`,
        });
        // The bare app has no limiter: a pass-through middleware stands in for it.
        const run = built.inject
          ? injectRunner(built.inject)
          : framework === 'express'
            ? expressRunner(
                (built.middleware as RequestHandler | undefined) ?? ((_req, _res, next) => next()),
              )
            : koaRunner((built.middleware as Middleware | undefined) ?? ((_ctx, next) => next()));
        await measure(run, keys, Math.max(1000, config.middlewareRequests / 4));
        entries.push({ row, run, close: built.close, cpu: [] });
      } catch (error) {
        row.failed = errorMessage(error);
        rows.push(row);
      }
    }
    for (let rep = 0; rep < config.reps; rep++) {
      for (const entry of entries) {
        if (entry.row.failed) continue;
        try {
          entry.cpu.push(await measure(entry.run, keys, config.middlewareRequests));
        } catch (error) {
          entry.row.failed = errorMessage(error);
        }
      }
    }
    const bare = entries.find((e) => e.row.group === 'bare')?.cpu ?? [];
    for (const { row, cpu, close } of entries) {
      await close().catch(() => {});
      row.cpuUs = median(cpu);
      row.spread = spread(cpu);
      row.addedUs = median(cpu.map((c, i) => c - (bare[i] ?? Number.NaN)));
      rows.push(row);
      log(`  ${row.name}: ${num(row.cpuUs, 2)} µs CPU per request, +${num(row.addedUs, 2)} µs`);
    }
  }
  return { section: middlewareSection(rows, config), rows };
}

/** Fastify, Hono and Nest are measured as whole apps in process, Express and Koa by their middleware alone. */
const wholeApp = (framework: Framework) => framework !== 'express' && framework !== 'koa';

function middlewareSection(rows: MiddlewareRow[], config: BenchConfig): Section {
  const table = (framework: Framework): Table => ({
    title: `${framework}: ${wholeApp(framework) ? 'whole app' : 'middleware'} CPU per request, ${num(config.distinctKeys)} clients, all admitted`,
    columns: ['middleware', 'CPU µs / request', 'spread', 'added µs / request', 'note'],
    rows: rows
      .filter((r) => r.framework === framework)
      .map((r) =>
        r.failed !== undefined && !Number.isFinite(r.cpuUs)
          ? [r.name, 'failed', '-', '-', r.failed]
          : [
              r.name,
              num(r.cpuUs, 2),
              pct(r.spread),
              r.group === 'bare' ? '-' : num(r.addedUs, 2),
              r.failed ? `failed: ${r.failed}` : '',
            ],
      ),
  });
  return {
    id: 'middleware',
    title: 'Middleware CPU per request (in process)',
    intro:
      `Each limiter's own middleware, as in the HTTP apps (same rule, same headers), called directly on ` +
      `${num(config.middlewareRequests)} requests per repetition built in memory (the framework's request, ` +
      `response and context objects, no socket; each of the ${concurrency} lanes in flight reuses its own), ${config.reps} interleaved ` +
      'repetitions, medians. "CPU" is this process\'s CPU time per request, the framework\'s own work included; ' +
      '"added" is the median of per-repetition differences to the pass-through middleware, the cost the ' +
      'limiter adds to every request of an app. ' +
      'Redis rows count the client side only (the limiter and ioredis), not redis-server. Fastify, Hono and NestJS ' +
      '(global guard, Express platform) answer each request as a whole app in process (fastify.inject, app.request, ' +
      'Nest\'s Express app on a request built in memory), bare and with ratekeeper; their "added" is the same ' +
      'difference. Unlike req/s over ' +
      'loopback, these figures do not move with the load generator sharing the cores.',
    tables: [...new Set(rows.map((r) => r.framework))].map(table),
  };
}
