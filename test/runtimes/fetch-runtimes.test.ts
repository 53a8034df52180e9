// The built package on Bun, Deno (their binaries from npm, run for real) and Node (under @hono/node-server): a fetch handler behind
// withRateLimit and a Hono app behind rateLimit, each finding the client's address from the runtime with no
// option; exact on the memory store under parallel requests; a concurrency slot held while a body streams;
// and one limit shared exactly by a Bun, a Deno and a Node process through RedisStore on ioredis.
import { type ChildProcess, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { createRequire } from 'node:module';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { expect } from 'chai';
import { ensureBuilt } from '../support/pack.js';
import { track } from '../support/processes.js';
import { getRedis, type RedisServer } from '../support/redis.js';
import { until } from '../support/settle.js';

const root = new URL('../..', import.meta.url).pathname;
const app = join(root, 'test/runtimes/apps/fetch-app.ts');
const require = createRequire(import.meta.url);

/** Each runtime's binary, from its npm package (a runtime that did not install fails here, loudly). */
const RUNTIMES = {
  bun: { bin: join(require.resolve('bun/package.json'), '..', 'bin', 'bun.exe'), args: [app] },
  deno: { bin: join(require.resolve('deno/package.json'), '..', 'deno'), args: ['run', '-A', app] },
  node: { bin: process.execPath, args: ['--import', 'tsx', app] },
} as const;
type Runtime = keyof typeof RUNTIMES;

interface Running {
  url: string;
  child: ChildProcess;
}

/** Starts the app on `runtime` and resolves once it printed the port it listens on. */
async function start(runtime: Runtime, env: Record<string, string>): Promise<Running> {
  const { bin, args } = RUNTIMES[runtime];
  const child = track(
    spawn(bin, args, {
      cwd: root,
      env: { ...process.env, NO_COLOR: '1', DENO_NO_UPDATE_CHECK: '1', ...env },
      stdio: ['ignore', 'pipe', 'pipe'],
    }),
  );
  let errors = '';
  child.stderr?.on('data', (chunk: Buffer) => {
    errors += chunk.toString();
  });
  const port = await new Promise<number>((resolve, reject) => {
    const lines = createInterface({ input: child.stdout as NodeJS.ReadableStream });
    lines.on('line', (line) => {
      if (line.startsWith('{')) resolve((JSON.parse(line) as { port: number }).port);
    });
    child.once('exit', (code) =>
      reject(new Error(`${runtime} exited (${code}) before listening: ${errors}`)),
    );
  });
  return { url: `http://127.0.0.1:${port}`, child };
}

function stop(running: Running | undefined): Promise<void> {
  if (running === undefined || running.child.exitCode !== null) return Promise.resolve();
  return new Promise((resolve) => {
    running.child.once('exit', () => resolve());
    running.child.kill('SIGKILL');
  });
}

/** `count` GETs of /count at once: their statuses. */
async function burst(url: string, count: number): Promise<number[]> {
  const responses = await Promise.all(Array.from({ length: count }, () => fetch(`${url}/count`)));
  await Promise.all(responses.map((r) => r.arrayBuffer()));
  return responses.map((r) => r.status);
}

const admitted = (statuses: number[]) => statuses.filter((s) => s === 200).length;

for (const runtime of Object.keys(RUNTIMES) as Runtime[]) {
  for (const kind of ['fetch', 'hono'] as const) {
    describe(`${runtime}: ${kind === 'fetch' ? 'withRateLimit (ratekeeper/fetch)' : 'Hono rateLimit'} on the memory store`, function () {
      this.timeout(120_000);
      let running: Running | undefined;
      before(async () => {
        ensureBuilt();
        running = await start(runtime, { APP: kind });
      });
      after(() => stop(running));

      it('keys on the address the runtime gives, with no option', async () => {
        const { url } = running as Running;
        expect(await (await fetch(`${url}/whoami`)).text()).to.equal('127.0.0.1');
      });

      it('admits exactly 20 of 30 parallel requests', async () => {
        const statuses = await burst((running as Running).url, 30);
        expect(admitted(statuses)).to.equal(20);
        expect(statuses.filter((s) => s === 429)).to.have.length(10);
      });

      it('holds a concurrency slot while the body streams, and frees it when the body ends', async () => {
        const { url } = running as Running;
        const first = await fetch(`${url}/stream`);
        const reader = (first.body as ReadableStream<Uint8Array>).getReader();
        expect(new TextDecoder().decode((await reader.read()).value)).to.equal('a');
        const second = await fetch(`${url}/stream`);
        await second.arrayBuffer();
        expect(second.status).to.equal(429);
        await (await fetch(`${url}/finish`)).arrayBuffer();
        let rest = '';
        for (let chunk = await reader.read(); !chunk.done; chunk = await reader.read())
          rest += new TextDecoder().decode(chunk.value);
        expect(rest).to.equal('b');
        // The slot is freed once the runtime has read the body to its end: a third stream is admitted.
        let third: Response | undefined;
        await until('a third stream is admitted', async () => {
          third = await fetch(`${url}/stream`);
          if (third.status === 200) return true;
          await third.arrayBuffer();
          return false;
        });
        await (third as Response).body?.cancel();
        await (await fetch(`${url}/finish`)).arrayBuffer();
      });
    });
  }
}

describe('one limit shared by a Bun, a Deno and a Node process through RedisStore on ioredis', function () {
  this.timeout(120_000);
  let server: RedisServer;
  const running: Running[] = [];
  before(async () => {
    ensureBuilt();
    server = await getRedis();
  });
  after(async () => {
    await Promise.all(running.map(stop));
  });

  it('admits exactly 20 of 90 requests sent to all three at once', async () => {
    const env = {
      STORE: 'redis',
      REDIS_PORT: String(server.port),
      PREFIX: `rkrt${randomBytes(4).toString('hex')}`,
    };
    running.push(
      await start('bun', { ...env, APP: 'fetch' }),
      await start('deno', { ...env, APP: 'hono' }),
      await start('node', { ...env, APP: 'fetch' }),
    );
    const [bun, deno, node] = running as [Running, Running, Running];
    const [a, b, c] = await Promise.all([burst(bun.url, 30), burst(deno.url, 30), burst(node.url, 30)]);
    expect(admitted(a) + admitted(b) + admitted(c)).to.equal(20);
    expect([...a, ...b, ...c].filter((s) => s === 429)).to.have.length(70);
  });
});
