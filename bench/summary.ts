// One line per library across every scenario: the table meant for the README.

import type { BenchConfig } from './config.js';
import { num, ratio, type Section, type Table } from './report.js';
import type { Findings } from './targets.js';

/** Which row stands for a library in each scenario (undefined: the library has none). */
interface Library {
  name: string;
  redis?: string;
  memory?: string;
  express?: [redis?: string, memory?: string];
  koa?: [redis?: string, memory?: string];
}

const libraries: Library[] = [
  { name: 'raw floor (hand-written EVALSHA / Map)', redis: 'raw floor (EVALSHA)', memory: 'raw floor (Map)' },
  {
    name: 'ratekeeper (fixed window)',
    redis: 'ratekeeper redis fixed',
    memory: 'ratekeeper memory fixed',
    express: ['express + ratekeeper (redis)', 'express + ratekeeper (memory)'],
    koa: ['koa + ratekeeper (redis)', 'koa + ratekeeper (memory)'],
  },
  {
    name: 'rate-limiter-flexible',
    redis: 'rate-limiter-flexible RateLimiterRedis',
    memory: 'rate-limiter-flexible RateLimiterMemory',
    express: ['express + rate-limiter-flexible (redis)', 'express + rate-limiter-flexible (memory)'],
    koa: ['koa + rate-limiter-flexible (redis)', 'koa + rate-limiter-flexible (memory)'],
  },
  {
    name: 'express-rate-limit (+ rate-limit-redis)',
    redis: 'express-rate-limit + rate-limit-redis',
    memory: 'express-rate-limit MemoryStore',
    express: ['express + express-rate-limit + rate-limit-redis', 'express + express-rate-limit (memory)'],
  },
  {
    name: 'koa-ratelimit',
    redis: 'koa-ratelimit (redis driver)',
    memory: 'koa-ratelimit (memory driver)',
    koa: ['koa + koa-ratelimit (redis)', 'koa + koa-ratelimit (memory)'],
  },
];

function core(findings: Findings['coreRedis'], name: string | undefined): string {
  const row = findings?.find((r) => r.scenario === 'distinct')?.rows.find((r) => r.name === name);
  if (!row || !Number.isFinite(row.opsPerSec)) return '-';
  return `${num(row.opsPerSec)} (${ratio(row.vsFloor)})`;
}

function http(findings: Findings, framework: string, names: [string?, string?] | undefined): string {
  const rows = findings.http?.find((r) => r.framework === framework && r.mode === 'admitted')?.rows;
  const cell = (name?: string) => {
    const row = rows?.find((r) => r.name === name);
    return row && Number.isFinite(row.vsBare) ? ratio(row.vsBare) : '-';
  };
  return names ? `${cell(names[0])} / ${cell(names[1])}` : 'n/a';
}

/** The summary section, or undefined when nothing was measured. */
export function summarize(findings: Findings, config: BenchConfig): Section | undefined {
  if (
    !findings.coreRedis &&
    !findings.coreMemory &&
    !findings.http &&
    !findings.cost &&
    !findings.exactness
  ) {
    return undefined;
  }
  const table: Table = {
    title: 'One line per library',
    columns: [
      'library',
      'Redis decisions/s (x floor)',
      'memory decisions/s (x floor)',
      'Express x bare, Redis / memory',
      'Koa x bare, Redis / memory',
      'Redis commands sent / decision',
      'Redis bytes / key',
      `admitted in a race, limit ${num(config.exactLimit)}`,
    ],
    rows: libraries.map((lib) => {
      const cost = findings.cost?.find((r) => r.name === lib.redis);
      const exact = findings.exactness?.find((r) => r.name === lib.redis);
      return [
        lib.name,
        core(findings.coreRedis, lib.redis),
        core(findings.coreMemory, lib.memory),
        http(findings, 'express', lib.express),
        http(findings, 'koa', lib.koa),
        num(cost?.sentPerDecision, 2),
        num(cost?.bytesAfterOneHit),
        num(exact?.admitted),
      ];
    }),
  };
  return {
    id: 'summary',
    title: 'Summary',
    intro:
      `Medians of this run: ${num(config.distinctKeys)} distinct keys all admitted, ${config.concurrency} decisions in ` +
      'flight; HTTP with every request admitted. Details, latencies and the other window types below.',
    tables: [table],
  };
}
