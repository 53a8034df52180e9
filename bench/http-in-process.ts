// HTTP in process: each app behind a real loopback server in this process, driven by a minimal
// keep-alive client in this process; CPU per request, against the middleware-alone figures of middleware.ts.
// `npm run bench -- http-in-process`: what the in-memory middleware scenario leaves out, measured.
//
// The middleware scenario calls a limiter's middleware on requests built in memory: no socket, no parser,
// no response written, no `finish`, and its 64 lanes hand the limiter a new request the moment one
// passes. Here the same apps (bench/http-apps.ts) serve real requests over loopback sockets: Node's
// parser, `req.socket`, headers serialized, `finish` listeners run, and requests reach the limiter as
// the event loop reads them from the sockets (the batching a real server gets). The client is the same
// for every app, so app minus bare app is what each limiter adds to a real request.

import { createServer, type Server } from 'node:http';
import { type AddressInfo, connect, type Socket } from 'node:net';
import type { Redis } from 'ioredis';
import type { BenchConfig } from './config.js';
import { closeRedis, errorMessage, openRedis } from './contender.js';
import { type Framework, httpVariants } from './http-apps.js';
import { runMiddleware } from './middleware.js';
import { num, type Section, type Table } from './report.js';
import { median } from './stats.js';

const keyHeader = 'x-api-key';
/** Express and Fastify: the two servers most apps run, each with its own peer limiter; Koa beside them. */
const FRAMEWORKS = ['express', 'fastify', 'koa'] as const;

export interface InProcessRow {
  framework: Framework;
  name: string;
  group: string;
  /** CPU µs per request of this process: server, limiter and client. */
  cpuUs: number;
  /** Median of per-repetition (this - bare app). */
  addedUs: number;
  /** The middleware scenario's added µs for the same limiter. */
  middlewareAddedUs: number;
  reqPerSec: number;
  /** Requests per script call (FCALL, EVALSHA, EVAL) the server ran (INFO commandstats): how well calls were batched. */
  perScriptCall: number;
  failed?: string;
}

/**
 * `connections` keep-alive connections, each sending its next GET as soon as the previous response
 * has been read in full, until `count` responses; resolves with the requests per second.
 */
export function drive(
  port: number,
  connections: number,
  count: number,
  keys: readonly string[],
): Promise<number> {
  let sent = 0;
  let received = 0;
  const started = performance.now();
  return new Promise((resolve, reject) => {
    const sockets: Socket[] = [];
    const finish = () => {
      for (const socket of sockets) socket.destroy();
      resolve(count / ((performance.now() - started) / 1000));
    };
    const request = (socket: Socket) => {
      const key = keys[sent++ % keys.length] as string;
      socket.write(`GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n${keyHeader}: ${key}\r\n\r\n`);
    };
    for (let c = 0; c < connections; c++) {
      const socket = connect(port, '127.0.0.1');
      sockets.push(socket);
      let buffered = '';
      socket.setEncoding('latin1');
      socket.on('error', reject);
      socket.on('connect', () => request(socket));
      socket.on('data', (chunk: string) => {
        buffered += chunk;
        for (;;) {
          const end = buffered.indexOf('\r\n\r\n');
          if (end === -1) return;
          const length = /\r\ncontent-length: *(\d+)/i.exec(buffered.slice(0, end));
          const total = end + 4 + Number(length?.[1] ?? 0);
          if (buffered.length < total) return;
          if (!buffered.startsWith('HTTP/1.1 200')) {
            reject(new Error(`answered ${buffered.slice(9, 12)} instead of 200`));
            return;
          }
          buffered = buffered.slice(total);
          if (++received === count) return finish();
          if (sent < count) request(socket);
        }
      });
    }
  });
}

function listen(listener: Parameters<typeof createServer>[1]): Promise<Server> {
  return new Promise((resolve, reject) => {
    const server = createServer({ keepAliveTimeout: 60_000 }, listener);
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => resolve(server));
  });
}

/** Script calls the server has run: FCALL, EVALSHA and EVAL. */
async function scriptCalls(admin: Redis): Promise<number> {
  const info = await admin.info('commandstats');
  const calls = (name: string) =>
    Number(new RegExp(`^cmdstat_${name}:calls=(\\d+)`, 'm').exec(info)?.[1] ?? 0);
  return calls('fcall') + calls('evalsha') + calls('eval');
}

/** CPU µs per request, requests per second and per script call over `count` requests. */
async function measure(
  port: number,
  config: BenchConfig,
  count: number,
  keys: readonly string[],
  admin: Redis,
) {
  const calls = await scriptCalls(admin);
  const before = process.cpuUsage();
  const reqPerSec = await drive(port, config.httpConnections, count, keys);
  const used = process.cpuUsage(before);
  const perScriptCall = count / ((await scriptCalls(admin)) - calls);
  return { cpuUs: (used.user + used.system) / count, reqPerSec, perScriptCall };
}

