// A window chosen per request across 4 real processes on one store (Redis, PostgreSQL): a key's window keeps
// the size of the request that started it while the processes race on it at another size, and the next window
// takes the size chosen then. Admissions are counted by the handlers; resets and waits are the store's answers.
import { randomBytes } from 'node:crypto';
import { expect } from 'chai';
import { type PostgresServer, startPostgres } from '../support/postgres.js';
import { startLineWorker, type LineWorker as Worker } from '../support/processes.js';
import { type RedisServer, startRedis } from '../support/redis.js';
import { until } from '../support/settle.js';

interface Burst {
  resets: number[];
  waits: number[];
  w: number[];
}

function startWorker(kind: string, address: string, prefix: string): Promise<Worker> {
  return startLineWorker('test/fixtures/window-fn-worker.ts', [kind, address, prefix]);
}

/** Every process fires `n` concurrent checks of `key`, the size each chooses given by `sizes` (one per process). */
async function burst(workers: Worker[], key: string, n: number, sizes: string[]): Promise<Burst[]> {
  return (await Promise.all(
    workers.map((w, i) => w.ask(`burst ${key} ${n} ${sizes[i % sizes.length]}`)),
  )) as unknown as Burst[];
}

const resets = (bursts: Burst[]) => bursts.flatMap((b) => b.resets);
const waits = (bursts: Burst[]) => bursts.flatMap((b) => b.waits);
const HOUR = 3_600_000;

async function scenario(kind: string, address: string): Promise<void> {
  const prefix = `rkw${randomBytes(4).toString('hex')}`;
  const workers = await Promise.all([0, 1, 2, 3].map(() => startWorker(kind, address, prefix)));
  const [first] = workers as [Worker];
  try {
    // An hour's window: exactly 10 of 4 x 20 pass; each reports w=3600.
    const hour = await burst(workers, 'k', 20, ['1h']);
    expect(resets(hour)).to.have.length(10);
    expect(new Set(hour.flatMap((b) => b.w))).to.deep.equal(new Set([3600]));

    // The client moves to 5 s windows mid-window: the hour in progress keeps its end, nothing more passes,
    // and every denial waits for the hour's end, not for a 5 s window's.
    const moved = await burst(workers, 'k', 10, ['5s']);
    expect(resets(moved)).to.have.length(0);
    for (const wait of waits(moved)) expect(wait, 'a wait for the hour in progress').to.be.above(HOUR / 2);

    // A fresh key raced at two sizes: its window is the one the first admitted request started; still
    // exactly 10 pass, and all of them report one end (an hour's, or 5 s's).
    const raced = await burst(workers, 'r', 10, ['1h', '5s', '1h', '5s']);
    const racedResets = resets(raced);
    expect(racedResets).to.have.length(10);
    const long = racedResets.filter((ms) => ms > 5000).length;
    expect([0, 10], 'one window size for every admission').to.include(long);

    // A key in a 5 s window moved to an hour: the 5 s window is not stretched (its denials wait at most
    // 5 s); once it has ended, the next window is an hour's.
    const short = await burst(workers, 's', 5, ['5s']);
    expect(resets(short)).to.have.length(10);
    const stretched = await burst(workers, 's', 5, ['1h']);
    for (const wait of waits(stretched)) expect(wait).to.be.at.most(5000);
    expect(resets(stretched).length + waits(stretched).length).to.equal(20);
    await until('the 5 s window ended', async () => (await first.ask('status s')).count === 0);
    const next = await burst(workers, 's', 20, ['1h']);
    expect(resets(next)).to.have.length(10);
    for (const ms of resets(next)) expect(ms, 'the next window is an hour').to.be.above(HOUR / 2);
  } finally {
    await Promise.all(workers.map((w) => w.quit()));
  }
}

describe('windows chosen per request across 4 processes', function () {
  this.timeout(240_000);

  describe('on Redis', () => {
    let server: RedisServer;
    before(async () => {
      server = await startRedis();
    });
    after(() => server.stop());
    it("a key's window keeps its size while the processes race at another; the next window takes the new one", async () => {
      await scenario('redis', server.url);
    });
  });

  describe('on PostgreSQL', () => {
    let server: PostgresServer;
    before(async () => {
      server = await startPostgres();
    });
    after(() => server?.stop());
    it("a key's window keeps its size while the processes race at another; the next window takes the new one", async () => {
      await scenario('postgres', server.url);
    });
  });
});
