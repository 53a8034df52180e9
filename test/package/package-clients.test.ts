// The packed package installed as a user would, with no flags, in a fresh folder beside the newest ioredis,
// node-redis and iovalkey its peer ranges allow (one `npm install` from the registry), deciding on a real Redis
// through each from ESM.
import { execFile, execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { expect } from 'chai';
import { packProject } from '../support/pack.js';
import { type RedisServer, startRedis } from '../support/redis.js';

const root = new URL('../..', import.meta.url).pathname;
const manifest = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')) as {
  peerDependencies: Record<string, string>;
};
const CLIENTS = ['ioredis', 'redis', 'iovalkey'] as const;

/** Decides twice on a limit of 1 through each client; prints each client's answers and version. */
const PROGRAM = `
import { readFileSync } from 'node:fs';
import { createLimiter, RedisStore } from 'ratekeeper';
import { Redis } from 'ioredis';
import { createClient } from 'redis';
import { Valkey } from 'iovalkey';

const host = '127.0.0.1';
const port = Number(process.env.REDIS_PORT);
const rules = [{ name: 'api', key: 'ip', limit: 1, window: { type: 'fixed', size: '1m' } }];
const version = (name) =>
  JSON.parse(readFileSync(new URL(\`./node_modules/\${name}/package.json\`, import.meta.url), 'utf8')).version;

async function decide(name, client) {
  const limiter = createLimiter({ store: new RedisStore({ client, prefix: name }), rules });
  const first = await limiter.consume('api', '192.0.2.1');
  const second = await limiter.consume('api', '192.0.2.1');
  const { state } = await limiter.health();
  await limiter.close();
  return [first.allowed, second.allowed, state];
}

const ioredis = new Redis({ host, port });
const valkey = new Valkey({ host, port });
const nodeRedis = createClient({ socket: { host, port } });
await nodeRedis.connect();
const result = {
  ioredis: [version('ioredis'), ...(await decide('ioredis', ioredis))],
  redis: [version('redis'), ...(await decide('redis', nodeRedis))],
  iovalkey: [version('iovalkey'), ...(await decide('iovalkey', valkey))],
};
ioredis.disconnect();
valkey.disconnect();
await nodeRedis.close();
console.log(JSON.stringify(result));
`;

/** True when release `a` (`major.minor.patch`) is newer than `b`, compared number by number. */
function newer(a: string, b: string): boolean {
  const x = a.split('.').map(Number);
  const y = b.split('.').map(Number);
  for (let i = 0; i < 3; i++) if ((x[i] ?? 0) !== (y[i] ?? 0)) return (x[i] ?? 0) > (y[i] ?? 0);
  return false;
}

describe('newer (release order, not publication order)', () => {
  it('puts 6.4.0 after 5.12.4 and 6.10.0 after 6.9.1', () => {
    expect(['6.3.1', '6.4.0', '5.12.4'].reduce((a, b) => (newer(b, a) ? b : a))).to.equal('6.4.0');
    expect(newer('6.10.0', '6.9.1')).to.equal(true);
    expect(newer('5.12.4', '6.4.0')).to.equal(false);
  });
});

describe('the packed package beside the newest Redis clients', function () {
  this.timeout(300_000);
  let app: string;
  let server: RedisServer;
  let installLog: string;

  before(async () => {
    // A folder of its own, outside the project: nothing resolves from the project's node_modules.
    app = mkdtempSync(join(tmpdir(), 'ratekeeper-clients-'));
    server = await startRedis();
    const tarball = packProject(app);
    writeFileSync(
      join(app, 'package.json'),
      JSON.stringify({ name: 'app', version: '1.0.0', private: true, type: 'module' }),
    );
    const specs = CLIENTS.map((name) => `${name}@${manifest.peerDependencies[name]}`);
    const { stdout, stderr } = await promisify(execFile)('npm', ['install', `./${tarball}`, ...specs], {
      cwd: app,
      encoding: 'utf8',
      timeout: 240_000,
    });
    installLog = stdout + stderr;
  });
  after(async () => {
    await server?.stop();
    if (app) rmSync(app, { recursive: true, force: true });
  });

  it('installs with no ERESOLVE and no peer warning', () => {
    expect(installLog).not.to.match(/ERESOLVE|peer dep|conflicting peer/i);
  });

  it('decides on a real Redis through ioredis, node-redis and iovalkey, each the newest its peer range allows', async () => {
    writeFileSync(join(app, 'main.js'), PROGRAM);
    const { stdout } = await promisify(execFile)(process.execPath, ['main.js'], {
      cwd: app,
      encoding: 'utf8',
      timeout: 30_000,
      env: { ...process.env, REDIS_PORT: String(server.port) },
    });
    const result = JSON.parse(stdout) as Record<(typeof CLIENTS)[number], [string, boolean, boolean, string]>;
    for (const name of CLIENTS) {
      const [version, ...answers] = result[name];
      expect(answers, name).to.deep.equal([true, false, 'ok']);
      const view = ['view', `${name}@${manifest.peerDependencies[name]}`, 'version', '--json'];
      const versions = JSON.parse(execFileSync('npm', view, { cwd: app, encoding: 'utf8' })) as
        | string
        | string[];
      // The registry lists versions in publication order (a 5.x patch may follow 6.x): compared as versions.
      const newest = (Array.isArray(versions) ? versions : [versions]).reduce((a, b) =>
        newer(b, a) ? b : a,
      );
      expect(version, `${name}: the newest of ${manifest.peerDependencies[name]}`).to.equal(newest);
    }
  });
});
