// `npx ratekeeper --postgres`: the real command on a real PostgreSQL, beside an app's PostgresStore in this process.
import { randomBytes } from 'node:crypto';
import { createServer, type Server, type Socket } from 'node:net';
import { expect } from 'chai';
import type pg from 'pg';
import { createLimiter, type Limiter, PostgresStore } from '../../../src/index.js';
import { postgresNames, SCHEMA_VERSION } from '../../../src/stores/postgres/sql.js';
import { rules } from '../../fixtures/ops-rules.js';
import { type CliRun, runCli, runCliInProcess } from '../../support/ops.js';
import { type PostgresServer, startPostgres } from '../../support/postgres.js';
import { freePort } from '../../support/redis/ports.js';
import { PATIENT, until } from '../../support/settle.js';

const RULES = ['--rules', 'test/fixtures/ops-rules.ts'];

describe('ratekeeper command line on PostgreSQL (--postgres)', function () {
  // A server of its own (initdb: seconds on a busy machine): one test changes who must give a password.
  this.timeout(120_000);
  let server: PostgresServer;
  let control: pg.Pool;
  const apps: Limiter[] = [];
  const newSchema = () => `ops_${randomBytes(4).toString('hex')}`;

  before(async () => {
    server = await startPostgres();
    control = server.pool();
  });
  after(() => server.stop());
  afterEach(async () => {
    await Promise.all(apps.splice(0).map((limiter) => limiter.close()));
  });

  /** The app: its limiter on a PostgresStore in `schema`, deny cache on; its tables made by a first decision. */
  async function startApp(schema: string): Promise<{ limiter: Limiter; store: PostgresStore }> {
    const store = new PostgresStore({ pool: server.pool(), schema });
    const limiter = createLimiter({ store, rules, ...PATIENT });
    apps.push(limiter);
    await limiter.status('login', 'nobody');
    return { limiter, store };
  }

  const command = (schema: string, ...args: string[]) =>
    runCli([...args, '--postgres', server.url, '--schema', schema, ...RULES]);
  const cli = (schema: string, ...args: string[]) =>
    runCliInProcess([...args, '--postgres', server.url, '--schema', schema, ...RULES]);

  /** The command's connections (application_name ratekeeper-cli) still open on the server. */
  async function cliConnections(): Promise<number> {
    const { rows } = await control.query(
      "SELECT count(*)::int AS n FROM pg_stat_activity WHERE application_name = 'ratekeeper-cli'",
    );
    return (rows[0] as { n: number }).n;
  }

  it("unlock: a key the app locked, and answers from its deny cache, is admitted by the app's process at once", async () => {
    const schema = newSchema();
    const { limiter, store } = await startApp(schema);
    const heard = new Promise<void>((resolve) => {
      void store.onChange((change, rule, key) => {
        if (change === 'reset' && rule === 'login' && key === 'alice') resolve();
      });
    });
    const channel = postgresNames(schema, 'rk_').channel;
    await until('the app listens for resets', async () => {
      const { rows } = await control.query(
        'SELECT count(*)::int AS n FROM pg_stat_activity WHERE query = $1',
        [`LISTEN "${channel}"`],
      );
      return (rows[0] as { n: number }).n === 1;
    });
    const answers = [];
    for (let i = 0; i < 4; i++) answers.push((await limiter.consume('login', 'alice')).allowed);
    expect(answers).to.deep.equal([true, true, false, false]);

    const listed = await command(schema, 'locked', 'login', '--json');
    expect(listed.code, listed.stderr).to.equal(0);
    const locks = JSON.parse(listed.stdout) as Array<{ rule: string; key: string; level: number }>;
    expect(locks.map(({ rule, key, level }) => ({ rule, key, level }))).to.deep.equal([
      { rule: 'login', key: 'alice', level: 1 },
    ]);
    const unlocked = await command(schema, 'unlock', 'login', 'alice');
    expect(unlocked).to.deep.equal({ code: 0, stdout: 'unlocked  login  alice\n', stderr: '' });
    await heard;
    expect((await limiter.consume('login', 'alice')).allowed, 'the app after the command').to.equal(true);

    const status = await command(schema, 'status', 'login', 'alice', '--json');
    expect(status.code, status.stderr).to.equal(0);
    expect(JSON.parse(status.stdout)).to.include({ rule: 'login', key: 'alice', count: 1, remaining: 1 });
    expect(JSON.parse(status.stdout)).to.include({ locked: false, level: 0 });
    // Each command ended its connections before it exited.
    await until('the commands closed their connections', async () => (await cliConnections()) === 0);
  });

  it('status, locked, unlock --all and override print as on Redis, and close the connection in process too', async () => {
    const schema = newSchema();
    const { limiter } = await startApp(schema);
    for (const user of ['bob', 'carol']) for (let i = 0; i < 3; i++) await limiter.consume('login', user);
    await limiter.consume('login', 'dave');

    const status = await cli(schema, 'status', 'login', 'bob');
    expect(status.code, status.stderr).to.equal(0);
    expect(status.stdout).to.match(
      /^login {2}bob\n {2}count {4}0 of 2, none admitted while locked; counting starts again from 0 when the lock ends\n {2}locked {3}yes, (?:14m \d+s|15m) left, level 1\n/,
    );
    // pool.end() has resolved: the server ends the backend as it reads the Terminate message.
    await until('the command closed its connections', async () => (await cliConnections()) === 0);
    const locked = await cli(schema, 'locked', 'login');
    expect(
      locked.stdout
        .trimEnd()
        .split('\n')
        .slice(1)
        .map((l) => l.split(/ {2,}/).slice(2)),
    ).to.deep.equal([
      ['1', 'bob'],
      ['1', 'carol'],
    ]);

    const set = await cli(schema, 'override', 'api', 'customer-42', '5000', '--for', '7d', '--json');
    expect(set.code, set.stderr).to.equal(0);
    const limit = await limiter.status('api', 'customer-42');
    expect(limit).to.include({ limit: 5000, overridden: true });
    await cli(schema, 'override', 'api', 'customer-42', 'null');
    expect(await limiter.status('api', 'customer-42')).to.include({ limit: 100, overridden: false });

    const all = await cli(schema, 'unlock', 'login', '--all', '--json');
    expect(JSON.parse(all.stdout)).to.deep.equal(
      ['bob', 'carol'].map((key) => ({ rule: 'login', key, wasLocked: true })),
    );
    // From the store (the app's deny cache hears the reset in its own time: the first test waits for that).
    for (const user of ['bob', 'carol'])
      expect(await limiter.status('login', user)).to.include({ locked: false, level: 0, count: 0 });
    expect((await cli(schema, 'unlock', 'login', 'dave')).stdout).to.equal(
      'reset (was not locked)  login  dave\n',
    );
    await until('the commands closed their connections', async () => (await cliConnections()) === 0);
  });

  it('sql prints the schema for --schema and --table-prefix, --postgres given or not, connecting to nothing', async () => {
    const port = await freePort();
    const printed = await runCliInProcess([
      'sql',
      '--schema',
      'limits',
      '--table-prefix',
      'app_',
      '--postgres',
      `postgres://nobody@127.0.0.1:${port}/x`,
    ]);
    expect(printed.code, printed.stderr).to.equal(0);
    expect(printed.stdout).to.include('CREATE TABLE IF NOT EXISTS "limits"."app_keys"');
    expect((await runCliInProcess(['sql', '--schema', 'limits', '--table-prefix', 'app_'])).stdout).to.equal(
      printed.stdout,
    );
  });

  describe('a bad URL or an unreachable database: a message naming the cause and exit status 1, never a hang', () => {
    const silent: Socket[] = [];
    let mute: Server;
    let slam: Server;
    const portOf = (s: Server) => (s.address() as { port: number }).port;
    before(async () => {
      // Accepts and never answers (a port that is not PostgreSQL's, or a host that hangs).
      mute = createServer((socket) => silent.push(socket));
      // Accepts and closes at once.
      slam = createServer((socket) => socket.destroy());
      await Promise.all([mute, slam].map((s) => new Promise<void>((r) => s.listen(0, '127.0.0.1', r))));
      await control.query("CREATE ROLE guard LOGIN PASSWORD 'right-password'");
      const { rows } = await control.query('SHOW hba_file');
      const file = (rows[0] as { hba_file: string }).hba_file;
      const lines = [
        'host all guard 127.0.0.1/32 scram-sha-256',
        'host all all 127.0.0.1/32 trust',
        'local all all trust',
      ];
      await control.query(
        `COPY (SELECT unnest(ARRAY[${lines.map((l) => `'${l}'`).join(',')}])) TO '${file.replaceAll("'", "''")}'`,
      );
      await control.query('SELECT pg_reload_conf()');
      await until('the server asks guard for a password', async () => {
        const run = await runCliInProcess(['locked', 'login', ...RULES, '--postgres', guardUrl('wrong')]);
        return /28P01/.test(run.stderr);
      });
    });
    after(() => {
      for (const socket of silent) socket.destroy();
      mute.close();
      slam.close();
    });
    const guardUrl = (password: string) =>
      `postgres://guard${password === '' ? '' : `:${password}`}@127.0.0.1:${server.port}/postgres`;
    const at = () => `127.0.0.1:${server.port}`;

    const cases: Array<[string, () => string[], Record<string, string>, number, () => RegExp]> = [
      [
        'a wrong password',
        () => ['locked', 'login', ...RULES, '--postgres', guardUrl('wrong')],
        {},
        1,
        () =>
          new RegExp(
            `PostgreSQL at ${at()}/postgres refused the user name or password in the URL \\(28P01\\)`,
          ),
      ],
      [
        'no password where one is needed',
        () => ['locked', 'login', ...RULES, '--postgres', guardUrl('')],
        {},
        1,
        () => /requires a password: put it in the URL .* or set PGPASSWORD/,
      ],
      [
        'the right password: connected, and told that this database has no tables of ours',
        () => ['locked', 'login', ...RULES, '--postgres', guardUrl('right-password')],
        {},
        1,
        () => /no ratekeeper tables at 127\.0\.0\.1:\d+\/postgres in schema "ratekeeper"/,
      ],
      [
        'a port nobody listens on',
        () => ['status', 'login', 'x', ...RULES, '--postgres', `postgres://postgres@127.0.0.1:1/postgres`],
        {},
        1,
        () => /PostgreSQL at 127\.0\.0\.1:1\/postgres: connection refused \(ECONNREFUSED\)/,
      ],
      [
        'a port that accepts and never answers',
        () => [
          'locked',
          'login',
          ...RULES,
          '--postgres',
          `postgres://postgres@127.0.0.1:${portOf(mute)}/postgres`,
        ],
        {},
        1,
        () => /no answer within 5 s \(ETIMEDOUT\); is it PostgreSQL, and running\?/,
      ],
      [
        'a port that closes the connection',
        () => [
          'locked',
          'login',
          ...RULES,
          '--postgres',
          `postgres://postgres@127.0.0.1:${portOf(slam)}/postgres`,
        ],
        {},
        1,
        () => /the server closed the connection .*; is it PostgreSQL\?/,
      ],
      [
        'a role that does not exist',
        () => ['locked', 'login', ...RULES, '--postgres', `postgres://mallory@${at()}/postgres`],
        {},
        1,
        () => /role "mallory" does not exist \(28000\)/,
      ],
      [
        'a database that does not exist',
        () => ['locked', 'login', ...RULES, '--postgres', `postgres://postgres@${at()}/nowhere`],
        {},
        1,
        () => /database "nowhere" does not exist \(3D000\)/,
      ],
      [
        'a schema with no ratekeeper tables',
        () => [
          'locked',
          'login',
          ...RULES,
          '--postgres',
          `postgres://postgres@${at()}/postgres`,
          '--schema',
          'nope',
        ],
        {},
        1,
        () =>
          /no ratekeeper tables at .* in schema "nope" with table prefix "rk_": give the app's PostgresStore options/,
      ],
      [
        'not a PostgreSQL URL',
        () => ['locked', 'login', ...RULES, '--postgres', `mysql://root@${at()}/db`],
        {},
        1,
        () => /must start with postgres:\/\/ \(or postgresql:\/\/\)/,
      ],
      [
        'not a URL',
        () => ['locked', 'login', ...RULES, '--postgres', 'localhost:5432'],
        {},
        1,
        () => /is not a PostgreSQL URL|is not a URL/,
      ],
      [
        '--redis and --postgres together',
        () => ['locked', 'login', ...RULES, '--postgres', server.url, '--redis', 'redis://127.0.0.1:1'],
        {},
        2,
        () => /--redis and --postgres: give one/,
      ],
      [
        'both variables set and neither option',
        () => ['locked', 'login', ...RULES],
        { REDIS_URL: 'redis://127.0.0.1:1', RATEKEEPER_POSTGRES_URL: 'postgres://127.0.0.1:1/x' },
        2,
        () => /both REDIS_URL and RATEKEEPER_POSTGRES_URL are set/,
      ],
      [
        '--prefix with --postgres',
        () => ['locked', 'login', ...RULES, '--postgres', server.url, '--prefix', 'shop'],
        {},
        2,
        () => /--prefix is the RedisStore's; on PostgreSQL give --schema and --table-prefix/,
      ],
      [
        '--schema without --postgres',
        () => ['locked', 'login', ...RULES, '--schema', 'limits'],
        {},
        2,
        () => /--schema goes with --postgres/,
      ],
      [
        'watch on PostgreSQL',
        () => ['watch', ...RULES, '--postgres', server.url],
        {},
        2,
        () => /watch reads the decision counts apps publish on Redis/,
      ],
    ];
    // Two through the real process (its exit status), the rest through the same run function in this process.
    const spawned = ['a wrong password', 'a port that accepts and never answers'];
    for (const [what, args, env, code, message] of cases) {
      it(what, async () => {
        const run: CliRun = await (spawned.includes(what) ? runCli : runCliInProcess)(args(), env);
        expect(run.code, run.stderr).to.equal(code);
        expect(run.stderr).to.match(message());
        if (code !== 0) expect(run.stdout).to.equal('');
        expect(run.stderr).not.to.include('right-password');
      });
    }

    it('the CLI made no schema where it found none', async () => {
      const { rows } = await control.query(
        "SELECT count(*)::int AS n FROM pg_namespace WHERE nspname = 'nope'",
      );
      expect((rows[0] as { n: number }).n).to.equal(0);
    });

    it('a paused server: the command ends with the cause instead of waiting for it', async () => {
      server.pause();
      try {
        const run = await runCliInProcess(['locked', 'login', ...RULES, '--postgres', server.url]);
        expect(run.code).to.equal(1);
        expect(run.stderr).to.match(/no answer within 5 s \(ETIMEDOUT\)/);
      } finally {
        server.resume();
      }
    });

    it('tables of another version: named, never upgraded by the command', async () => {
      const schema = newSchema();
      await startApp(schema);
      const version = `"${schema}"."rk_schema_version"`;
      await control.query(`UPDATE ${version} SET version = 99`);
      const run = await cli(schema, 'locked', 'login');
      expect(run.code).to.equal(1);
      expect(run.stderr).to.match(
        new RegExp(
          `are at version 99, this command's are at ${SCHEMA_VERSION}: run the command of the ratekeeper release`,
        ),
      );
      expect((await control.query(`SELECT version FROM ${version}`)).rows).to.deep.equal([{ version: 99 }]);
    });

    it('a password never appears in a message', async () => {
      const run = await runCliInProcess([
        'locked',
        'login',
        ...RULES,
        '--postgres',
        'mysql://u:s3cret@127.0.0.1:1/x',
      ]);
      expect(run.stderr).to.include('mysql://u:***@127.0.0.1:1/x').and.not.include('s3cret');
    });
  });
});
