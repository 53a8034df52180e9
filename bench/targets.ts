// The performance targets the project set itself (throughput, latency, cost per decision, exactness),
// checked against the figures of this run.

import type { BenchConfig } from './config.js';
import type { CoreResult, CoreRow } from './core.js';
import type { CostRow } from './cost.js';
import type { ExactRow } from './exactness.js';
import type { HttpResult } from './http.js';
import type { MiddlewareRow } from './middleware.js';
import { num, ratio, type Section, type Table } from './report.js';

/** Everything the scenarios measured, as data. */
export interface Findings {
  failures: string[];
  coreRedis?: CoreResult[];
  coreMemory?: CoreResult[];
  http?: HttpResult[];
  middleware?: MiddlewareRow[];
  cost?: CostRow[];
  exactness?: ExactRow[];
}

type Check = [target: string, measured: string, verdict: string];

function verdict(ok: boolean | undefined): string {
  if (ok === undefined) return 'not measured';
  return ok ? 'met' : 'MISSED';
}

function row(results: CoreResult[] | undefined, scenario: string, name: string): CoreRow | undefined {
  const found = results?.find((r) => r.scenario === scenario)?.rows.find((r) => r.name === name);
  return found && Number.isFinite(found.opsPerSec) ? found : undefined;
}

function coreChecks(findings: Findings): Check[] {
  const checks: Check[] = [];
  const one = row(findings.coreRedis, 'distinct', 'ratekeeper redis fixed');
  const peers =
    findings.coreRedis
      ?.find((r) => r.scenario === 'distinct')
      ?.rows.filter((r) => r.group === 'peer' && Number.isFinite(r.opsPerSec)) ?? [];
  const bestPeer = peers.reduce<CoreRow | undefined>(
    (best, r) => (!best || r.opsPerSec > best.opsPerSec ? r : best),
    undefined,
  );
  checks.push([
    'Redis, one rule, admitted: >= 1.2x raw floor',
    one ? ratio(one.vsFloor) : '-',
    verdict(one && one.vsFloor >= 1.2),
  ]);
  checks.push([
    'Redis, one rule, admitted: ahead of every peer',
    one && bestPeer ? `${num(one.opsPerSec)}/s vs ${bestPeer.name} ${num(bestPeer.opsPerSec)}/s` : '-',
    verdict(one && bestPeer ? one.opsPerSec > bestPeer.opsPerSec : undefined),
  ]);
  const x1 = row(findings.coreRedis, 'distinct', 'ratekeeper redis fixed x1 rules');
  const x3 = row(findings.coreRedis, 'distinct', 'ratekeeper redis fixed x3 rules');
  checks.push([
    'Redis, 3 rules of one identity: >= 0.8x one rule (check())',
    x1 && x3 ? ratio(x3.opsPerSec / x1.opsPerSec) : '-',
    verdict(x1 && x3 ? x3.opsPerSec / x1.opsPerSec >= 0.8 : undefined),
  ]);
  // Which side bounds each figure: the client's CPU per decision, or a redis-server near one full core.
  if (x1 && x3) {
    const side = (r: CoreRow) =>
      `client ${num(r.clientCpuUs, 1)} µs, Redis ${num(r.redisCpuUs, 1)} µs / decision, Redis busy ${num(r.redisBusy * 100)}%`;
    checks.push(['Redis, 1 vs 3 rules: CPU per decision', `x1: ${side(x1)}; x3: ${side(x3)}`, 'info']);
  }
  const x3cost = findings.cost?.find((r) => r.name === 'ratekeeper redis fixed x3 rules');
  checks.push([
    'Redis, 3 rules of one identity: one round trip',
    x3cost?.sentPerDecision !== undefined
      ? `${num(x3cost.sentPerDecision, 2)} commands sent / decision`
      : '-',
    verdict(x3cost?.sentPerDecision !== undefined ? x3cost.sentPerDecision <= 1 : undefined),
  ]);
  const cached = row(findings.coreRedis, 'hot', 'ratekeeper redis fixed + denyCache');
  checks.push([
    'Hot denied key, deny cache: >= 10x our Redis admitted path',
    cached && one ? ratio(cached.opsPerSec / one.opsPerSec) : '-',
    verdict(cached && one ? cached.opsPerSec / one.opsPerSec >= 10 : undefined),
  ]);
  const cachedCost = findings.cost?.find((r) => r.name === 'ratekeeper redis fixed + denyCache');
  checks.push([
    'Hot denied key, deny cache: zero commands after the first denial',
    cachedCost?.sentPerDenied !== undefined ? `${num(cachedCost.sentPerDenied, 3)} / denied decision` : '-',
    verdict(cachedCost?.sentPerDenied !== undefined ? cachedCost.sentPerDenied === 0 : undefined),
  ]);
  const memory = row(findings.coreMemory, 'distinct', 'ratekeeper memory fixed');
  for (const peer of ['rate-limiter-flexible RateLimiterMemory', 'express-rate-limit MemoryStore']) {
    const other = row(findings.coreMemory, 'distinct', peer);
    checks.push([
      `Memory store: >= 1.5x ${peer}`,
      memory && other ? ratio(memory.opsPerSec / other.opsPerSec) : '-',
      verdict(memory && other ? memory.opsPerSec / other.opsPerSec >= 1.5 : undefined),
    ]);
  }
  // The ceiling of that target: a Promise-returning API that does nothing at all, in the same driver.
  const floor = row(findings.coreMemory, 'distinct', 'promise floor (no work)');
  const erl = row(findings.coreMemory, 'distinct', 'express-rate-limit MemoryStore');
  const rlf = row(findings.coreMemory, 'distinct', 'rate-limiter-flexible RateLimiterMemory');
  if (floor && erl && rlf) {
    checks.push([
      'Memory store: the most any Promise API reaches (promise floor, no work)',
      `${ratio(floor.opsPerSec / erl.opsPerSec)} express-rate-limit, ${ratio(floor.opsPerSec / rlf.opsPerSec)} rate-limiter-flexible` +
        (memory ? `; ours ${ratio(memory.opsPerSec / floor.opsPerSec)} of it` : ''),
      'info',
    ]);
  }
  return checks;
}

