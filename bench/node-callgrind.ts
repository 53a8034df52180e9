// Instructions the Node process runs per HTTP request, counted by callgrind: what each limiter middleware adds to a
// real request through a loopback socket, independent of machine load.
// `npm run bench -- node-cost`; alone: npx tsx bench/node-callgrind.ts   (NODE_CALLGRIND_REQUESTS=2000)
// Each framework's apps (bench/http-apps.ts: bare, the framework's own limiter, ratekeeper; memory and Redis) run in
// one Node process under valgrind --tool=callgrind (bench/node-callgrind-server.ts). This process sends each app
// its warm-up requests, zeroes the counters, sends the measured requests from 64 keep-alive connections and
// dumps them: instructions of the server process (every thread: JIT, GC) per request, less the bare app's.
// Redis (for the Redis rows) runs outside valgrind and is not counted here (bench/redis-callgrind.ts counts it).

import { execFile, spawn } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { stopChild, track } from '../test/support/processes.js';
import { startRedis } from '../test/support/redis.js';
import { drive } from './http-in-process.js';
import { num, ratio, type Section, type Table, textTable } from './report.js';

const run = promisify(execFile);

/** The apps measured besides the bare one: each framework's own limiter, and ours. */
const MEASURED: Record<'express' | 'fastify', RegExp> = {
  express: /express-rate-limit|ratekeeper/,
  fastify: /@fastify\/rate-limit|ratekeeper/,
};
const CONNECTIONS = 64;
/** Measured rounds per app, interleaved. */
const ROUNDS = 3;

export interface NodeCostRow {
  framework: string;
  name: string;
  group: string;
  /** Instructions of the server process per request. */
  perRequest: number;
  /** perRequest less the bare app's. */
  added: number;
}

function lastDump(dir: string): string {
  const files = readdirSync(dir)
    .filter((f) => /^cg\.out\.\d+\.\d+$/.test(f))
    .sort((a, b) => Number(a.split('.').pop()) - Number(b.split('.').pop()));
  return join(dir, files[files.length - 1] as string);
}

function dumpInstructions(file: string): number {
  const totals = /^(?:totals|summary): (\d+)/m.exec(readFileSync(file, 'utf8'));
  if (totals === null) throw new Error('no totals in the callgrind dump');
  return Number(totals[1]);
}

/** One framework's apps under callgrind: instructions per request of each. */
async function measureFramework(
  framework: 'express' | 'fastify',
  redisPort: number,
  requests: number,
  log: (line: string) => void,
): Promise<NodeCostRow[]> {
  const dir = mkdtempSync(join(tmpdir(), 'rk-node-callgrind-'));
  const script = fileURLToPath(new URL('./node-callgrind-server.ts', import.meta.url));
  const child = track(
    spawn(
      'valgrind',
      [
        '--tool=callgrind',
        `--callgrind-out-file=${join(dir, 'cg.out.%p')}`,
        process.execPath,
        '--import',
        'tsx',
        script,
        framework,
        String(redisPort),
        MEASURED[framework].source,
      ],
      { stdio: ['ignore', 'pipe', 'ignore'], cwd: fileURLToPath(new URL('..', import.meta.url)) },
    ),
  );
  try {
    const line = await new Promise<string>((resolve, reject) => {
      const lines = createInterface({ input: child.stdout as NonNullable<typeof child.stdout> });
      lines.once('line', resolve);
      child.once('exit', (code) => reject(new Error(`the app process exited (${code}) before listening`)));
    });
    const servers = JSON.parse(line) as Array<{ name: string; group: string; port: number }>;
    const keys = Array.from({ length: 10_000 }, (_, i) => `client-${i}`);
    // Warm-up of every app first (V8 compiles the paths they share), then ROUNDS measured rounds in turn;
    // the least count of each app is kept: a GC or a compilation landing in one window inflates it.
    for (const server of servers) await drive(server.port, CONNECTIONS, Math.max(requests, 3000), keys);
    const counts = servers.map((): number[] => []);
    for (let round = 0; round < ROUNDS; round++) {
      for (const [i, server] of servers.entries()) {
        await run('callgrind_control', ['-z', String(child.pid)]);
        await drive(server.port, CONNECTIONS, requests, keys);
        await run('callgrind_control', ['-d', String(child.pid)]);
        counts[i]?.push(Math.round(dumpInstructions(lastDump(dir)) / requests));
      }
    }
    const rows: NodeCostRow[] = servers.map((server, i) => {
      const perRequest = Math.min(...(counts[i] ?? []));
      log(
        `  ${server.name.padEnd(48)} ${num(perRequest).padStart(12)} instructions / request (${counts[i]?.map((c) => num(c)).join(', ')})`,
      );
      return { framework, name: server.name, group: server.group, perRequest, added: Number.NaN };
    });
    const bare = rows.find((r) => r.group === 'bare');
    for (const row of rows) row.added = bare === undefined ? Number.NaN : row.perRequest - bare.perRequest;
    return rows;
  } finally {
    await stopChild(child, 10_000);
    rmSync(dir, { recursive: true, force: true });
  }
}

export async function runNodeCallgrind(
  redisPort: number,
  log: (line: string) => void,
  requests = Number(process.env.NODE_CALLGRIND_REQUESTS ?? 2000),
): Promise<{ section: Section; rows: NodeCostRow[] }> {
  log(
    `express and fastify apps under callgrind (at once), ${requests} requests per round from ${CONNECTIONS} connections`,
  );
  const frameworks = await Promise.all(
    (['express', 'fastify'] as const).map((framework) =>
      measureFramework(framework, redisPort, requests, log),
    ),
  );
  const rows = frameworks.flat();
  return { section: nodeSection(rows, requests), rows };
}

function nodeSection(rows: NodeCostRow[], requests: number): Section {
  const table = (framework: string): Table => {
    const own = rows.filter((r) => r.framework === framework);
    const peerOf = (store: string) => own.find((r) => r.group === 'peer' && r.name.includes(store));
    return {
      title: `${framework}: Node instructions per HTTP request (callgrind)`,
      columns: ['app', 'instructions / request', 'added by the limiter', 'vs its peer (same store)'],
      rows: own.map((r) => {
        const store = r.name.includes('redis') ? 'redis' : 'memory';
        const peer = peerOf(store);
        return [
          r.name,
          num(r.perRequest),
          r.group === 'bare' ? '-' : num(r.added),
          r.group === 'ratekeeper' && peer ? ratio(r.added / peer.added) : '-',
        ];
      }),
    };
  };
  return {
    id: 'node-callgrind',
    title: 'Node work per HTTP request (callgrind)',
    intro:
      `Each app serves ${num(requests)} GET requests per round (after a warm-up of every app; ${ROUNDS} rounds in turn, ` +
      `the least count kept) from ${CONNECTIONS} keep-alive loopback ` +
      'connections of one client process, 10,000 distinct keys, all admitted; instructions of the server process ' +
      '(all its threads) counted by valgrind --tool=callgrind between a zeroing and a dump, per request. "Added" is ' +
      'the app less the bare app of its framework; Redis itself is not counted (see the callgrind table of ' +
      'redis-server). Command: `npm run bench -- node-cost`.',
    tables: [table('express'), table('fastify')],
  };
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const redis = await startRedis();
  try {
    const { section } = await runNodeCallgrind(redis.port, (line) => console.log(line));
    for (const table of section.tables) console.log(textTable(table));
  } finally {
    await redis.stop();
  }
  process.exit(0);
}
