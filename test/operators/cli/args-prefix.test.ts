// `npx ratekeeper` reads the app's key prefix from $RATEKEEPER_PREFIX, and --prefix wins over it: the real
// command, spawned against a real Redis and a real app process.
import { randomBytes } from 'node:crypto';
import { expect } from 'chai';
import { type AppProcess, runCli, startApp } from '../../support/ops.js';
import { type RedisServer, startRedis } from '../../support/redis.js';
import { until } from '../../support/settle.js';

const RULES = ['--rules', 'test/fixtures/ops-rules.ts'];

describe('ratekeeper command line: $RATEKEEPER_PREFIX', function () {
  this.timeout(60_000);
  let server: RedisServer;
  let app: AppProcess | undefined;
  const prefix = `ops${randomBytes(4).toString('hex')}`;

  before(async () => {
    server = await startRedis();
    app = await startApp(server.url, prefix);
    // The app hears resets (and so forgets its deny cache's answer) once it has subscribed.
    const control = server.client();
    await until('the app subscribed to resets', async () => {
      const [, count] = (await control.pubsub('NUMSUB', `${prefix}:reset`)) as [string, number];
      return Number(count) === 1;
    });
    for (let i = 0; i < 3; i++) await app.hit('POST', '/login', 'alice'); // 2 admitted, the 3rd locks
  });
  after(async () => {
    await app?.stop();
    await server.stop();
  });

  const lockedKeys = async (args: string[], env: Record<string, string>) => {
    const run = await runCli(['locked', 'login', '--json', ...RULES, ...args], {
      REDIS_URL: server.url,
      ...env,
    });
    expect(run.code, run.stderr).to.equal(0);
    return (JSON.parse(run.stdout) as Array<{ key: string }>).map((l) => l.key);
  };

  it("finds the app's keys under the prefix the variable names, with no --prefix typed", async () => {
    expect(await lockedKeys([], { RATEKEEPER_PREFIX: prefix })).to.deep.equal(['alice']);
    expect(
      await lockedKeys([], {}),
      'without it: the default prefix, where the app wrote nothing',
    ).to.deep.equal([]);
  });

  it('--prefix wins over the variable', async () => {
    expect(await lockedKeys(['--prefix', prefix], { RATEKEEPER_PREFIX: 'elsewhere' })).to.deep.equal([
      'alice',
    ]);
    expect(await lockedKeys(['--prefix', 'elsewhere'], { RATEKEEPER_PREFIX: prefix })).to.deep.equal([]);
  });

  it('unlocks through the variable, and the app admits the key at once', async () => {
    const unlocked = await runCli(['unlock', 'login', 'alice', ...RULES], {
      REDIS_URL: server.url,
      RATEKEEPER_PREFIX: prefix,
    });
    expect(unlocked).to.deep.equal({ code: 0, stdout: 'unlocked  login  alice\n', stderr: '' });
    expect(await app?.hit('POST', '/login', 'alice')).to.equal(200);
  });

  it('refuses a bad value naming the variable (exit status 2), before connecting', async () => {
    const run = await runCli(['locked', 'login', ...RULES], {
      REDIS_URL: 'redis://127.0.0.1:1',
      RATEKEEPER_PREFIX: 'a{b}',
    });
    expect(run.code).to.equal(2);
    expect(run.stderr).to.equal(
      "ratekeeper: RATEKEEPER_PREFIX must be non-empty and without '{' or '}', got 'a{b}'\nRun 'ratekeeper --help' for usage.\n",
    );
  });
});
