// What the concurrency process tests on Redis and on PostgreSQL share: their worker processes started and
// told to go (test/fixtures/concurrency-worker.ts's protocol), the killed holder's start, and the settled
// budget's bound and checks.
import { type ChildProcessByStdio, spawn } from 'node:child_process';
import { createInterface } from 'node:readline';
import type { Readable, Writable } from 'node:stream';
import { expect } from 'chai';
import { createLimiter, type Store } from '../../src/index.js';
import { BUDGET_RULE, type Settled } from '../fixtures/concurrency-worker.js';
import { exited, track } from './processes.js';
import { PATIENT } from './settle.js';

/** Worker processes at work: each one's next stdout line, by index. */
export interface Workers {
  children: Array<ChildProcessByStdio<Writable, Readable, null>>;
  next(i: number): Promise<string>;
}

/**
 * `count` processes of the worker `script` run with `args`: started, told to go once every one printed
 * 'ready', their lines read with `next`.
 */
export async function startWorkers(script: string, args: readonly string[], count: number): Promise<Workers> {
  const children = Array.from({ length: count }, () =>
    track(
      spawn(process.execPath, ['--import', 'tsx', script, ...args], { stdio: ['pipe', 'pipe', 'inherit'] }),
    ),
  );
  const lines = children.map((child) => createInterface({ input: child.stdout })[Symbol.asyncIterator]());
  const next = async (i: number) => String((await (lines[i] as AsyncIterator<string>).next()).value);
  expect(await Promise.all(children.map((_, i) => next(i)))).to.deep.equal(Array(count).fill('ready'));
  for (const child of children) child.stdin.end('go\n');
  return { children, next };
}

/**
 * The 'kill' worker (holdUntilKilled) started alone: its process, and the slot it took (admitted, or the
 * test fails here).
 */
export async function startKillHolder(start: Promise<Workers>) {
  const { children, next } = await start;
  const holder = children[0] as Workers['children'][number];
  const held = JSON.parse(await next(0)) as { allowed: boolean; slot: number };
  expect(held.allowed).to.equal(true);
  return { holder, held };
}

/**
 * The settled budget's bound: what the admitted requests cost in all is at most the limit plus, for the
 * last admission, what the requests in flight then cost above their estimates. Across processes the
 * order is known from the shared stamps: request j may have been in flight at admission k when it
 * started before k's check ended and settled after k's check began; the largest such sum over every k
 * bounds the one at the last admission.
 */
function excessBound(requests: readonly Settled[]): number {
  const admitted = requests.filter((r) => r.admitted);
  let bound = 0;
  for (const k of admitted) {
    let sum = 0;
    for (const j of admitted) {
      if (j.beforeCheck < k.afterCheck && j.afterSettle > k.beforeCheck)
        sum += Math.max(0, j.actual - j.estimate);
    }
    bound = Math.max(bound, sum);
  }
  return bound;
}

/**
 * Reads the 'budget' workers' settled requests and waits for them to exit; then what was spent is within
 * BUDGET_RULE's limit plus the bound, the store (made by `store` once they exited) counted exactly that, and
 * some requests were denied.
 */
export async function expectBudgetKept({ children, next }: Workers, store: () => Store): Promise<void> {
  const requests = (
    await Promise.all(children.map(async (_, i) => JSON.parse(await next(i)) as Settled[]))
  ).flat();
  await Promise.all(children.map(exited));
  const admitted = requests.filter((r) => r.admitted);
  const spent = admitted.reduce((sum, r) => sum + r.actual, 0);
  const bound = excessBound(requests);
  const limit = BUDGET_RULE.limit as number;
  console.log(`      ${admitted.length} admitted, ${spent} spent of ${limit}, bound ${limit + bound}`);
  expect(spent).to.be.at.most(limit + bound);
  // The store counted exactly what was settled.
  const limiter = createLimiter({ store: store(), rules: [BUDGET_RULE], ...PATIENT });
  expect((await limiter.status('budget', 'shared')).count).to.equal(spent);
  await limiter.close();
  expect(admitted.length).to.be.lessThan(requests.length);
}
