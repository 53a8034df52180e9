// The Redis function library is run only when it is ratekeeper's own: another tenant's library that registers
// our function names (or takes our library's name with other code) is never called, on ioredis and node-redis.
import { randomBytes } from 'node:crypto';
import { expect } from 'chai';
import { createLimiter, RedisStore, type Rule } from '../../../src/index.js';
import { loadScripts } from '../../../src/stores/redis/function-library.js';
import { FUNCTION_CONFLICT_WARNING } from '../../../src/warnings.js';
import { type AnyClient, type ClientKind, IOREDIS_6, NODE_REDIS_6 } from '../../support/clients.js';
import { type RedisServer, startRedis, useCluster, withConnection } from '../../support/redis.js';
import { PATIENT } from '../../support/settle.js';

const RULES: Rule[] = [{ name: 'api', key: 'ip', limit: 5, window: { type: 'fixed', size: '1m' } }];
const OUR_CHECK = "callback = function(KEYS, ARGV) return require('check')(KEYS, ARGV, 1, 1, #KEYS) end";
/** Our check, then every key it wrote deleted: each request meets a fresh window, so all are admitted. */
const ALWAYS_ALLOWS =
  "callback = function(KEYS, ARGV) local reply = require('check')(KEYS, ARGV, 1, 1, #KEYS) " +
  "for i = 1, #KEYS do redis.call('DEL', KEYS[i]) end return reply end";

/** Our library's code with the check function made to admit everything, loaded as `name`. */
function hostileLibrary(name: string): string {
  const { library } = loadScripts().check;
  expect(library.source).to.include(OUR_CHECK);
  const body = library.source.slice(library.source.indexOf('\n'));
  return `#!lua name=${name}${body.replace(OUR_CHECK, ALWAYS_ALLOWS)}`;
}

/** How many of 20 requests of one client (`ip`) the limiter admits under a limit of 5. */
async function admitted(client: AnyClient, ip = '10.0.0.1'): Promise<number> {
  const limiter = createLimiter({
    ...PATIENT,
    store: new RedisStore({ client, prefix: `rkf${randomBytes(4).toString('hex')}` }),
    rules: RULES,
  });
  const faults: unknown[] = [];
  limiter.on('storeError', ({ error }) => faults.push(error));
  try {
    let allowed = 0;
    for (let i = 0; i < 20; i++) if ((await limiter.consume('api', ip)).allowed) allowed++;
    // A store fault would hand the decisions to the insurance store, which also admits 5.
    expect(faults, 'every decision made by Redis').to.deep.equal([]);
    return allowed;
  } finally {
    await limiter.close();
  }
}

/** The conflict warnings emitted while `action` runs. */
async function warningsDuring(action: () => Promise<unknown>): Promise<string[]> {
  const heard: string[] = [];
  const listen = (warning: Error & { code?: string }) => {
    if (warning.code === FUNCTION_CONFLICT_WARNING) heard.push(warning.message);
  };
  process.on('warning', listen);
  try {
    await action();
    // process.emitWarning delivers on the next tick.
    await new Promise((resolve) => setImmediate(resolve));
    return heard;
  } finally {
    process.off('warning', listen);
  }
}

for (const kind of [IOREDIS_6, NODE_REDIS_6] as ClientKind[]) {
  describe(`Redis function library, only ours (${kind.name})`, function () {
    this.timeout(60_000);
    let server: RedisServer;
    let client: AnyClient;

    beforeEach(async () => {
      server = await startRedis();
      client = await kind.standalone(server);
    });

    afterEach(async () => {
      await kind.close(client);
      await server.stop();
    });

    it('never calls a library of another name that registers our function names: runs its own scripts by EVALSHA, admits 5 of 20, and names the library', async () => {
      await server.client().call('FUNCTION', 'LOAD', hostileLibrary('tenant_lib'));
      let count = 0;
      const warnings = await warningsDuring(async () => {
        count = await admitted(client);
      });
      expect(count).to.equal(5);
      expect(await server.commandCount('fcall'), 'no FCALL of the other library').to.equal(0);
      expect(await server.commandCount('eval'), 'its own script, cached once').to.equal(1);
      expect(await server.commandCount('evalsha'), 'the one that found no script, then 5 decisions').to.equal(
        6,
      );
      expect(warnings).to.have.length(1);
      expect(warnings[0]).to.include('"tenant_lib"').and.include(loadScripts().check.fn);
    });

    it('never calls a library that has our name but other code: runs its own scripts by EVALSHA and admits 5 of 20', async () => {
      await server.client().call('FUNCTION', 'LOAD', hostileLibrary(loadScripts().check.library.name));
      let count = 0;
      const warnings = await warningsDuring(async () => {
        count = await admitted(client);
      });
      expect(count).to.equal(5);
      expect(await server.commandCount('fcall')).to.equal(0);
      expect(warnings).to.have.length(1);
      expect(warnings[0]).to.include(`"${loadScripts().check.library.name}"`).and.include('other code');
    });

    it('runs our own library by FCALL when another process loaded it, after checking its code', async () => {
      await server.client().call('FUNCTION', 'LOAD', loadScripts().check.library.source);
      const warnings = await warningsDuring(async () => {
        expect(await admitted(client)).to.equal(5);
      });
      expect(warnings).to.deep.equal([]);
      expect(await server.commandCount('function|list'), 'its code read once').to.equal(1);
      expect(
        await server.commandCount('fcall'),
        '5 admitted, 1 denied (the deny cache answers the rest)',
      ).to.equal(6);
      expect(await server.commandCount('evalsha')).to.equal(0);
    });
  });
}

describe('Redis function library, only ours, on a Cluster', function () {
  this.timeout(120_000);
  const cluster = useCluster();

  for (const kind of [IOREDIS_6, NODE_REDIS_6] as ClientKind[]) {
    it(`never calls another library that holds our names on one master (${kind.name}): every master runs our scripts by EVALSHA`, async () => {
      const [hostile] = cluster.nodes.filter((node) => node.role === 'master');
      if (hostile === undefined) throw new Error('no master');
      await withConnection(hostile, (conn) => conn.call('FUNCTION', 'LOAD', hostileLibrary('tenant_lib')));
      const client = await kind.cluster(cluster.nodes);
      try {
        let counts: number[] = [];
        const warnings = await warningsDuring(async () => {
          // Keys on every master: each client's 20 requests admit 5.
          counts = await Promise.all(
            ['10.0.0.1', '10.0.0.2', '10.0.0.3', '10.0.0.4'].map((ip) => admitted(client, ip)),
          );
        });
        expect(counts).to.deep.equal([5, 5, 5, 5]);
        expect(await cluster.commandCount('fcall'), 'no FCALL on any master').to.equal(0);
        expect(warnings.join('\n')).to.include('"tenant_lib"');
      } finally {
        await kind.close(client);
        await withConnection(hostile, (conn) => conn.call('FUNCTION', 'DELETE', 'tenant_lib'));
      }
    });
  }
});
