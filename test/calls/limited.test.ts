// The @limited method decorator: compiled by the project's TypeScript without experimentalDecorators and
// run as tsc emits it; and the auth-code example (the seeds' service method) on both stores.
import { mkdirSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import { expect } from 'chai';
import ts from 'typescript';
import { createAuthCodeService } from '../../examples/auth-code.js';
import { createLimiter, limited, RateLimitExceededError } from '../../src/index.js';
import { fakeClock } from '../stores/conformance/suite.js';
import { memoryStores, redisStores } from '../support/stores.js';

const ROOT = resolve(import.meta.dirname, '../..');
const EXAMPLE = join(ROOT, 'examples', 'auth-code.ts');

describe('@limited compiled by the TypeScript compiler', () => {
  let out: string;
  before(() => {
    mkdirSync(join(ROOT, '.scratch'), { recursive: true });
    // Inside the checkout, so the emitted files find node_modules and package.json's "type": "module".
    out = mkdtempSync(join(ROOT, '.scratch', 'decorators-'));
  });
  after(() => rmSync(out, { recursive: true, force: true }));

  it('type-checks and emits TC39 decorators with the project tsconfig, experimentalDecorators off; the emitted class limits', async function () {
    this.timeout(60_000);
    const config = ts.getParsedCommandLineOfConfigFile(
      join(ROOT, 'tsconfig.json'),
      {},
      {
        ...ts.sys,
        onUnRecoverableConfigFileDiagnostic: (d) => {
          throw new Error(ts.flattenDiagnosticMessageText(d.messageText, '\n'));
        },
      },
    );
    if (config === undefined) throw new Error('no tsconfig');
    expect(config.options.experimentalDecorators, 'the project does not turn them on').to.equal(undefined);
    const options: ts.CompilerOptions = {
      ...config.options,
      experimentalDecorators: false,
      noEmit: false,
      declaration: false,
      outDir: out,
      rootDir: ROOT,
    };
    const program = ts.createProgram([EXAMPLE], options);
    const diagnostics = ts
      .getPreEmitDiagnostics(program)
      .map((d) => ts.flattenDiagnosticMessageText(d.messageText, '\n'));
    expect(diagnostics).to.deep.equal([]);
    expect(program.emit().emitSkipped).to.equal(false);

    const emitted = join(out, 'examples', 'auth-code.js');
    const js = readFileSync(emitted, 'utf8');
    expect(js, 'TC39 decorators, as tsc lowers them').to.include('__esDecorate');
    expect(js, 'not the legacy (experimental) form').not.to.include('__decorate(');
    const mod = (await import(pathToFileURL(emitted).href)) as typeof import('../../examples/auth-code.js');
    const sent: string[] = [];
    const { service, limiter } = mod.createAuthCodeService({
      deliver: async (email) => void sent.push(email),
    });
    expect(await service.sendAuthCode({ email: 'ann@example.com' })).to.match(/^\d{6}$/);
    const denied = (await service.sendAuthCode({ email: 'ann@example.com' }).then(
      () => undefined,
      (e: unknown) => e,
    )) as { name?: string; code?: string } | undefined;
    expect([denied?.name, denied?.code]).to.deep.equal(['RateLimitExceededError', 'ERR_RATE_LIMITED']);
    expect(sent).to.deep.equal(['ann@example.com']);
    await limiter.close();
  });
});

for (const stores of [memoryStores, redisStores]) {
  describe(`the auth-code example on the ${stores.name} store`, () => {
    it('sends 1 code per address per 60 s and 5 per calendar hour; a denied call sends nothing', async () => {
      const clock = fakeClock(Date.parse('2026-01-05T09:00:00Z'));
      const sent: string[] = [];
      const { service, limiter } = createAuthCodeService({
        store: await stores.makeStore(clock.read),
        deliver: async (email) => void sent.push(email),
      });
      const outcomes: string[] = [];
      for (let minute = 0; minute < 7; minute++) {
        for (const attempt of [0, 1]) {
          const result = await service.sendAuthCode({ email: 'ann@example.com' }).then(
            () => 'sent',
            (e: unknown) => (e instanceof RateLimitExceededError ? (e.decision.rule as string) : String(e)),
          );
          outcomes.push(`${minute}.${attempt} ${result}`);
        }
        clock.advance(60_000);
      }
      expect(outcomes).to.deep.equal([
        ...[0, 1, 2, 3, 4].flatMap((m) => [`${m}.0 sent`, `${m}.1 auth-code-minute`]),
        '5.0 auth-code-hour',
        '5.1 auth-code-hour',
        '6.0 auth-code-hour',
        '6.1 auth-code-hour',
      ]);
      expect(sent).to.have.length(5);
      clock.set('2026-01-05T10:00:00Z');
      expect(await service.sendAuthCode({ email: 'ann@example.com' })).to.match(/^\d{6}$/);
      await limiter.close();
    });
  });
}

describe('@limited types', () => {
  it('infers the arguments from a key function, takes any async method with a template, and refuses a sync one', async () => {
    const limiter = createLimiter({
      rules: [{ name: 'r', key: 'ip', limit: 1, window: { type: 'fixed', size: '1m' } }],
    });
    class Orders {
      @limited(limiter, {
        rules: 'r',
        key: (order: { id: number }) => order.id,
        cost: (order) => order.id % 2,
      })
      async place(order: { id: number }, note: string): Promise<string> {
        return `${order.id} ${note}`;
      }

      @limited(limiter, { rules: 'r', key: 'note:{1}' })
      async annotate(_order: { id: number }, note: string): Promise<number> {
        return note.length;
      }

      // @ts-expect-error a decorated method returns a promise: a synchronous one would change its type
      @limited(limiter, { rules: 'r', key: '{0}' })
      count(id: number): number {
        return id;
      }
    }
    const orders = new Orders();
    expect(await orders.place({ id: 3 }, 'first')).to.equal('3 first');
    expect(await orders.annotate({ id: 3 }, 'hello')).to.equal(5);
    const denied = await orders.place({ id: 3 }, 'again').catch((e: unknown) => e);
    expect(denied).to.be.instanceOf(RateLimitExceededError);
    await limiter.close();
  });
});