function httpChecks(findings: Findings): Check[] {
  const wanted: Array<[string, string, number]> = [
    ['express', 'redis', 0.85],
    ['koa', 'redis', 0.6],
    ['express', 'memory', 0.9],
    ['koa', 'memory', 0.9],
  ];
  return wanted.flatMap(([framework, store, min]): Check[] => {
    const found = findings.http
      ?.find((r) => r.framework === framework && r.mode === 'admitted')
      ?.rows.find((r) => r.name === `${framework} + ratekeeper (${store})`);
    const value = found && Number.isFinite(found.vsBare) ? found.vsBare : undefined;
    const checks: Check[] = [
      [
        `HTTP ${framework} with ${store}: >= ${min}x bare app`,
        ratio(value),
        verdict(value === undefined ? undefined : value >= min),
      ],
    ];
    // The steadier figure behind it: the CPU each middleware adds to a request, measured in process.
    const rows = (findings.middleware ?? []).filter(
      (r) =>
        r.framework === framework &&
        r.group !== 'bare' &&
        Number.isFinite(r.addedUs) &&
        (store === 'redis' ? /redis/.test(r.name) : !/redis/.test(r.name)),
    );
    const ours = rows.find((r) => r.group === 'ratekeeper');
    if (ours) {
      const peers = rows
        .filter((r) => r.group === 'peer')
        .map((r) => `${r.name.replace(`${framework} + `, '')} ${num(r.addedUs, 1)} µs`);
      checks.push([
        `HTTP ${framework} with ${store}: CPU the middleware adds per request (in process)`,
        `ours ${num(ours.addedUs, 1)} µs; ${peers.join(', ')}`,
        'info',
      ]);
    }
    return checks;
  });
}

function costChecks(findings: Findings): Check[] {
  const limits: Array<[string, number]> = [
    ['fixed', 60],
    ['calendar', 60],
    ['gcra', 60],
    ['token-bucket', 90],
    ['sliding', 250],
  ];
  const checks: Check[] = limits.map(([type, max]) => {
    const found = findings.cost?.find((r) => r.name === `ratekeeper redis ${type}`)?.bytesAfterOneHit;
    return [
      `Redis bytes per key, ${type}: <= ${max}`,
      num(found),
      verdict(found === undefined ? undefined : found <= max),
    ];
  });
  const log = findings.cost?.find((r) => r.name === 'ratekeeper redis sliding-log');
  const koa = findings.cost?.find((r) => r.name === 'koa-ratelimit (redis driver)');
  const perEntry = (r?: CostRow) =>
    r?.bytesAfterHits !== undefined && r.bytesAfterOneHit !== undefined
      ? (r.bytesAfterHits - r.bytesAfterOneHit) / 4
      : undefined;
  checks.push([
    'Redis bytes, sliding log: documented per entry',
    `ours ${num(log?.bytesAfterHits)} for 5 entries (${num(perEntry(log))}/entry); koa-ratelimit ${num(koa?.bytesAfterHits)} (${num(perEntry(koa))}/entry)`,
    log?.bytesAfterHits === undefined ? 'not measured' : 'info',
  ]);
  return checks;
}

function exactChecks(findings: Findings, config: BenchConfig): Check[] {
  const target = `Exactness: exactly ${num(config.exactLimit)} for every window type of ours`;
  const ours = findings.exactness?.filter((r) => r.group === 'ratekeeper') ?? [];
  const raced = ours.filter((r) => r.admitted !== undefined);
  const failed = ours.length - raced.length;
  if (raced.length === 0) return [[target, failed ? `${failed} failed` : '-', 'not measured']];
  const off = raced.filter((r) => r.admitted !== config.exactLimit);
  const measured = [
    `${raced.length - off.length} of ${ours.length} exact`,
    ...off.map((r) => `${r.name.replace('ratekeeper redis ', '')}: ${num(r.admitted)}`),
    failed ? `${failed} failed` : '',
  ];
  return [[target, measured.filter(Boolean).join('; '), off.length > 0 || failed > 0 ? 'MISSED' : 'met']];
}

/**
 * The targets table, or undefined when this run measured none of ours. Targets this run did not
 * measure are listed only when `complete` (a run of every scenario).
 */
export function evaluateTargets(
  findings: Findings,
  config: BenchConfig,
  complete: boolean,
): Section | undefined {
  const checks = [
    ...coreChecks(findings),
    ...httpChecks(findings),
    ...costChecks(findings),
    ...exactChecks(findings, config),
  ];
  const measured = checks.filter(([, , v]) => v !== 'not measured' && v !== 'info');
  if (measured.length === 0) return undefined;
  const table: Table = {
    title: 'Performance targets',
    columns: ['target', 'measured', 'verdict'],
    rows: complete ? checks : checks.filter(([, , v]) => v !== 'not measured'),
  };
  if (findings.failures.length > 0) table.notes = findings.failures.map((f) => `Scenario failed: ${f}`);
  return {
    id: 'targets',
    title: 'Targets',
    intro: 'Each performance target against this run; a miss is a finding to fix, not to hide.',
    tables: [table],
  };
}
