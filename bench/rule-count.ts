// Rule count: what one request costs a limiter with 10 rules and with 10,000, on the memory store, in
// process. With the rule index, a request that matches one rule or none costs about the same with either count.
//
//   npm run bench -- rules        (a section of bench/RESULTS.md)
//   npx tsx bench/rule-count.ts   (just this table)

import { fileURLToPath } from 'node:url';
import { createLimiter, type Limiter, MemoryStore, type RequestInfo, type Rule } from '../src/index.js';
import { num, type Section, textTable } from './report.js';
import { median } from './stats.js';

const COUNTS = [10, 10_000];
const window = { type: 'fixed', size: '1h' } as const;

interface Case {
  name: string;
  req: RequestInfo;
  /** Every rule matches this request: the store then decides every one of them (no index can help). */
  all?: boolean;
}

const request = (path: string, ip: string): RequestInfo => ({ method: 'GET', path, ip, headers: {} });
const CASES: Case[] = [
  { name: 'matches no rule', req: request('/nothing/here', '198.51.100.1') },
  { name: 'matches one rule', req: request('/api/items', '198.51.100.1') },
  { name: 'matches every rule', req: request('/anything', '198.51.100.1'), all: true },
];

/** `count` rules on distinct routes (`GET /r<i>/:id`), one of them `GET /api/items`; or `count` rules matching all. */
function rulesFor(count: number, all: boolean): Rule[] {
  return Array.from({ length: count }, (_, i) => ({
    name: `r${i}`,
    ...(all ? {} : { match: i === count - 1 ? 'GET /api/items' : `GET /r${i}/:id` }),
    key: 'ip',
    limit: 1_000_000_000,
    window,
  }));
}

/** Microseconds per `check`, sequential, over about `ms` of wall time (at least 3 checks). */
async function timeChecks(limiter: Limiter, req: RequestInfo, ms: number): Promise<number> {
  let n = 0;
  const start = performance.now();
  while (n < 3 || performance.now() - start < ms) {
    await limiter.check(req);
    n++;
  }
  return ((performance.now() - start) * 1000) / n;
}

export async function runRuleCount(
  reps: number,
  runMs: number,
  log: (line: string) => void,
): Promise<{ section: Section }> {
  const rows: string[][] = [];
  for (const c of CASES) {
    const figures: number[] = [];
    for (const count of COUNTS) {
      const limiter = createLimiter({ store: new MemoryStore(), rules: rulesFor(count, c.all === true) });
      await timeChecks(limiter, c.req, runMs / 4); // warm-up
      const samples: number[] = [];
      for (let rep = 0; rep < reps; rep++) samples.push(await timeChecks(limiter, c.req, runMs));
      await limiter.close();
      figures.push(median(samples));
      log(`  ${c.name}, ${count} rules: ${num(median(samples), 1)} µs`);
    }
    const [few, many] = figures as [number, number];
    rows.push([c.name, num(few, 1), num(many, 1), num(many / few, 1)]);
  }
  return {
    section: {
      id: 'rules',
      title: 'Rule count',
      intro:
        'One request through `limiter.check` on the memory store, in process, with 10 rules and with 10,000 ' +
        '(distinct routes `GET /r<i>/:id` and one `GET /api/items`; for the last row, rules with no `match`). ' +
        'The rule index finds the candidate rules by method and static path prefix, so only they run their ' +
        'matcher; a request every rule matches is decided by all of them, which no index avoids. Medians of ' +
        `${reps} runs of ${runMs} ms.`,
      tables: [
        {
          title: 'µs per request',
          columns: ['request', '10 rules', '10,000 rules', 'ratio'],
          rows,
        },
      ],
    },
  };
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const { section } = await runRuleCount(5, 500, (line) => process.stdout.write(`${line}\n`));
  for (const table of section.tables) process.stdout.write(`${textTable(table)}\n`);
}
