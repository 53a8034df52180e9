// Concurrency and settled costs across real processes on one Redis (and the memory store in one process):
// never more handlers at once than the limit, counted by the handlers themselves, also through Express with
// every client aborting 50 ms after its handler started (idle only); a SIGKILLed holder's slot back after its
// lease and not before; a settled budget within its documented bound. Idle, then again while CPU-bound
// processes oversubscribe the cores.
import { randomBytes } from 'node:crypto';
import { availableParallelism } from 'node:os';
import { expect } from 'chai';
import type { Redis } from 'ioredis';
import { createLimiter, MemoryStore, RedisStore } from '../../src/index.js';
import { abortingClients, HOLD_RULE, KILL_RULE, runHolders } from '../fixtures/concurrency-worker.js';
import { expectBudgetKept, startKillHolder, startWorkers } from '../support/concurrency-workers.js';
import { Burners } from '../support/pressure.js';
import { exited } from '../support/processes.js';
import { getRedis, type RedisServer } from '../support/redis.js';
import { PATIENT, until } from '../support/settle.js';

const PROCESSES = 4;
const HOLDERS = 200;
const BUDGET_TASKS = 100;

/** Worker processes of one mode on one prefix: started, told to go, their JSON lines read. */
const workers = (server: RedisServer, prefix: string, mode: string, tasks: number, count = PROCESSES) =>
  startWorkers('test/fixtures/concurrency-worker.ts', [server.url, prefix, mode, String(tasks)], count);

