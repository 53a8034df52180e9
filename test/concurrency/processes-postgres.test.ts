// Concurrency and settled costs on PostgreSQL across real processes: never more handlers at once than the limit,
// counted by the handlers themselves (a row they change as they start and end), idle and while CPU-bound
// processes oversubscribe the cores; a SIGKILLed holder's slot back after its lease (database clock) and not
// before; a settled budget within its documented bound, and counted exactly; acquire calls waiting in 4
// processes woken by releases in another.
import { randomBytes } from 'node:crypto';
import { availableParallelism } from 'node:os';
import { expect } from 'chai';
import type pg from 'pg';
import { createLimiter, PostgresStore } from '../../src/index.js';
import { postgresNames } from '../../src/stores/postgres/sql.js';
import { SLOT_RULE } from '../fixtures/acquire-rules.js';
import { HOLD_RULE, KILL_RULE } from '../fixtures/concurrency-worker.js';
import { runningTable, stampsSequence } from '../fixtures/postgres-concurrency-worker.js';
import { expectBudgetKept, startKillHolder, startWorkers } from '../support/concurrency-workers.js';
import { getPostgres, type PostgresServer } from '../support/postgres.js';
import { Burners } from '../support/pressure.js';
import { exited } from '../support/processes.js';
import { PATIENT, until } from '../support/settle.js';

const PROCESSES = 4;
/**
 * Requests per process, each retrying until admitted: 4 x 50 against 5 slots is a few thousand decisions
 * (seconds); loaded, fewer, so that the run stays short while the burners slow every process.
 */
const HOLDERS = { idle: 50, loaded: 12 };
/** Settled requests per process (idle only: the loaded round is the holders', to keep the file short). */
const BUDGET_TASKS = 100;

/** Worker processes of one mode on one schema: started, told to go, their JSON lines read. */
const workers = (server: PostgresServer, schema: string, mode: string, tasks: number, count = PROCESSES) =>
  startWorkers(
    'test/fixtures/postgres-concurrency-worker.ts',
    [server.url, schema, mode, String(tasks)],
    count,
  );

