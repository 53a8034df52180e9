// The untrusted-forwarded warning on every framework, each in a fresh process (it is once per process):
// X-Forwarded-For or Forwarded reaching an 'ip' rule of an app that trusts no proxy warns once, naming the
// framework's own proxy setting; an app that trusts its proxy, a request without the header and a rule not
// keyed on the address say nothing.
import { execFile } from 'node:child_process';
import { expect } from 'chai';

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
    /while Fastify trusts no proxy: create it with the trustProxy option.*Fastify\(\{ trustProxy: 1 \}\)/,
  hono: /while ratekeeper\/hono's rateLimit trusts no proxy: give it the trustProxy option.*getConnInfo/,
  'nest-express':
    /while Nest's Express platform trusts no proxy: call app\.set\('trust proxy', n\) on the NestExpressApplication/,
  'nest-fastify':
    /while Nest's Fastify platform trusts no proxy: create it with new FastifyAdapter\(\{ trustProxy: n \}\)/,
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
