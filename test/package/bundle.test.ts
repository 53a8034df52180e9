// An app that uses ratekeeper bundled into one file with esbuild (only the database clients left out), run by node against a real Redis and a real PostgreSQL.
import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync, statSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { expect } from 'chai';
import { build } from 'esbuild';
import { getPostgres } from '../support/postgres.js';
import { getRedis } from '../support/redis.js';

const root = new URL('../..', import.meta.url).pathname;
const run = promisify(execFile);

/** A limit of 3 per window for one key, asked 5 times one after the other: 3 allowed, then 2 denied. */
const DECISIONS = `
  const limiter = createLimiter({
    store,
    rules: [{ name: 'api', key: 'ip', limit: 3, window: { type: 'fixed', size: '1h' } }],
  });
  const allowed = [];
  for (let i = 0; i < 5; i++) allowed.push((await limiter.check({ ip: '10.9.8.7', method: 'GET', path: '/' })).allowed);
  const status = await limiter.status('api', '10.9.8.7');
  console.log(JSON.stringify({ allowed, count: status.count }));
  await limiter.close();
`;

const APPS: Record<string, (url: string, name: string) => string> = {
  redis: (url, name) => `
    import { Redis } from 'ioredis';
    import { createLimiter, RedisStore } from ${JSON.stringify(join(root, 'src/index.ts'))};
    const client = new Redis(${JSON.stringify(url)});
    const store = new RedisStore({ client, prefix: ${JSON.stringify(name)} });
    ${DECISIONS}
    client.disconnect();`,
  postgres: (url, name) => `
    import pg from 'pg';
    import { createLimiter, PostgresStore } from ${JSON.stringify(join(root, 'src/index.ts'))};
    const pool = new pg.Pool({ connectionString: ${JSON.stringify(url)}, max: 2 });
    const store = new PostgresStore({ pool, schema: ${JSON.stringify(name)} });
    ${DECISIONS}
    await pool.end();`,
};

describe('an app bundled into one file with esbuild', function () {
  // esbuild, node's start and the first schema installation on a busy machine.
  this.timeout(120_000);
  let dir: string;

  before(() => {
    // Outside the project: no lua/ or sql/ above the bundle, so it runs only on what it carries.
    dir = mkdtempSync(join(tmpdir(), 'rk-bundle-'));
    // The clients, left out of the bundle, are found where an app's own would be.
    symlinkSync(join(root, 'node_modules'), join(dir, 'node_modules'), 'dir');
  });
  after(() => rmSync(dir, { recursive: true, force: true }));

  for (const store of Object.keys(APPS)) {
    it(`with the ${store} store: one file, its decisions exact`, async () => {
      const url = store === 'redis' ? (await getRedis()).url : (await getPostgres()).url;
      const name = `rk_bundle_${process.pid}_${Date.now()}`;
      const entry = join(dir, `${store}-app.mjs`);
      const outfile = join(dir, `${store}-bundle.mjs`);
      writeFileSync(entry, (APPS[store] as (url: string, name: string) => string)(url, name));
      const result = await build({
        entryPoints: [entry],
        outfile,
        bundle: true,
        platform: 'node',
        format: 'esm',
        target: 'node20',
        external: ['ioredis', 'pg'],
        logLevel: 'silent',
        metafile: true,
      });
      // The store's scripts or SQL come from the embedded texts, inside the bundle.
      const texts = store === 'redis' ? 'lua-texts.ts' : 'sql-texts.ts';
      expect(Object.keys(result.metafile.inputs).some((input) => input.endsWith(texts))).to.equal(true);
      console.log(`      ${store} bundle: ${statSync(outfile).size} bytes`);
      const { stdout } = await run(process.execPath, [outfile], { cwd: dir, timeout: 90_000 });
      expect(JSON.parse(stdout.trim())).to.deep.equal({
        allowed: [true, true, true, false, false],
        count: 3,
      });
    });
  }
});
