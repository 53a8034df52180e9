// Entry of `npm run bench`: starts a throwaway Redis, runs the chosen scenarios, prints and writes the results.

import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { type RedisServer, startRedis } from '../test/support/redis.js';
import { runBundle } from './bundle.js';
import { type BenchConfig, loadConfig } from './config.js';
import { errorMessage } from './contender.js';
import { loadContenders } from './contenders.js';
import { runCore } from './core.js';
import { runCost } from './cost.js';
import { runExactness } from './exactness.js';
import { runHotKeyBench } from './hot-key.js';
import { runHttp } from './http.js';
import { runHttpInProcess } from './http-in-process.js';
import { runMiddleware } from './middleware.js';
import { runNodeCallgrind } from './node-callgrind.js';
import { runPostgres } from './postgres.js';
import { ratekeeperSource } from './ratekeeper.js';
import { runRedisCallgrind } from './redis-callgrind.js';
import { describeMachine, resultsMarkdown, type Section, textTable, writeText } from './report.js';
import { keptPart, readResults } from './results-file.js';
import { runRuleCount } from './rule-count.js';
import { runScaleOut } from './scale-out.js';
import { summarize } from './summary.js';
import { evaluateTargets, type Findings } from './targets.js';

const commands = [
  'all',
  'core-redis',
  'core-memory',
  'http',
  'middleware',
  'redis-cost',
  'node-cost',
  'exactness',
  'rules',
  'http-in-process',
  'scale-out',
  'postgres',
  'hot-key',
  'bundle',
] as const;
type Command = (typeof commands)[number];

const usage = `usage: npm run bench [-- <command>] [--filter <regex>] [--out <file>]
commands: ${commands.join(', ')} (default: all; node-cost, postgres, hot-key and bundle run only when named)
  --filter  only contenders whose name matches (floors and bare apps always run); or BENCH_FILTER
  --out     where to write the Markdown results; or BENCH_OUT
            default: bench/RESULTS.md for a full 'all' run, else bench/.bench-tmp/RESULTS-<command>.md
env: BENCH_QUICK=1 for a short smoke run; BENCH_REPS=n repetitions (default 3, quick 1);
     REDIS_SERVER_BIN for another redis-server binary;
     BENCH_WATCHDOG_MIN=n gives up after n minutes (default 20; node-cost with several long runs needs more)`;

/** Whole-run watchdog: every scenario is bounded, this catches what is not (BENCH_WATCHDOG_MIN, default 20). */
const watchdogMinutes = Number(process.env.BENCH_WATCHDOG_MIN ?? 20);
if (!(watchdogMinutes > 0)) {
  throw new Error(
    `BENCH_WATCHDOG_MIN must be a positive number of minutes, got '${process.env.BENCH_WATCHDOG_MIN}'`,
  );
}
const watchdogMs = watchdogMinutes * 60_000;

function log(line: string): void {
  process.stdout.write(`${line}\n`);
}

function method(config: BenchConfig, filter: RegExp | undefined): string[] {
  return [
    `ratekeeper measured from ${ratekeeperSource()}${filter ? `; contenders filtered by /${filter.source}/i` : ''}.`,
    'One machine: the benchmark process (load generator), the apps under test and redis-server share its cores; ' +
      'read ratios, measured side by side in the same run, rather than absolute figures.',
    `Every contender is created once per scenario, warmed up, then measured in ${config.reps} interleaved ` +
      'repetitions (A B C A B C ...); tables give medians, ratios are medians of per-repetition ratios.',
    'Raw floor: a hand-written fixed-window script (SET NX PX, else INCR) loaded with SCRIPT LOAD and called with ' +
      'EVALSHA through ioredis, the least a Redis limiter can cost; also with ioredis enableAutoPipelining. ' +
      'Raw memory floor: one Map entry per key.',
    'Core scenarios call each library the way its own middleware does: rate-limiter-flexible consume(), ' +
      'express-rate-limit store.increment(), koa-ratelimit a new limiter and get() per request; ours consume() ' +
      'for one rule and check() for several rules of one identity.',
    'A contender that throws or stalls is reported as failed; the run goes on.',
  ];
}

async function runScenario<T extends { section: Section }>(
  name: string,
  work: () => Promise<T>,
  sections: Section[],
  findings: Findings,
  keep: (result: T) => void,
): Promise<void> {
  const started = Date.now();
  log(`\n# ${name}`);
  try {
    const result = await work();
    keep(result);
    sections.push(result.section);
    for (const table of result.section.tables) log(textTable(table));
  } catch (error) {
    log(`  ${name} failed: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}`);
    sections.push({ id: name, title: name, intro: `**Failed:** ${errorMessage(error)}`, tables: [] });
    findings.failures.push(`${name}: ${errorMessage(error)}`);
  }
  log(`  (${name}: ${((Date.now() - started) / 1000).toFixed(1)} s)`);
}