function suite(loaded: boolean) {
  describe(`concurrency on PostgreSQL across processes${loaded ? ', cores oversubscribed' : ''}`, function () {
    this.timeout(180_000);
    let server: PostgresServer;
    let control: pg.Pool;
    let burners: Burners | undefined;
    const schema = () => `rkq${randomBytes(4).toString('hex')}`;
    const holders = loaded ? HOLDERS.loaded : HOLDERS.idle;

    before(async () => {
      server = await getPostgres();
      control = server.pool({ max: 2 });
      if (loaded) burners = new Burners(4 * availableParallelism());
    });
    after(async () => {
      await burners?.stop();
      await control.end();
    });

    it(`${PROCESSES} processes x ${holders} requests against 5 at once: never more than 5 handlers run, every request runs`, async () => {
      const s = schema();
      await control.query(`CREATE SCHEMA "${s}"; CREATE TABLE ${runningTable(s)} (n integer NOT NULL)`);
      await control.query(`INSERT INTO ${runningTable(s)} VALUES (0)`);
      const { children, next } = await workers(server, s, 'hold', holders);
      const reports = await Promise.all(
        children.map(
          async (_, i) => JSON.parse(await next(i)) as { admitted: number; denied: number; most: number },
        ),
      );
      const most = Math.max(...reports.map((r) => r.most));
      const denied = reports.reduce((sum, r) => sum + r.denied, 0);
      console.log(`      most handlers at once: ${most}, ${denied} denials on the way`);
      expect(reports.map((r) => r.admitted)).to.deep.equal(Array(PROCESSES).fill(holders));
      expect(most).to.be.at.most(HOLD_RULE.limit as number);
      expect((await control.query(`SELECT n FROM ${runningTable(s)}`)).rows[0].n).to.equal(0);
      await Promise.all(children.map(exited));
      // Every slot released: the key holds none.
      const store = new PostgresStore({ pool: control, schema: s });
      const limiter = createLimiter({ store, rules: [HOLD_RULE], ...PATIENT });
      expect(await limiter.status('handlers', 'shared')).to.include({ count: 0 });
      await limiter.close();
    });

    // Loaded, the holders' round only: the rest would add a minute of burners to the run.
    if (loaded) return;

    it(`a settled budget: ${PROCESSES} processes x random estimates and actual costs stay within limit + the bound, counted exactly`, async () => {
      const s = schema();
      await control.query(`CREATE SCHEMA "${s}"; CREATE SEQUENCE ${stampsSequence(s)}`);
      const budget = await workers(server, s, 'budget', BUDGET_TASKS);
      await expectBudgetKept(budget, () => new PostgresStore({ pool: control, schema: s }));
    });

    it('acquire: calls waiting in 4 processes are woken by releases in another, never more than 2 running', async function () {
      // Slots leased for a minute, the test bounded well below: a waiter served by the lease running out
      // (instead of a release's NOTIFY) fails it.
      this.timeout(45_000);
      const s = schema();
      await control.query(`CREATE SCHEMA "${s}"; CREATE TABLE ${runningTable(s)} (n integer NOT NULL)`);
      await control.query(`INSERT INTO ${runningTable(s)} VALUES (0)`);
      const store = new PostgresStore({ pool: control, schema: s });
      const holder = createLimiter({ store, rules: [SLOT_RULE], ...PATIENT });
      const held = [
        await holder.acquire(SLOT_RULE.name, 'shared'),
        await holder.acquire(SLOT_RULE.name, 'shared'),
      ];
      const { children, next } = await workers(server, s, 'wait', 10);
      expect(await Promise.all(children.map((_, i) => next(i)))).to.deep.equal(
        Array(PROCESSES).fill('waiting'),
      );
      expect((await holder.status(SLOT_RULE.name, 'shared')).count).to.equal(2);
      for (const turn of held) await turn.release();
      const reports = await Promise.all(
        children.map(
          async (_, i) => JSON.parse(await next(i)) as { admitted: number; most: number; tries: number },
        ),
      );
      await Promise.all(children.map(exited));
      const tries = reports.reduce((sum, r) => sum + r.tries, 0);
      console.log(`      40 calls admitted after ${tries} store tries in all`);
      expect(reports.map((r) => r.admitted)).to.deep.equal(Array(PROCESSES).fill(10));
      expect(Math.max(...reports.map((r) => r.most))).to.be.at.most(SLOT_RULE.limit);
      expect((await holder.status(SLOT_RULE.name, 'shared')).count, 'every slot released').to.equal(0);
      await holder.close();
    });

    it("a SIGKILLed holder's slot is held while it renews, and comes back after its lease, not before", async () => {
      const s = schema();
      const { holder, held } = await startKillHolder(workers(server, s, 'kill', 1, 1));
      // The slot's lease end, read from its row (sql/concurrency.sql: pairs holds slot id, lease end pairs).
      const keys = postgresNames(s, 'rk_').qualified('keys');
      const leaseEnd = async () => {
        const { rows } = await control.query(`SELECT pairs FROM ${keys} WHERE rule = 'single'`);
        const pairs = (rows[0]?.pairs ?? []) as string[];
        const at = pairs.findIndex((x, i) => i % 2 === 0 && Number(x) === held.slot);
        return at < 0 ? undefined : Number(pairs[at + 1]);
      };
      const firstEnd = await leaseEnd();
      expect(firstEnd).to.be.a('number');
      // Wait for the event: a renewal moves the lease end on.
      await until('the holder renews its slot', async () => (await leaseEnd()) !== firstEnd, 60_000);
      const store = new PostgresStore({ pool: control, schema: s });
      const limiter = createLimiter({ store, rules: [KILL_RULE], ...PATIENT });
      const req = { method: 'POST', path: '/work', headers: {}, user: 'shared' };
      holder.kill('SIGKILL');
      await exited(holder);
      const lastEnd = (await leaseEnd()) as number;
      expect(lastEnd).to.be.greaterThan(firstEnd as number);
      let denials = 0;
      for (;;) {
        const decision = await limiter.check(req);
        if (decision.allowed) {
          // A slot id is the database's ms at the decision x 1024 + n: when the slot came back.
          const admittedAtMs = Math.floor((decision.rules[0]?.slot as number) / 1024);
          console.log(
            `      slot back ${admittedAtMs - lastEnd} ms after its last lease end, ${denials} denials before`,
          );
          expect(admittedAtMs).to.be.at.least(lastEnd);
          break;
        }
        denials++;
        // The denial says when the soonest lease ends: try again then.
        await new Promise((resolve) => setTimeout(resolve, decision.retryAfterMs));
      }
      expect(denials).to.be.at.least(1);
      await limiter.close();
    });
  });
}

suite(false);
suite(true);
