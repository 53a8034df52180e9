// limiter.override across real processes on one Redis: set in one process, obeyed by another from its
// very next decision (its deny cache forgets the key), expired on time, cleared with null; a rule that
// never had an override costs the other process no read of one.
import { randomBytes } from 'node:crypto';
import { expect } from 'chai';
import { startLineWorker, type LineWorker as Worker } from '../support/processes.js';
import { type RedisServer, startRedis } from '../support/redis.js';
import { until } from '../support/settle.js';

function startWorker(server: RedisServer, prefix: string): Promise<Worker> {
  return startLineWorker('test/fixtures/override-worker.ts', [server.url, prefix]);
}

describe('overrides across real processes on Redis', () => {
  const workers: Worker[] = [];
  // A server of its own: a test counts its GET commands.
  let server: RedisServer;
  before(async () => {
    server = await startRedis();
  });
  afterEach(async () => {
    await Promise.all(workers.splice(0).map((w) => w.quit()));
  });
  after(() => server.stop());

  it('one process sets an override, another obeys it once the announcement reached it, until it expires or is cleared', async function () {
    this.timeout(60_000);
    const prefix = `rko${randomBytes(4).toString('hex')}`;
    const [operator, app] = await Promise.all([startWorker(server, prefix), startWorker(server, prefix)]);
    workers.push(operator, app);

    // Once the app's store knows the rule has never had an override, its decisions read none: a fresh
    // key's fixed window is created by one SET NX GET, with no GET at all. Until it knows (its first
    // moments) it reads the override keys too.
    let gets = -1;
    for (let fresh = 0; fresh < 100 && gets !== 0; fresh++) {
      const before = await server.commandCount('get');
      await app.ask(`consume warm-${fresh}`);
      gets = (await server.commandCount('get')) - before;
    }
    expect(gets, 'GETs per decision of a rule without overrides').to.equal(0);

    // The app uses up acme's 2 a minute; its deny cache answers the next denial.
    expect(await app.ask('consume acme')).to.include({ allowed: true, limit: 2, remaining: 1 });
    expect(await app.ask('consume acme')).to.include({ allowed: true, remaining: 0 });
    expect(await app.ask('consume acme')).to.include({ allowed: false, cached: false });
    expect(await app.ask('consume acme')).to.include({ allowed: false, cached: true });

    // The operator's process raises acme to 5 for 2 s: the app's next decision once the announcement has
    // reached it obeys it (the store's own answer does at once; the deny cache forgets the key when it hears).
    expect(await operator.ask('override acme 5 2s')).to.deep.equal({ ok: true });
    await app.ask('heard acme 1');
    expect(await app.ask('consume acme')).to.deep.equal({
      allowed: true,
      limit: 5,
      remaining: 2,
      cached: false,
    });
    expect(await app.ask('status acme')).to.include({ limit: 5, overridden: true, count: 3 });
    expect(await app.ask('consume acme')).to.include({ allowed: true, remaining: 1 });
    expect(await app.ask('consume acme')).to.include({ allowed: true, remaining: 0 });
    expect(await app.ask('consume acme')).to.include({ allowed: false, limit: 5 });
    expect(await app.ask('consume other')).to.include({ allowed: true, limit: 2 });
    expect(await operator.ask('status acme')).to.include({ limit: 5, overridden: true, count: 5 });

    // Past its end (Redis expires it) the rule's own limit is back, in both processes.
    await until('the override expired', async () => (await operator.ask('status acme')).overridden === false);
    expect(await app.ask('status acme')).to.include({ limit: 2, overridden: false, count: 5 });
    expect(await operator.ask('status acme')).to.include({ limit: 2, overridden: false });
    expect(await app.ask('consume acme')).to.include({ allowed: false, limit: 2 });

    // Until cleared: 10 admits the 6th; null puts the rule's 2 back at once.
    await operator.ask('override acme 10');
    await app.ask('heard acme 2');
    expect(await app.ask('consume acme')).to.deep.equal({
      allowed: true,
      limit: 10,
      remaining: 4,
      cached: false,
    });
    await operator.ask('override acme null');
    await app.ask('heard acme 3');
    expect(await app.ask('consume acme')).to.deep.equal({
      allowed: false,
      limit: 2,
      remaining: 0,
      cached: false,
    });
    expect(await app.ask('status acme')).to.include({ limit: 2, overridden: false, count: 6 });

    // A process started now learns of the rule's overrides from Redis.
    const late = await startWorker(server, prefix);
    workers.push(late);
    await operator.ask('override acme 7');
    expect(await late.ask('consume acme')).to.include({ allowed: true, limit: 7, remaining: 0 });
  });
});