async function main(): Promise<number> {
  const { values, positionals } = parseArgs({
    allowPositionals: true,
    options: { filter: { type: 'string' }, out: { type: 'string' }, help: { type: 'boolean', short: 'h' } },
  });
  const command = (positionals[0] ?? 'all') as Command;
  if (values.help || !commands.includes(command) || positionals.length > 1) {
    log(usage);
    return values.help ? 0 : 2;
  }
  const config = loadConfig();
  const filterSource = values.filter ?? process.env.BENCH_FILTER;
  const filter = filterSource ? new RegExp(filterSource, 'i') : undefined;
  const started = Date.now();
  const watchdog = setTimeout(() => {
    log(`bench: still running after ${watchdogMs / 60_000} min, giving up`);
    process.exit(1);
  }, watchdogMs);
  watchdog.unref();

  log(`ratekeeper bench: ${command}${config.quick ? ' (BENCH_QUICK)' : ''}`);
  if (command === 'scale-out') {
    // Its own servers (one Redis, then a Cluster) and its own block in RESULTS.md.
    await runScaleOut(log);
    return 0;
  }
  if (command === 'bundle') {
    // No server: what an edge app ships, its own block in RESULTS.md.
    await runBundle(log);
    return 0;
  }
  if (command === 'postgres') {
    // Its own PostgreSQL and Redis, and its own block in RESULTS.md.
    await runPostgres(log);
    return 0;
  }
  if (command === 'hot-key') {
    // Its own Redis and PostgreSQL, and its own block in RESULTS.md.
    await runHotKeyBench(log);
    return 0;
  }
  let redis: RedisServer | undefined;
  const admin = { close: async () => {} };
  try {
    redis = await startRedis();
    const server = redis;
    log(`redis-server ${server.version} on 127.0.0.1:${server.port}`);
    const adminClient = server.client();
    admin.close = async () => {
      adminClient.disconnect();
    };
    const { contenders, unavailable } = await loadContenders(filter);
    for (const u of unavailable) log(`not measured: ${u.name} (${u.reason})`);
    log(`contenders: ${contenders.length}`);

    const sections: Section[] = [];
    const findings: Findings = { failures: [] };
    const wants = (c: Command) => command === 'all' || command === c;
    if (wants('core-redis')) {
      await runScenario(
        'core-redis',
        () => runCore('redis', contenders, config, server.port, log),
        sections,
        findings,
        (r) => {
          findings.coreRedis = r.results;
        },
      );
    }
    if (wants('core-memory')) {
      await runScenario(
        'core-memory',
        () => runCore('memory', contenders, config, server.port, log),
        sections,
        findings,
        (r) => {
          findings.coreMemory = r.results;
        },
      );
    }
    if (wants('http')) {
      await runScenario(
        'http',
        () => runHttp(config, server.port, filter, log),
        sections,
        findings,
        (r) => {
          findings.http = r.results;
        },
      );
    }
    if (command === 'http-in-process') {
      await runScenario(
        'http-in-process',
        () => runHttpInProcess(config, server.port, filter, log),
        sections,
        findings,
        () => {},
      );
    }
    if (wants('middleware')) {
      await runScenario(
        'middleware',
        () => runMiddleware(config, server.port, filter, log),
        sections,
        findings,
        (r) => {
          findings.middleware = r.rows;
        },
      );
    }
    if (wants('redis-cost')) {
      await runScenario(
        'redis-cost',
        () => runCost(contenders, config, server.port, adminClient, log),
        sections,
        findings,
        (r) => {
          findings.cost = r.rows;
        },
      );
      // Instructions per decision inside redis-server, on a server of its own under callgrind.
      await runScenario(
        'redis-callgrind',
        () => runRedisCallgrind(log, { decisions: config.quick ? 500 : 2000, ...(filter && { filter }) }),
        sections,
        findings,
        () => {},
      );
    }
    if (command === 'node-cost') {
      // Node's own work per HTTP request, each Express app under callgrind (minutes: not part of 'all').
      await runScenario(
        'node-cost',
        () => runNodeCallgrind(server.port, log, filter ? { filter } : {}),
        sections,
        findings,
        () => {},
      );
    }
    if (wants('exactness')) {
      await runScenario(
        'exactness',
        () => runExactness(contenders, config, server.port, log),
        sections,
        findings,
        (r) => {
          findings.exactness = r.rows;
        },
      );
    }

    if (wants('rules')) {
      await runScenario(
        'rules',
        () => runRuleCount(config.reps, config.quick ? 200 : 500, log),
        sections,
        findings,
        () => {},
      );
    }

    const targets = evaluateTargets(findings, config, command === 'all');
    if (targets) {
      sections.push(targets);
      for (const table of targets.tables) log(textTable(table));
    }
    const summary = command === 'all' ? summarize(findings, config) : undefined;
    if (summary) {
      sections.unshift(summary);
      for (const table of summary.tables) log(textTable(table));
    }
    const durationS = (Date.now() - started) / 1000;
    const defaultOut =
      command === 'all' && !config.quick && !filter
        ? 'RESULTS.md'
        : `.bench-tmp/RESULTS-${command}${config.quick ? '-quick' : ''}.md`;
    const out = values.out ?? process.env.BENCH_OUT ?? fileURLToPath(new URL(defaultOut, import.meta.url));
    const markdown = resultsMarkdown({
      machine: describeMachine(server.version),
      command,
      quick: config.quick,
      durationS,
      method: method(config, filter),
      sections,
      unavailable,
      kept: keptPart(await readResults(out)),
    });
    await writeText(out, markdown);
    log(`\nwrote ${out}; ${command} took ${durationS.toFixed(0)} s`);
    return 0;
  } finally {
    await admin.close();
    await redis?.stop();
  }
}

main().then(
  (code) => process.exit(code),
  (error: unknown) => {
    log(`bench failed: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}`);
    process.exit(1);
  },
);
