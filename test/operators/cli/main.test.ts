// `npx ratekeeper`: the real command, spawned against a real Redis and a real app process.
import { randomBytes } from 'node:crypto';
import { expect } from 'chai';
import type { Redis } from 'ioredis';
import { createLimiter, RedisStore } from '../../../src/index.js';
import { LOGIN } from '../../fixtures/ops-rules.js';
import { type AppProcess, runCli, runCliInProcess, startApp, startCli } from '../../support/ops.js';
import { type RedisServer, startRedis } from '../../support/redis.js';
import { until } from '../../support/settle.js';

const RULES = ['--rules', 'test/fixtures/ops-rules.ts'];

describe('ratekeeper command line', function () {
  this.timeout(60_000);
  let server: RedisServer;
  let control: Redis;
  let app: AppProcess | undefined;
  const newPrefix = () => `ops${randomBytes(4).toString('hex')}`;
  /** `ratekeeper <args>` as a process of its own, as an operator's shell runs it. */
  const command = (prefix: string, ...args: string[]) =>
    runCli([...args, '--prefix', prefix, ...RULES], { REDIS_URL: server.url });
  /** The same command's run function in this process: no process to boot for each call. */
  const cli = (prefix: string, ...args: string[]) =>
    runCliInProcess([...args, '--prefix', prefix, ...RULES], { REDIS_URL: server.url });

  // A server of its own: a test counts its script calls.
  before(async () => {
    server = await startRedis();
    control = server.client();
  });
  after(() => server.stop());
  afterEach(async () => {
    await app?.stop();
    app = undefined;
  });

  async function waitForSubscriber(prefix: string): Promise<void> {
    await until('the app subscribed to resets', async () => {
      const [, count] = (await control.pubsub('NUMSUB', `${prefix}:reset`)) as [string, number];
      return Number(count) === 1;
    });
  }

  it('unlock: a key the app locked, and answers from its deny cache, is admitted by the app at once', async () => {
    const prefix = newPrefix();
    app = await startApp(server.url, prefix);
    await waitForSubscriber(prefix);
    const attempts = [];
    for (let i = 0; i < 3; i++) attempts.push(await app.hit('POST', '/login', 'alice'));
    expect(attempts).to.deep.equal([200, 200, 429]);
    const scripts = await server.commandCount('fcall');
    expect(await app.hit('POST', '/login', 'alice')).to.equal(429);
    expect(await server.commandCount('fcall'), 'the app answered from its deny cache').to.equal(scripts);

    const listed = await command(prefix, 'locked', 'login', '--json');
    expect(listed.code, listed.stderr).to.equal(0);
    const locks = JSON.parse(listed.stdout) as Array<{ rule: string; key: string; level: number }>;
    expect(locks.map(({ rule, key, level }) => ({ rule, key, level }))).to.deep.equal([
      { rule: 'login', key: 'alice', level: 1 },
    ]);

    const unlocked = await command(prefix, 'unlock', 'login', 'alice');
    expect(unlocked).to.deep.equal({ code: 0, stdout: 'unlocked  login  alice\n', stderr: '' });
    expect(await app.hit('POST', '/login', 'alice'), 'right after the command').to.equal(200);

    const status = await command(prefix, 'status', 'login', 'alice', '--json');
    expect(JSON.parse(status.stdout)).to.include({ rule: 'login', key: 'alice', count: 1, remaining: 1 });
    expect(JSON.parse(status.stdout)).to.include({ locked: false, lockRemainingMs: 0, level: 0 });
  });

  it('status and locked print for people: count, lock time left, level, soonest unlock first', async () => {
    const prefix = newPrefix();
    app = await startApp(server.url, prefix);
    for (const user of ['bob', 'carol']) for (let i = 0; i < 3; i++) await app.hit('POST', '/login', user);
    await app.hit('POST', '/login', 'dave');

    const status = await cli(prefix, 'status', 'login', 'bob');
    expect(status.code).to.equal(0);
    expect(status.stdout).to.match(
      /^login {2}bob\n {2}count {4}0 of 2, none admitted while locked; counting starts again from 0 when the lock ends\n {2}locked {3}yes, (?:14m \d+s|15m) left, level 1\n/,
    );
    const dave = await cli(prefix, 'status', 'login', 'dave');
    expect(dave.stdout).to.match(
      /count {4}1 of 2, 1 remaining, back to full in \d+[hms](?: \d+[hms])*\n {2}locked {3}no, level 0\n/,
    );

    const locked = await cli(prefix, 'locked', 'login');
    const lines = locked.stdout.trimEnd().split('\n');
    expect(lines[0]).to.match(/^unlocks in +at +level +key$/);
    expect(lines.slice(1).map((l) => l.split(/ {2,}/).slice(2))).to.deep.equal([
      ['1', 'bob'],
      ['1', 'carol'],
    ]);
    expect((await cli(prefix, 'locked', 'login', '--limit', '1')).stdout).to.include(
      '(first 1; --limit shows more)',
    );
  });

  it('unlock --all unlocks every locked key of a rule; a key that was not locked is reset and said so', async () => {
    const prefix = newPrefix();
    app = await startApp(server.url, prefix);
    for (const user of ['u1', 'u2', 'u3']) for (let i = 0; i < 3; i++) await app.hit('POST', '/login', user);
    await app.hit('POST', '/login', 'u4');

    const all = await cli(prefix, 'unlock', 'login', '--all', '--json');
    expect(JSON.parse(all.stdout)).to.deep.equal(
      ['u1', 'u2', 'u3'].map((key) => ({ rule: 'login', key, wasLocked: true })),
    );
    for (const user of ['u1', 'u2', 'u3']) expect(await app.hit('POST', '/login', user)).to.equal(200);
    const again = await cli(prefix, 'unlock', 'login', 'u4');
    expect(again.stdout).to.equal('reset (was not locked)  login  u4\n');
    expect((await cli(prefix, 'status', 'login', 'u4', '--json')).stdout).to.include('"count":0');
  });

  it('prints keys harmlessly: terminal escape sequences in a key are shown, not obeyed', async () => {
    const prefix = newPrefix();
    const limiter = createLimiter({ store: new RedisStore({ client: control, prefix }), rules: [LOGIN] });
    const hostile = 'eve\u001b[2J\u001b]0;pwned\u0007\u202e';
    for (let i = 0; i < 3; i++) await limiter.consume('login', hostile);
    await limiter.close();
    const locked = await cli(prefix, 'locked', 'login');
    expect(locked.stdout).to.include('eve\\x1b[2J\\x1b]0;pwned\\x07\\u202e');
    expect(locked.stdout).not.to.include('\u001b');
    const json = await cli(prefix, 'locked', 'login', '--json');
    expect(JSON.parse(json.stdout)[0].key, 'scripts get the key itself').to.equal(hostile);
    expect((await cli(prefix, 'unlock', 'login', hostile)).stdout).to.include('unlocked');
  });

  it('shows invisible and bidirectional characters as escapes, and unlocks the exact key shown with --escaped', async () => {
    const prefix = newPrefix();
    const limiter = createLimiter({ store: new RedisStore({ client: control, prefix }), rules: [LOGIN] });
    const lookalikes = ['alice', 'alice\u200b', '\u2060alice\ufeff', '\u202e7.311.0.302', 'a\\u200b\u2028'];
    for (const key of lookalikes) for (let i = 0; i < 3; i++) await limiter.consume('login', key);
    const locked = await cli(prefix, 'locked', 'login');
    const shown = locked.stdout.split('\n').map((line) => line.split('  ').at(-1));
    for (const key of [
      'alice',
      'alice\\u200b',
      '\\u2060alice\\ufeff',
      '\\u202e7.311.0.302',
      'a\\\\u200b\\u2028',
    ])
      expect(shown, key).to.include(key);
    expect(locked.stdout).not.to.match(/[\u200b\u2060\ufeff\u202e\u2028]/);
    expect(locked.stdout).to.include('give such keys as shown, with --escaped');

    const unlocked = await cli(prefix, 'unlock', 'login', 'alice\\u200b', '\\u202e7.311.0.302', '--escaped');
    expect(unlocked.stdout).to.equal('unlocked  login  alice\\u200b\nunlocked  login  \\u202e7.311.0.302\n');
    const statuses = await Promise.all(lookalikes.map((key) => limiter.status('login', key)));
    expect(statuses.map((s) => s.locked)).to.deep.equal([true, false, true, false, true]);
    const literal = await cli(prefix, 'status', 'login', 'a\\\\u200b\\u2028', '--escaped');
    expect(literal.stdout).to.match(/^login {2}a\\\\u200b\\u2028\n {2}count {4}0 of 2/);
    const bad = await cli(prefix, 'unlock', 'login', 'alice\\q', '--escaped');
    expect(bad.code).to.equal(2);
    expect(bad.stderr).to.include('starts no escape');
    await limiter.close();
  });

  it('locked shows keys that read as alice (trailing space, U+00A0, Hangul filler, braille blank) as escapes, and --escaped reads each back', async () => {
    const prefix = newPrefix();
    const limiter = createLimiter({ store: new RedisStore({ client: control, prefix }), rules: [LOGIN] });
    const lookalikes: Record<string, string> = {
      alice: 'alice',
      'alice ': 'alice\\x20',
      ' alice': '\\x20alice',
      'alice\u00a0': 'alice\\xa0',
      'alice\u3164': 'alice\\u3164',
      'alice\u115f': 'alice\\u115f',
      'alice\uffa0': 'alice\\uffa0',
      'alice\u2800': 'alice\\u2800',
      'al  ice': 'al\\x20\\x20ice',
    };
    for (const key of Object.keys(lookalikes))
      for (let i = 0; i < 3; i++) await limiter.consume('login', key);
    const locked = await cli(prefix, 'locked', 'login');
    const shown = locked.stdout
      .trimEnd()
      .split('\n')
      .slice(1, -1)
      .map((line) => line.split(/ {2,}/).slice(3).join('  '));
    expect(shown.sort()).to.deep.equal(Object.values(lookalikes).sort());
    expect(locked.stdout).not.to.match(/[\u00a0\u3164\u115f\uffa0\u2800]|alice \n|al {2}ice/);
    for (const [key, text] of Object.entries(lookalikes)) {
      const status = await cli(prefix, 'status', 'login', text, '--escaped', '--json');
      expect(JSON.parse(status.stdout), text).to.include({ key, locked: true });
    }
    const unlocked = await cli(prefix, 'unlock', 'login', 'alice\\x20', 'alice\\u3164', '--escaped');
    expect(unlocked.stdout).to.equal('unlocked  login  alice\\x20\nunlocked  login  alice\\u3164\n');
    const statuses = await Promise.all(Object.keys(lookalikes).map((key) => limiter.status('login', key)));
    expect(statuses.map((s) => s.locked)).to.deep.equal([
      true,
      false,
      true,
      true,
      false,
      true,
      true,
      true,
      true,
    ]);
    await limiter.close();
  });

  it('--help shows the escapes --escaped reads as text: a backslash and u200b, and a doubled backslash', async () => {
    const help = await runCliInProcess(['--help']);
    expect(help.code).to.equal(0);
    const line = help.stdout.split('\n').find((l) => l.includes('--escaped')) ?? '';
    expect(line).to.include('(\\u200b for an');
    expect(help.stdout).to.include('\\\\ for a backslash');
    expect(help.stdout).not.to.match(/[\u200b]/);
  });

  it('reads rules from a CommonJS module and uses a limiter a module exports, with its own store', async () => {
    const prefix = newPrefix();
    const viaCjs = await runCli(
      ['locked', 'login', '--rules', 'test/fixtures/ops-rules.cjs', '--prefix', prefix],
      {
        REDIS_URL: server.url,
      },
    );
    expect(viaCjs).to.include({ code: 0, stdout: "no key of 'login' is locked\n" });

    app = await startApp(server.url, prefix);
    for (let i = 0; i < 3; i++) await app.hit('POST', '/login', 'frank');
    const env = {
      REDIS_URL: server.url,
      OPS_PREFIX: prefix,
      RATEKEEPER_RULES: 'test/fixtures/ops-limiter.ts',
    };
    const viaLimiter = await runCli(['locked', 'login', '--json'], env);
    expect(JSON.parse(viaLimiter.stdout).map((l: { key: string }) => l.key)).to.deep.equal(['frank']);
    const listed = await runCli(['rules'], env);
    expect(listed.stdout.split('\n')[1]).to.match(
      /^login +2 per 1h \(fixed window\) +15m, x2 each time up to 1d +enforce +POST \/login$/,
    );
  });

  it('watch --json: the decisions of the app process per rule, live, exactly as made', async () => {
    const prefix = newPrefix();
    app = await startApp(server.url, prefix, ['--publish']);
    const watch = startCli(
      ['watch', '--json', '--interval', '100ms', '--window', '1m', '--prefix', prefix, ...RULES],
      {
        REDIS_URL: server.url,
      },
    );
    try {
      // Heard the app once: subscribed, and the app's heartbeat arrived.
      await watch.line((line) => JSON.parse(line).publishers === 1);
      for (let i = 0; i < 3; i++) await app.hit('POST', '/login', 'alice'); // 2 allowed, the 3rd locks
      await app.hit('POST', '/login', 'alice'); // locked (the deny cache answers)
      for (let i = 0; i < 5; i++) await app.hit('GET', '/api', 'bob');
      const done = await watch.line((line) => {
        const view = JSON.parse(line) as { rules: Array<{ rule: string; total: number[] }> };
        return view.rules.find((r) => r.rule === 'api')?.total[0] === 5;
      });
      const view = JSON.parse(done) as {
        publishers: number;
        rules: Array<{ rule: string; allowed: number; denied: number; locked: number; total: number[] }>;
        sources: Record<string, number>;
      };
      expect(view.publishers).to.equal(1);
      expect(
        view.rules.map(({ rule, allowed, denied, locked, total }) => ({
          rule,
          allowed,
          denied,
          locked,
          total,
        })),
      ).to.deep.equal([
        { rule: 'login', allowed: 2, denied: 0, locked: 2, total: [2, 0, 2, 0] },
        { rule: 'api', allowed: 5, denied: 0, locked: 0, total: [5, 0, 0, 0] },
      ]);
      expect(view.sources).to.deep.equal({ store: 8, deny_cache: 1 });
    } finally {
      expect(await watch.interrupt(), 'Ctrl-C ends watch with status 0').to.equal(0);
    }
  });

  it('watch on a terminal (a pseudo-terminal): the view redrawn in place, keys never shown', async () => {
    const prefix = newPrefix();
    app = await startApp(server.url, prefix, ['--publish']);
    const watch = startCli(
      ['watch', '--interval', '100ms', '--prefix', prefix, ...RULES],
      { REDIS_URL: server.url },
      true,
    );
    try {
      await watch.line((line) => line.includes('1 app process publishing'));
      for (let i = 0; i < 3; i++) await app.hit('POST', '/login', 'mallory');
      const row = await watch.line((line) => /^login +[\d.]+ +2 +0 +1 +0 +33% +2 \/ 0 \/ 1 \/ 0$/.test(line));
      expect(row).to.match(/^login/);
      expect(watch.output()).to.include('\u001b[H\u001b[2J'); // home and clear before each view
      expect(watch.output()).to.include('(Ctrl-C to stop)');
      expect(watch.output()).not.to.include('mallory');
    } finally {
      expect(await watch.interrupt()).to.equal(0);
    }
  });

  it('watch ends with the cause when Redis goes away (exit status 1), not with a view of zeros', async () => {
    const own = await startRedis();
    const watch = startCli(['watch', '--json', '--interval', '50ms', '--prefix', newPrefix(), ...RULES], {
      REDIS_URL: own.url,
    });
    try {
      await watch.line((line) => JSON.parse(line).publishers === 0);
      await own.stop();
      expect(await watch.exited, 'exit status').to.equal(1);
      expect(watch.errors()).to.match(
        /^ratekeeper: lost the connection to Redis \(127\.0\.0\.1:\d+\); watch stopped\n$/,
      );
    } finally {
      await watch.interrupt();
      await own.stop();
    }
  });

  it('watch --once without a publishing app says so, and lists the rules at zero', async () => {
    const run = await runCli(['watch', '--once', '--interval', '50ms', '--prefix', newPrefix(), ...RULES], {
      REDIS_URL: server.url,
    });
    expect(run.code, run.stderr).to.equal(0);
    expect(run.stdout).to.match(
      /no app publishing on ops[0-9a-f]+:decisions \(the app calls publishDecisionCounts\)/,
    );
    expect(run.stdout).to.match(/\nlogin +0 +0 +0 +0 +0 +- +0 \/ 0 \/ 0 \/ 0\napi /);
  });

  it("override on Redis: the app obeys the key's new limit at once, status shows it, null gives the rule's back", async () => {
    const prefix = newPrefix();
    app = await startApp(server.url, prefix);
    await waitForSubscriber(prefix);
    expect(await app.hit('POST', '/login', 'grace')).to.equal(200); // the app has decided on the rule once

    const set = await cli(prefix, 'override', 'login', 'grace', '5', '--for', '1h');
    expect(set, set.stderr).to.deep.equal({
      code: 0,
      stdout: 'limit 5 for 1h  login  grace\n  count    1 of 5, 4 remaining\n',
      stderr: '',
    });
    const hits = [];
    for (let i = 0; i < 5; i++) hits.push(await app.hit('POST', '/login', 'grace'));
    expect(hits, '4 more admitted under the override, then denied').to.deep.equal([200, 200, 200, 200, 429]);
    const status = JSON.parse((await cli(prefix, 'status', 'login', 'grace', '--json')).stdout);
    expect(status).to.include({ limit: 5, overridden: true, locked: true });

    const cleared = await cli(prefix, 'override', 'login', 'grace', 'null', '--json');
    expect(JSON.parse(cleared.stdout)).to.deep.include({ override: null, forMs: null });
    expect(JSON.parse(cleared.stdout).status).to.include({ limit: 2, overridden: false });
    await cli(prefix, 'unlock', 'login', 'grace');
    const after = [];
    for (let i = 0; i < 3; i++) after.push(await app.hit('POST', '/login', 'grace'));
    expect(after, "the rule's limit of 2 again").to.deep.equal([200, 200, 429]);
  });

  it("override --window on Redis: the key's window from its next window, shown by status; a bad one changes nothing", async () => {
    const prefix = newPrefix();
    const set = await cli(prefix, 'override', 'login', 'judy', 'null', '--window', '10s');
    expect(set, set.stderr).to.deep.equal({
      code: 0,
      stdout:
        "window 10s from the key's next window, limit 2 (the rule's) until cleared  login  judy\n  count    0 of 2, 2 remaining\n",
      stderr: '',
    });
    const status = await cli(prefix, 'status', 'login', 'judy', '--json');
    expect(JSON.parse(status.stdout)).to.include({ limit: 2, overridden: true, windowMs: 10_000 });
    const bad = await cli(prefix, 'override', 'login', 'kim', '3', '--window', '0');
    expect(bad.code).to.not.equal(0);
    expect(JSON.parse((await cli(prefix, 'status', 'login', 'kim', '--json')).stdout)).to.include({
      overridden: false,
    });
  });

  it('limit on Redis: every key of the rule, in the app at once, for a while or until cleared; --clear gives the configured limit back', async () => {
    const prefix = newPrefix();
    app = await startApp(server.url, prefix);
    await waitForSubscriber(prefix);
    expect(await app.hit('POST', '/login', 'heidi')).to.equal(200);

    const set = await cli(prefix, 'limit', 'login', '4', '--for', '1h');
    expect(set.code, set.stderr).to.equal(0);
    expect(set.stdout).to.match(/^limit 4 for every key until \d{4}-\d\d-\d\dT[\d:.]+Z {2}login\n$/);
    const hits = [];
    for (let i = 0; i < 4; i++) hits.push(await app.hit('POST', '/login', 'heidi'));
    expect(hits, '3 more admitted at the rule-wide 4, then denied').to.deep.equal([200, 200, 200, 429]);
    const shown = JSON.parse((await cli(prefix, 'limit', 'login', '--json')).stdout);
    expect(shown.limit).to.include({ rule: 'login', limit: 4 });
    expect(shown.limit.untilMs).to.be.a('number');

    const cleared = await cli(prefix, 'limit', 'login', '--clear');
    expect(cleared.stdout).to.equal("no rule-wide limit: the rule's configured limit applies  login\n");
    expect(JSON.parse((await cli(prefix, 'status', 'login', 'ivan', '--json')).stdout)).to.include({
      limit: 2,
      overridden: false,
    });
  });

  it('override through a module exporting a limiter: the memory-store contract, set and cleared', async () => {
    // The memory-store contract, through a module exporting a limiter, in this process (the command's run
    // function): a memory store lives as long as its process, so set and read back need the same one.
    const memory = await runCliInProcess([
      'override',
      'login',
      'alice',
      '5',
      '--for',
      '1h',
      '--json',
      '--rules',
      'test/fixtures/ops-memory-limiter.ts',
    ]);
    expect(memory.code, memory.stderr).to.equal(0);
    expect(JSON.parse(memory.stdout)).to.deep.include({
      rule: 'login',
      key: 'alice',
      override: 5,
      forMs: 3_600_000,
    });
    expect(JSON.parse(memory.stdout).status).to.include({ limit: 5, overridden: true, remaining: 5 });
    const text = await runCliInProcess([
      'override',
      'login',
      'alice',
      '5',
      '--rules',
      'test/fixtures/ops-memory-limiter.ts',
    ]);
    expect(text.stdout).to.equal('limit 5 until cleared  login  alice\n  count    0 of 5, 5 remaining\n');
    const cleared = await runCliInProcess([
      'override',
      'login',
      'alice',
      'null',
      '--rules',
      'test/fixtures/ops-memory-limiter.ts',
    ]);
    expect(cleared.stdout).to.equal(
      "override cleared; the rule's limit 2 applies  login  alice\n  count    0 of 2, 2 remaining\n",
    );
  });

  describe('clear errors, exit status 1 for a fault to fix and 2 for wrong usage', () => {
    let guarded: RedisServer;
    before(async () => {
      guarded = await startRedis();
      // Set once the harness has seen it answer; connections it already made stay logged in.
      await guarded.client().config('SET', 'requirepass', 'right-password');
    });
    after(() => guarded.stop());
    const withPassword = (password: string) => `redis://:${password}@127.0.0.1:${guarded.port}`;

    const cases: Array<[string, () => string[], Record<string, string>, number, RegExp]> = [
      [
        'no Redis URL',
        () => ['locked', 'login', ...RULES],
        { REDIS_URL: '' },
        1,
        /no Redis URL: give --redis/,
      ],
      [
        'not a Redis URL',
        () => ['locked', 'login', ...RULES, '--redis', 'http://x:1'],
        {},
        1,
        /must start with redis:\/\//,
      ],
      [
        'nobody listening',
        () => ['locked', 'login', ...RULES, '--redis', 'redis://127.0.0.1:1'],
        {},
        1,
        /127\.0\.0\.1:1: connection refused \(ECONNREFUSED\)/,
      ],
      [
        'a password needed',
        () => ['locked', 'login', ...RULES, '--redis', withPassword('').replace(':@', '')],
        {},
        1,
        /requires a password \(NOAUTH\)/,
      ],
      [
        'a wrong password',
        () => ['locked', 'login', ...RULES, '--redis', withPassword('wrong')],
        {},
        1,
        /refused the user name or password in the URL \(WRONGPASS\)/,
      ],
      [
        'an unknown rule',
        () => ['status', 'logn', 'x', ...RULES],
        { REDIS_URL: '' },
        1,
        /unknown rule 'logn', did you mean 'login'\?; the rules are login, api/,
      ],
      [
        'an unknown rule like none',
        () => ['locked', 'zzzzzzzz', ...RULES],
        {},
        1,
        /unknown rule 'zzzzzzzz'; the rules are login, api/,
      ],
      [
        'a missing module',
        () => ['locked', 'login', '--rules', 'nope/rules.js'],
        {},
        1,
        /--rules nope\/rules\.js: no such file \(looked for \/.+\/nope\/rules\.js\)/,
      ],
      [
        'a module without rules',
        () => ['locked', 'login', '--rules', 'test/fixtures/redis-options.ts'],
        {},
        1,
        /exports no rules .* it exports RECOMMENDED_CLUSTER_OPTIONS/,
      ],
      ['no --rules', () => ['locked', 'login'], {}, 1, /no rules loaded: give --rules <module>/],
      [
        'an unknown command',
        () => ['unlok', 'login', 'x'],
        {},
        2,
        /unknown command 'unlok'\nRun 'ratekeeper --help'/,
      ],
      [
        'a missing argument',
        () => ['status', 'login'],
        {},
        2,
        /status takes status <rule> <key>, got 1 argument/,
      ],
      [
        'a mistyped option',
        () => ['locked', 'login', '--rulez', 'x'],
        {},
        2,
        /unknown option '--rulez', did you mean --rules\?/,
      ],
      [
        'an override of an unknown rule',
        () => ['override', 'logn', 'alice', '5', ...RULES],
        {},
        1,
        /unknown rule 'logn', did you mean 'login'\?; the rules are login, api/,
      ],
      [
        'an override limit that is not one',
        () => ['override', 'login', 'alice', '0', ...RULES],
        {},
        2,
        /override: the limit must be a positive integer, or null to clear it, got '0'/,
      ],
      [
        'a bad --for',
        () => ['override', 'login', 'alice', '5', '--for', 'soon', ...RULES],
        {},
        2,
        /--for must be a duration such as 30s, 15m or 1d, got 'soon'/,
      ],
      [
        'a --for of a bare 60 (milliseconds, meant as seconds or minutes)',
        () => ['override', 'login', 'alice', '5', '--for', '60', ...RULES],
        {},
        2,
        /--for must be a duration with its unit, such as '60s' or '60ms' .*, got '60'/,
      ],
      [
        '--for without override',
        () => ['status', 'login', 'alice', '--for', '1h', ...RULES],
        {},
        2,
        /--for goes with override and limit only/,
      ],
      [
        'a rule-wide limit of 0',
        () => ['limit', 'login', '0', ...RULES],
        {},
        2,
        /limit: the limit must be a positive integer, got '0' \(--clear clears it\)/,
      ],
      [
        'limit --clear with a limit',
        () => ['limit', 'login', '5', '--clear', ...RULES],
        {},
        2,
        /limit --clear takes the rule only/,
      ],
      [
        '--clear without limit',
        () => ['status', 'login', 'alice', '--clear', ...RULES],
        {},
        2,
        /--clear goes with limit only/,
      ],
      [
        'watch of an unknown rule',
        () => ['watch', 'logn', ...RULES],
        {},
        1,
        /unknown rule 'logn', did you mean 'login'\?; the rules are login, api/,
      ],
      [
        'watch against a wrong password',
        () => ['watch', ...RULES, '--redis', withPassword('wrong')],
        {},
        1,
        /refused the user name or password in the URL \(WRONGPASS\)/,
      ],
      [
        'a bad --limit',
        () => ['locked', 'login', '--limit', '0'],
        {},
        2,
        /--limit must be an integer from 1 to 10000, got '0'/,
      ],
    ];
    // Two through the real process (its exit status), the rest through the same run function in this process.
    const spawned = ['a wrong password', 'an unknown command'];
    for (const [what, args, env, code, message] of cases) {
      it(what, async () => {
        const run = await (spawned.includes(what) ? runCli : runCliInProcess)(args(), {
          REDIS_URL: server.url,
          ...env,
        });
        expect(run.code, run.stderr).to.equal(code);
        expect(run.stderr).to.match(message);
        expect(run.stdout).to.equal('');
      });
    }

    it('a password never appears in a message', async () => {
      const run = await runCliInProcess([
        'locked',
        'login',
        ...RULES,
        '--redis',
        'http://:s3cret@127.0.0.1:1',
      ]);
      expect(run.stderr).to.include('http://:***@127.0.0.1:1').and.not.include('s3cret');
    });
  });
});
