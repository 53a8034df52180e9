// acquire across real processes on one Redis: 4 processes x 50 calls on 10 per second. Every call is
// admitted, never more than 10 in any 1-second span of the server's admission times, and each process
// is served first come, first served; in each, a call with a 10 ms maxWait queued behind them is
// refused long before its turn, and one aborted on the 5th admission rejects then, neither consuming.
// And on a concurrency rule: waiters in 4 processes are woken by the releases of the others.
import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { createInterface } from 'node:readline';
import { expect } from 'chai';
import { createLimiter, RedisStore } from '../../src/index.js';
import { PACED_RULE, SLOT_RULE } from '../fixtures/acquire-rules.js';
import { track } from '../support/processes.js';
import { getRedis } from '../support/redis.js';
import { PATIENT } from '../support/settle.js';

const PROCESSES = 4;
const CALLS = 50;

describe('acquire from 4 real processes on Redis', () => {
  it('admits all 200 calls, at most 10 in any 1 s of server time, FIFO within each process; maxWait and abort consume nothing', async function () {
    // 200 calls at 10 a second take 20 s.
    this.timeout(120_000);
    const server = await getRedis();
    const prefix = `rka${randomBytes(4).toString('hex')}`;
    const workers = Array.from({ length: PROCESSES }, () =>
      track(
        spawn(
          process.execPath,
          ['--import', 'tsx', 'test/fixtures/acquire-worker.ts', server.url, prefix, String(CALLS)],
          { stdio: ['pipe', 'pipe', 'inherit'] },
        ),
      ),
    );
    const exited = workers.map((worker) => new Promise((resolve) => worker.once('close', resolve)));
    const lines = workers.map((worker) => createInterface({ input: worker.stdout })[Symbol.asyncIterator]());
    const next = async (i: number) => String((await (lines[i] as AsyncIterator<string>).next()).value);
    expect(await Promise.all(workers.map((_, i) => next(i)))).to.deep.equal(Array(PROCESSES).fill('ready'));
    for (const worker of workers) worker.stdin.end('go\n');
    const reports = await Promise.all(
      workers.map(
        async (_, i) =>
          JSON.parse(await next(i)) as {
            order: number[];
            admittedAtMs: number[];
            maxWait: string;
            abort: string;
          },
      ),
    );
    await Promise.all(exited);

    const inOrder = Array.from({ length: CALLS }, (_, i) => i);
    for (const report of reports) {
      expect(report.order, 'every call admitted, first come first served').to.deep.equal(inOrder);
      expect(report.admittedAtMs).to.have.length(CALLS);
      expect(report.abort, 'aborted on the 5th admission').to.equal('AbortError@5');
      // Refused without waiting its turn: before this process's share of one window was admitted.
      const [code, admittedBefore] = report.maxWait.split('@');
      expect(code).to.equal('ERR_RATE_LIMITED');
      expect(Number(admittedBefore)).to.be.at.most(PACED_RULE.limit);
    }
    const times = reports.flatMap((r) => r.admittedAtMs).sort((a, b) => a - b);
    expect(times).to.have.length(PROCESSES * CALLS);
    // The 11th admission after any admission comes a full window later: no 1 s span holds 11.
    const crowded: Array<[number, number]> = [];
    for (let i = 0; i + PACED_RULE.limit < times.length; i++) {
      const gap = (times[i + PACED_RULE.limit] as number) - (times[i] as number);
      if (gap < 1000) crowded.push([times[i] as number, gap]);
    }
    expect(crowded, '11 admissions within 1 s').to.deep.equal([]);
    const spanMs = (times[times.length - 1] as number) - (times[0] as number);
    console.log(
      `      200 admissions over ${spanMs} ms of server time (at 10/s the least possible is 19000)`,
    );
  });
});

describe('acquire on a concurrency rule from 4 real processes on Redis', () => {
  it('wakes the waiters of other processes when a slot frees: all 40 calls run, never more than 2 at once, the lease never waited out', async function () {
    // Slots leased for a minute, the test bounded well below: a waiter served by the lease running out
    // (instead of a release's announcement) fails it.
    this.timeout(45_000);
    const server = await getRedis();
    const prefix = `rkw${randomBytes(4).toString('hex')}`;
    const client = server.client();
    const holder = createLimiter({
      store: new RedisStore({ client, prefix }),
      rules: [SLOT_RULE],
      ...PATIENT,
    });
    // Both slots held here until every process has a call waiting.
    const held = [
      await holder.acquire(SLOT_RULE.name, 'shared'),
      await holder.acquire(SLOT_RULE.name, 'shared'),
    ];
    const workers = Array.from({ length: PROCESSES }, () =>
      track(
        spawn(
          process.execPath,
          ['--import', 'tsx', 'test/fixtures/slot-waiter.ts', server.url, prefix, '10'],
          {
            stdio: ['pipe', 'pipe', 'inherit'],
          },
        ),
      ),
    );
    const exited = workers.map((worker) => new Promise((resolve) => worker.once('close', resolve)));
    const lines = workers.map((worker) => createInterface({ input: worker.stdout })[Symbol.asyncIterator]());
    const next = async (i: number) => String((await (lines[i] as AsyncIterator<string>).next()).value);
    expect(await Promise.all(workers.map((_, i) => next(i)))).to.deep.equal(Array(PROCESSES).fill('ready'));
    for (const worker of workers) worker.stdin.end('go\n');
    expect(await Promise.all(workers.map((_, i) => next(i)))).to.deep.equal(Array(PROCESSES).fill('waiting'));
    expect((await holder.status(SLOT_RULE.name, 'shared')).count).to.equal(2);
    for (const turn of held) await turn.release();
    const reports = await Promise.all(
      workers.map(
        async (_, i) => JSON.parse(await next(i)) as { admitted: number; most: number; tries: number },
      ),
    );
    await Promise.all(exited);
    const tries = reports.reduce((sum, r) => sum + r.tries, 0);
    console.log(`      40 calls admitted after ${tries} store tries in all`);
    expect(reports.map((r) => r.admitted)).to.deep.equal(Array(PROCESSES).fill(10));
    expect(Math.max(...reports.map((r) => r.most))).to.be.at.most(SLOT_RULE.limit);
    expect((await holder.status(SLOT_RULE.name, 'shared')).count, 'every slot released').to.equal(0);
    await holder.close();
    client.disconnect();
  });
});