function suite(loaded: boolean) {
  describe(`concurrency and settled costs across processes${loaded ? ', cores oversubscribed' : ''}`, function () {
    this.timeout(180_000);
    let server: RedisServer;
    let control: Redis;
    let burners: Burners | undefined;
    const prefix = () => `rkq${randomBytes(4).toString('hex')}`;

    before(async () => {
      server = await getRedis();
      control = server.client();
      if (loaded) burners = new Burners(4 * availableParallelism());
    });
    after(async () => {
      await burners?.stop();
      control.disconnect();
    });

    it(`${PROCESSES} processes x ${HOLDERS} requests against 5 at once: never more than 5 handlers run, every request runs`, async () => {
      const p = prefix();
      const { children, next } = await workers(server, p, 'hold', HOLDERS);
      const reports = await Promise.all(
        children.map(async (_, i) => JSON.parse(await next(i)) as { admitted: number; most: number }),
      );
      const most = Math.max(...reports.map((r) => r.most));
      console.log(`      most handlers at once: ${most}`);
      expect(reports.map((r) => r.admitted)).to.deep.equal(Array(PROCESSES).fill(HOLDERS));
      expect(most).to.be.at.most(HOLD_RULE.limit as number);
      expect(Number(await control.get(`${p}:running`))).to.equal(0);
      await Promise.all(children.map(exited));
      // Every slot released: the key holds none.
      const limiter = createLimiter({
        store: new RedisStore({ client: control, prefix: p }),
        rules: [HOLD_RULE],
        ...PATIENT,
      });
      expect((await limiter.status('handlers', 'shared')).count).to.equal(0);
      await limiter.close();
    });

    it(`the memory store: ${PROCESSES * HOLDERS} requests in one process against 5 at once, never more than 5 handlers`, async () => {
      const limiter = createLimiter({ store: new MemoryStore(), rules: [HOLD_RULE] });
      let running = 0;
      const report = await runHolders(
        limiter,
        { enter: async () => ++running, leave: async () => void running--, touch: async () => {} },
        PROCESSES * HOLDERS,
      );
      expect(report.admitted).to.equal(PROCESSES * HOLDERS);
      expect(report.most).to.equal(HOLD_RULE.limit);
      expect((await limiter.status('handlers', 'shared')).count).to.equal(0);
      await limiter.close();
    });

    // Aborting clients: idle only (opening and aborting 800 connections while the cores are
    // oversubscribed takes minutes, and tells nothing the idle run does not).
    if (!loaded)
      it(`${PROCESSES} processes x ${HOLDERS} HTTP clients against 5 at once, every client aborting after 50 ms while its handler works on: never more than 5 handlers`, async () => {
        const p = prefix();
        const { children, next } = await workers(server, p, 'abort', HOLDERS);
        const reports = await Promise.all(
          children.map(
            async (_, i) =>
              JSON.parse(await next(i)) as {
                entered: number;
                most: number;
                aborted: number;
                denied: number;
                gaveUp: number;
                other: number;
              },
          ),
        );
        await Promise.all(children.map(exited));
        const most = Math.max(...reports.map((r) => r.most));
        const entered = reports.reduce((sum, r) => sum + r.entered, 0);
        console.log(
          `      ${entered} handlers ran, most at once: ${most}; ${reports.reduce((sum, r) => sum + r.denied, 0)} answered 429`,
        );
        expect(most).to.be.at.most(HOLD_RULE.limit as number);
        // Slots were handed on: more handlers ran than fit at once.
        expect(entered).to.be.greaterThan(HOLD_RULE.limit as number);
        // Every admitted request's client aborted while its handler worked; the others gave up after 429s.
        for (const r of reports) {
          expect(r.aborted).to.equal(r.entered);
          expect(r.aborted + r.gaveUp).to.equal(HOLDERS);
          expect(r.other).to.equal(0);
        }
        expect(Number(await control.get(`${p}:running`))).to.equal(0);
        const limiter = createLimiter({
          store: new RedisStore({ client: control, prefix: p }),
          rules: [HOLD_RULE],
          ...PATIENT,
        });
        expect((await limiter.status('handlers', 'shared')).count, 'every slot released').to.equal(0);
        await limiter.close();
      });

    if (!loaded)
      it(`the memory store: ${PROCESSES * HOLDERS} aborting HTTP clients in one process against 5 at once, never more than 5 handlers`, async () => {
        const limiter = createLimiter({ store: new MemoryStore(), rules: [HOLD_RULE] });
        let running = 0;
        const report = await abortingClients(
          limiter,
          {
            enter: async () => ++running,
            leave: async () => void running--,
            touch: () => new Promise((r) => setImmediate(r)),
          },
          PROCESSES * HOLDERS,
        );
        expect(report.most).to.be.at.most(HOLD_RULE.limit as number);
        expect(report.entered).to.be.greaterThan(HOLD_RULE.limit as number);
        expect(report.aborted).to.equal(report.entered);
        expect(report.aborted + report.gaveUp).to.equal(PROCESSES * HOLDERS);
        expect((await limiter.status('handlers', 'shared')).count).to.equal(0);
        await limiter.close();
      });

    it("a SIGKILLed holder's slot is held while it renews, and comes back after its lease, not before", async () => {
      const p = prefix();
      const { holder, held } = await startKillHolder(workers(server, p, 'kill', 1, 1));
      const key = `${p}:{shared}:single`;
      const leaseEnd = async () => Number(await control.zscore(key, String(held.slot)));
      const firstEnd = await leaseEnd();
      // Wait for the event: a renewal moves the lease end on.
      await until('the holder renews its slot', async () => (await leaseEnd()) !== firstEnd, 60_000);
      const limiter = createLimiter({
        store: new RedisStore({ client: control, prefix: p }),
        rules: [KILL_RULE],
        ...PATIENT,
      });
      const req = { method: 'POST', path: '/work', headers: {}, user: 'shared' };
      holder.kill('SIGKILL');
      await exited(holder);
      const lastEnd = await leaseEnd();
      expect(lastEnd).to.be.greaterThan(firstEnd);
      let denials = 0;
      for (;;) {
        const decision = await limiter.check(req);
        if (decision.allowed) break;
        denials++;
        // The denial says when the soonest lease ends: try again then.
        await new Promise((resolve) => setTimeout(resolve, decision.retryAfterMs));
      }
      const [seconds, micros] = (await control.time()) as [number, number];
      const admittedAtMs = Number(seconds) * 1000 + Math.floor(Number(micros) / 1000);
      console.log(
        `      slot back ${admittedAtMs - lastEnd} ms after its last lease end, ${denials} denials before`,
      );
      expect(denials).to.be.at.least(1);
      expect(admittedAtMs).to.be.at.least(lastEnd);
      await limiter.close();
    });

    it(`a settled budget: ${PROCESSES} processes x ${BUDGET_TASKS} random estimates and actual costs stay within limit + the bound`, async () => {
      const p = prefix();
      const budget = await workers(server, p, 'budget', BUDGET_TASKS);
      await expectBudgetKept(budget, () => new RedisStore({ client: control, prefix: p }));
    });
  });
}

suite(false);
suite(true);