export async function runHttpInProcess(
  config: BenchConfig,
  redisPort: number,
  filter: RegExp | undefined,
  log: (line: string) => void,
): Promise<{ section: Section; rows: InProcessRow[] }> {
  const keys = Array.from({ length: config.distinctKeys }, (_, i) => `client-${i}`);
  const count = config.middlewareRequests;
  const rows: InProcessRow[] = [];
  const admin = openRedis(redisPort);
  for (const framework of FRAMEWORKS) {
    const entries: Array<{
      row: InProcessRow;
      server: Server;
      close: () => Promise<void>;
      cpu: number[];
      rps: number[];
      batch: number[];
    }> = [];
    for (const [index, variant] of httpVariants(framework).entries()) {
      if (filter && variant.group !== 'bare' && !filter.test(variant.name)) continue;
      const row: InProcessRow = {
        framework,
        name: variant.name,
        group: variant.group,
        cpuUs: Number.NaN,
        addedUs: Number.NaN,
        middlewareAddedUs: Number.NaN,
        reqPerSec: Number.NaN,
        perScriptCall: Number.NaN,
      };
      try {
        const app = await variant.build({
          limit: config.admittedLimit,
          windowMs: config.windowMs,
          redisPort,
          keyHeader,
          prefix: `hip-${framework}-${index}:`,
        });
        const server = await listen(app.listener);
        await measure((server.address() as AddressInfo).port, config, Math.max(1000, count / 4), keys, admin);
        entries.push({ row, server, close: app.close, cpu: [], rps: [], batch: [] });
      } catch (error) {
        row.failed = errorMessage(error);
        rows.push(row);
      }
    }
    for (let rep = 0; rep < config.reps; rep++) {
      for (const entry of entries) {
        if (entry.row.failed) continue;
        try {
          const { cpuUs, reqPerSec, perScriptCall } = await measure(
            (entry.server.address() as AddressInfo).port,
            config,
            count,
            keys,
            admin,
          );
          entry.cpu.push(cpuUs);
          entry.rps.push(reqPerSec);
          entry.batch.push(perScriptCall);
        } catch (error) {
          entry.row.failed = errorMessage(error);
        }
      }
    }
    const bare = entries.find((e) => e.row.group === 'bare')?.cpu ?? [];
    for (const { row, server, close, cpu, rps, batch } of entries) {
      server.closeAllConnections();
      await new Promise((resolve) => server.close(resolve));
      await close().catch(() => {});
      row.cpuUs = median(cpu);
      row.reqPerSec = median(rps);
      row.perScriptCall = median(batch);
      row.addedUs = median(cpu.map((c, i) => c - (bare[i] ?? Number.NaN)));
      rows.push(row);
      log(`  ${row.name}: ${num(row.cpuUs, 2)} µs CPU per request, +${num(row.addedUs, 2)} µs`);
    }
  }
  await closeRedis(admin);
  // The middleware scenario on the same limiters, for the comparison.
  const alone = await runMiddleware(config, redisPort, filter, log, FRAMEWORKS);
  for (const row of rows) {
    const match = alone.rows.find(
      (m) =>
        m.framework === row.framework &&
        (m.name === row.name || (m.group === 'bare' && row.group === 'bare')),
    );
    row.middlewareAddedUs = match?.addedUs ?? Number.NaN;
  }
  return { section: section(rows, config), rows };
}

function section(rows: InProcessRow[], config: BenchConfig): Section {
  const table = (framework: Framework): Table => {
    const own = rows.filter((r) => r.framework === framework);
    const bare = own.find((r) => r.group === 'bare');
    return {
      title: `${framework}: real requests in process vs the middleware alone`,
      columns: [
        'app',
        'CPU µs / request',
        'added µs (real requests)',
        'added µs (middleware alone)',
        'req/s',
        'vs bare',
        'requests / script call',
      ],
      rows: own.map((r) =>
        r.failed !== undefined && !Number.isFinite(r.cpuUs)
          ? [r.name, 'failed', '-', '-', '-', r.failed, '-']
          : [
              r.name,
              num(r.cpuUs, 2),
              r.group === 'bare' ? '-' : num(r.addedUs, 2),
              r.group === 'bare' ? '-' : num(r.middlewareAddedUs, 2),
              num(r.reqPerSec),
              bare ? `${num((bare.cpuUs / r.cpuUs) * 100, 0)}%` : '-',
              Number.isFinite(r.perScriptCall) ? num(r.perScriptCall, 1) : '-',
            ],
      ),
    };
  };
  return {
    id: 'http-in-process',
    title: 'HTTP in process: real requests against the middleware alone',
    intro:
      `Each app of the HTTP scenario on a loopback server in the benchmark process, ${config.httpConnections} keep-alive ` +
      `connections from a minimal client in the same process (the same for every app), ${num(config.middlewareRequests)} ` +
      `requests per repetition, ${config.reps} interleaved repetitions, medians. "vs bare" is the bare app's CPU per ` +
      "request over this app's: the req/s ratio a server saturating its core would show. Redis rows count this " +
      'process only, not redis-server.',
    tables: FRAMEWORKS.map(table),
  };
}
