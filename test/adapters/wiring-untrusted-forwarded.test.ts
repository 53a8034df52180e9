// The untrusted-forwarded warning on every framework, each in a fresh process (it is once per process):
// X-Forwarded-For or Forwarded reaching an 'ip' rule of an app that trusts no proxy warns once, naming the
// framework's own proxy setting; an app that trusts its proxy, a request without the header and a rule not
// keyed on the address say nothing. And the spoofable-IP warning's advice for Koa's app.maxIpsCount.
import { execFile } from 'node:child_process';
import { expect } from 'chai';
import Koa from 'koa';
import supertest from 'supertest';
import { rateLimit, SPOOFABLE_IP_WARNING } from '../../adapters/koa.js';

const root = new URL('../..', import.meta.url).pathname;

function runFixture(
  framework: string,
): Promise<{ quiet: number; seen: Array<{ code: string; message: string }> }> {
  return new Promise((resolve, reject) => {
    execFile(
      process.execPath,
      ['--import', 'tsx', 'test/fixtures/forwarded-app.ts', framework],
      { cwd: root, encoding: 'utf8', timeout: 60_000 },
      (error, stdout, stderr) => {
        if (error) reject(new Error(`${error.message}\n${stderr}`));
        else resolve(JSON.parse(stdout));
      },
    );
  });
}

const settings: Record<string, RegExp> = {
  express: /while Express trusts no proxy: set app\.set\('trust proxy', n\)/,
  koa: /while Koa trusts no proxy: set app\.proxy = true and app\.maxIpsCount/,
  fastify:
    /while Fastify trusts no proxy: create it with the trustProxy option set to the proxies' addresses or subnets, Fastify\(\{ trustProxy: '10\.0\.0\.0\/8' \}\) \(Fastify 5\.12 and later ignore a number of hops\)/,
  hono: /while ratekeeper\/hono's rateLimit trusts no proxy: give it the trustProxy option.*getConnInfo/,
  'nest-express':
    /while Nest's Express platform trusts no proxy: call app\.set\('trust proxy', n\) on the NestExpressApplication/,
  'nest-fastify':
    /while Nest's Fastify platform trusts no proxy: create it with new FastifyAdapter\(\{ trustProxy: addresses \}\)/,
};

describe('X-Forwarded-For reaching an ip rule of an app that trusts no proxy', function () {
  this.timeout(120_000);
  for (const [framework, setting] of Object.entries(settings)) {
    it(`${framework}: warns once per process, naming the framework's proxy setting`, async () => {
      const { quiet, seen } = await runFixture(framework);
      expect(quiet, 'trusted proxy, no header, no ip rule').to.equal(0);
      expect(seen.map((w) => w.code)).to.deep.equal(['RATEKEEPER_UNTRUSTED_FORWARDED']);
      const message = seen[0]?.message ?? '';
      expect(message).to.match(
        /^ratekeeper: a request carrying X-Forwarded-For reached rule "first", keyed on the client address/,
      );
      expect(message).to.match(setting);
      expect(message).to.match(/every client then has the proxy's address and all share one bucket/);
    });
  }
});

describe("Fastify's trustProxy as a number of hops, which Fastify 5.12 and later ignore", function () {
  this.timeout(120_000);
  it('warns once, on the first forwarded request, that Fastify trusts no proxy and what to set instead', async () => {
    const { quiet, seen } = await runFixture('fastify-hops');
    expect(quiet, 'warned among the requests of the app given trustProxy: 1').to.equal(1);
    expect(seen.map((w) => w.code)).to.deep.equal(['RATEKEEPER_UNTRUSTED_FORWARDED']);
    expect(seen[0]?.message).to.match(/reached rule "trusted", keyed on the client address/);
    expect(seen[0]?.message).to.match(settings.fastify as RegExp);
  });
});

describe('Koa with app.proxy and app.maxIpsCount 0 (the left-most, client-chosen X-Forwarded-For entry)', () => {
  it('warns that any client chooses its key, and to set app.maxIpsCount to the number of proxies', async () => {
    const messages: string[] = [];
    const onWarning = (warning: Error & { code?: string }) => {
      if (warning.code === SPOOFABLE_IP_WARNING) messages.push(warning.message);
    };
    process.on('warning', onWarning);
    try {
      const app = new Koa({ proxy: true });
      app.use(rateLimit([{ name: 'per-ip', key: 'ip', limit: 5, window: { type: 'fixed', size: '1m' } }]));
      app.use((ctx) => {
        ctx.body = 'ok';
      });
      await supertest(app.callback()).get('/').set('x-forwarded-for', '198.51.100.7').expect(200);
      await new Promise((resolve) => setImmediate(resolve));
    } finally {
      process.off('warning', onWarning);
    }
    expect(messages).to.deep.equal([
      'ratekeeper: Koa app.proxy is on with app.maxIpsCount 0 (set app.maxIpsCount = n, n the number of proxies in front of the app (app.maxIpsCount = 1 behind one)); any client can choose its rate-limit key by sending X-Forwarded-For',
    ]);
  });
});
