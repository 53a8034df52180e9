// The package as users get it: `npm pack`, unpacked into node_modules, imported from ESM and CommonJS.
import { execFileSync, spawnSync } from 'node:child_process';
import {
  cpSync,
  existsSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  rmSync,
  statSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { dirname, join, normalize } from 'node:path';
import { expect } from 'chai';

const root = new URL('../..', import.meta.url).pathname;
// Inside the project, so the unpacked package finds its dependencies in the project's node_modules.
const sandbox = join(root, '.pkgtest');
const installed = join(sandbox, 'node_modules', 'ratekeeper');

/** GitHub's anchor of a heading: lower case, punctuation dropped, spaces as hyphens. */
function anchorOf(heading: string): string {
  return heading
    .trim()
    .toLowerCase()
    .replace(/[^\p{L}\p{N}\s_-]/gu, '')
    .replace(/\s/g, '-');
}

/** Every anchor a Markdown page has: its headings' (a repeated one numbered as GitHub does). */
function anchorsOf(markdown: string): Set<string> {
  const seen = new Map<string, number>();
  const anchors = new Set<string>();
  let fenced = false;
  for (const line of markdown.split('\n')) {
    if (/^\s*```/.test(line)) fenced = !fenced;
    const heading = fenced ? null : /^#{1,6}\s+(.*)$/.exec(line);
    if (heading === null) continue;
    const base = anchorOf((heading[1] as string).replace(/`/g, ''));
    const n = seen.get(base) ?? 0;
    seen.set(base, n + 1);
    anchors.add(n === 0 ? base : `${base}-${n}`);
  }
  return anchors;
}

function run(file: string, code: string): string {
  writeFileSync(join(sandbox, file), code);
  return execFileSync(process.execPath, [join(sandbox, file)], {
    cwd: sandbox,
    encoding: 'utf8',
    timeout: 30_000,
  });
}

describe('the packed package', function () {
  this.timeout(180_000);
  let files: string[] = [];

  before(() => {
    rmSync(sandbox, { recursive: true, force: true });
    mkdirSync(installed, { recursive: true });
    // `npm pack` runs `prepack` (the build) first.
    const tarball = execFileSync('npm', ['pack', '--silent', '--pack-destination', sandbox], {
      cwd: root,
      encoding: 'utf8',
    })
      .trim()
      .split('\n')
      .pop() as string;
    execFileSync('tar', ['-xzf', join(sandbox, tarball), '-C', installed, '--strip-components=1']);
    // The app's own manifest, with a version of its own: the command must not print it as ratekeeper's.
    writeFileSync(
      join(sandbox, 'package.json'),
      JSON.stringify({ name: 'app', version: '9.9.9', private: true }),
    );
    files = readdirSync(installed, { recursive: true }) as string[];
  });
  after(() => rmSync(sandbox, { recursive: true, force: true }));

  it('ships dist/ (the Lua and SQL inside it) and the README, and no lua/, sql/, tests or sources', () => {
    // The scripts and the schema are embedded in the built files at build time: nothing reads lua/ or sql/.
    expect(files.filter((f) => /^(lua|sql|src|test|scripts)\b/.test(f))).to.deep.equal([]);
    expect(files).to.include.members([
      join('dist', 'index.js'),
      join('dist', 'index.cjs'),
      join('dist', 'index.d.ts'),
      'README.md',
    ]);
  });

  it('ships a LICENSE that is the MIT license package.json names', () => {
    expect(files).to.include('LICENSE');
    const manifest = JSON.parse(readFileSync(join(installed, 'package.json'), 'utf8')) as { license: string };
    expect(manifest.license).to.equal('MIT');
    expect(readFileSync(join(installed, 'LICENSE'), 'utf8')).to.match(/^MIT License\n/);
  });

  it('ships docs/, and every relative link of the README and of the pages it ships leads to a file (and a heading) in the package', () => {
    const pages = readdirSync(join(root, 'docs')).filter((f) => f.endsWith('.md'));
    expect(pages.length).to.be.greaterThan(5);
    for (const page of pages) expect(files).to.include(join('docs', page));
    const shipped = files.filter((f) => f.endsWith('.md') && !f.startsWith('dist'));
    expect(shipped).to.include('README.md');
    const dead: string[] = [];
    let links = 0;
    for (const page of shipped) {
      const text = readFileSync(join(installed, page), 'utf8').replace(/```[\s\S]*?```/g, '');
      for (const [, target] of text.matchAll(/\]\(([^)\s]+)\)/g)) {
        if (/^[a-z][a-z0-9+.-]*:/i.test(target as string)) continue; // https:, mailto:
        links++;
        const [path, anchor] = (target as string).split('#') as [string, string | undefined];
        const file = path === '' ? page : normalize(join(dirname(page), path));
        const where = `${page}: ${target}`;
        if (file.startsWith('..') || !existsSync(join(installed, file))) {
          dead.push(`${where} (no ${file} in the package)`);
        } else if (anchor !== undefined && file.endsWith('.md')) {
          if (!anchorsOf(readFileSync(join(installed, file), 'utf8')).has(anchor))
            dead.push(`${where} (no such heading in ${file})`);
        }
      }
    }
    expect(links).to.be.greaterThan(30);
    expect(dead, 'links that lead nowhere from node_modules/ratekeeper').to.deep.equal([]);
  });

  it('installs in at most 3 MB with its runtime dependencies, and no framework helper among them', () => {
    const manifest = JSON.parse(readFileSync(join(installed, 'package.json'), 'utf8')) as {
      dependencies: Record<string, string>;
    };
    const lock = JSON.parse(readFileSync(join(root, 'package-lock.json'), 'utf8')) as {
      packages: Record<string, { dependencies?: Record<string, string> }>;
    };
    // Every package an install of ratekeeper brings, through the lock's dependency graph.
    const brought = new Set<string>();
    const visit = (name: string) => {
      if (brought.has(name)) return;
      brought.add(name);
      for (const dependency of Object.keys(lock.packages[`node_modules/${name}`]?.dependencies ?? {}))
        visit(dependency);
    };
    for (const name of Object.keys(manifest.dependencies)) visit(name);
    expect([...brought].filter((name) => /fastify|nestjs|hono|express|koa|luxon/.test(name))).to.deep.equal(
      [],
    );
    const bytes = (dir: string) =>
      (readdirSync(dir, { recursive: true }) as string[])
        .map((file) => statSync(join(dir, file)))
        .filter((stat) => stat.isFile())
        .reduce((sum, stat) => sum + stat.size, 0);
    const total =
      bytes(installed) + [...brought].reduce((sum, name) => sum + bytes(join(root, 'node_modules', name)), 0);
    expect(total).to.be.at.most(3_000_000);
  });

  const program = (load: string) => `${load}
    const limiter = createLimiter({ rules: [{ name: 'r', key: 'ip', limit: 1, window: { type: 'gcra', size: '1s' } }] });
    const req = { method: 'GET', path: '/', ip: '203.0.113.9', headers: {} };
    const a = await limiter.check(req);
    const b = await limiter.check(req);
    const store = new RedisStore({ client: { call: async () => null, duplicate() {} }, clock: () => 0 });
    console.log(JSON.stringify([a.allowed, b.allowed, typeof rateLimit, typeof koaRateLimit, typeof store.evaluate]));
    await limiter.close();
    await store.close();`;

  it('imports from ESM', () => {
    const out = run(
      'esm.mjs',
      program(`import { createLimiter, RedisStore } from 'ratekeeper';
        import { rateLimit } from 'ratekeeper/express';
        import { rateLimit as koaRateLimit } from 'ratekeeper/koa';`),
    );
    expect(JSON.parse(out)).to.deep.equal([true, false, 'function', 'function', 'function']);
  });

  it('requires from CommonJS', () => {
    const out = run(
      'cjs.cjs',
      `(async () => {
        const { createLimiter, RedisStore } = require('ratekeeper');
        const { rateLimit } = require('ratekeeper/express');
        const { rateLimit: koaRateLimit } = require('ratekeeper/koa');
        ${program('')}
      })();`,
    );
    expect(JSON.parse(out)).to.deep.equal([true, false, 'function', 'function', 'function']);
  });

  /** Each framework entry, loaded both ways, limits a real app: one admitted request, then a 429. */
  const frameworks: Array<{ entry: string; esm: string; cjs: string; app: string }> = [
    {
      entry: 'ratekeeper/fastify',
      esm: `import Fastify from 'fastify'; import { rateLimit } from 'ratekeeper/fastify';`,
      cjs: `const Fastify = require('fastify'); const { rateLimit } = require('ratekeeper/fastify');`,
      app: `const app = Fastify();
        await app.register(rateLimit, { rules });
        app.get('/', async (request) => request.rateLimit.remaining);
        const statuses = [];
        for (let i = 0; i < 2; i++) statuses.push((await app.inject('/')).statusCode);
        await app.close();`,
    },
    {
      entry: 'ratekeeper/hono',
      esm: `import { Hono } from 'hono'; import { rateLimit } from 'ratekeeper/hono';`,
      cjs: `const { Hono } = require('hono'); const { rateLimit } = require('ratekeeper/hono');`,
      app: `const app = new Hono();
        app.use(rateLimit(rules));
        app.get('/', (c) => c.json(c.get('rateLimit').remaining));
        const statuses = [];
        for (let i = 0; i < 2; i++) statuses.push((await app.request('/')).status);`,
    },
    {
      entry: 'ratekeeper/nest',
      esm: `import { Controller, Get, Module } from '@nestjs/common'; import { NestFactory } from '@nestjs/core';
        import { RateLimitGuard } from 'ratekeeper/nest';`,
      cjs: `const { Controller, Get, Module } = require('@nestjs/common'); const { NestFactory } = require('@nestjs/core');
        const { RateLimitGuard } = require('ratekeeper/nest');`,
      // Decorators applied by hand: plain JavaScript has no decorator syntax.
      app: `class Api { get() { return 'ok'; } }
        Reflect.decorate([Get()], Api.prototype, 'get', Object.getOwnPropertyDescriptor(Api.prototype, 'get'));
        Reflect.decorate([Controller()], Api);
        class AppModule {}
        Reflect.decorate([Module({ controllers: [Api] })], AppModule);
        const app = await NestFactory.create(AppModule, { logger: false });
        app.useGlobalGuards(new RateLimitGuard(rules));
        await app.listen(0, '127.0.0.1');
        const url = await app.getUrl();
        const statuses = [];
        for (let i = 0; i < 2; i++) statuses.push((await fetch(url)).status);
        const denied = await fetch(url);
        statuses.push(await denied.json(), denied.headers.get('retry-after'));
        await app.close();`,
    },
  ];
  for (const { entry, esm, cjs, app } of frameworks) {
    const body = `const rules = [{ name: 'r', key: () => 'all', limit: 1, window: { type: 'fixed', size: '1m' } }];
      ${app}
      console.log(JSON.stringify(statuses));`;
    // Nest's denial follows Nest's convention, through its exception filters, with the headers.
    const expected =
      entry === 'ratekeeper/nest'
        ? [200, 429, { statusCode: 429, message: 'Too Many Requests' }, '60']
        : [200, 429];
    it(`limits an app through ${entry} from ESM and from CommonJS`, () => {
      const name = entry.replace('ratekeeper/', '');
      expect(JSON.parse(run(`${name}.mjs`, `${esm}\n${body}`))).to.deep.equal(expected);
      expect(JSON.parse(run(`${name}.cjs`, `${cjs}\n(async () => {\n${body}\n})();`))).to.deep.equal(
        expected,
      );
    });
  }

  it('limits a NestJS 11 app through ratekeeper/nest from ESM and from CommonJS (the peer range is ^11 || ^12)', () => {
    // Unpacked beside test/nest11's node_modules, so '@nestjs/*' resolves to NestJS 11 for the app and the package.
    const nest11 = join(root, 'test', 'nest11', '.pkgtest');
    rmSync(nest11, { recursive: true, force: true });
    mkdirSync(join(nest11, 'node_modules'), { recursive: true });
    cpSync(installed, join(nest11, 'node_modules', 'ratekeeper'), { recursive: true });
    const nest = frameworks.find((f) => f.entry === 'ratekeeper/nest') as (typeof frameworks)[number];
    const body = `const rules = [{ name: 'r', key: () => 'all', limit: 1, window: { type: 'fixed', size: '1m' } }];
      ${nest.app}
      const { version } = require('@nestjs/core/package.json');
      console.log(JSON.stringify([version.split('.')[0], ...statuses]));`;
    const runThere = (file: string, code: string) => {
      writeFileSync(join(nest11, file), code);
      return JSON.parse(
        execFileSync(process.execPath, [join(nest11, file)], {
          cwd: nest11,
          encoding: 'utf8',
          timeout: 30_000,
        }),
      );
    };
    try {
      const esm = `import { createRequire } from 'node:module'; const require = createRequire(import.meta.url);\n${nest.esm}`;
      const expected = ['11', 200, 429, { statusCode: 429, message: 'Too Many Requests' }, '60'];
      expect(runThere('nest.mjs', `${esm}\n${body}`)).to.deep.equal(expected);
      expect(runThere('nest.cjs', `${nest.cjs}\n(async () => {\n${body}\n})();`)).to.deep.equal(expected);
    } finally {
      rmSync(nest11, { recursive: true, force: true });
    }
  });

  it('slows requests over the limit through slowDown of every framework entry, from ESM and from CommonJS', () => {
    const body = `const rules = () => [{ name: 'slow', key: () => 'all', limit: 1, window: { type: 'fixed', size: '1m' } }];
      const seen = {};
      const options = (name) => ({ delay: 3, onDelayed: (ms) => (seen[name] ??= []).push(ms) });
      const ex = express();
      ex.use(express_.slowDown(rules(), options('express')));
      ex.get('/', (_req, res) => res.send('ok'));
      const ko = new Koa();
      ko.use(koa_.slowDown(rules(), options('koa')));
      ko.use((ctx) => { ctx.body = 'ok'; });
      const fa = Fastify();
      await fa.register(fastify_.slowDown(rules(), options('fastify')));
      fa.get('/', async () => 'ok');
      await fa.ready();
      const ho = new Hono();
      ho.use(hono_.slowDown(rules(), options('hono')));
      ho.get('/', (c) => c.text('ok'));
      const statuses = [];
      for (let i = 0; i < 3; i++) {
        statuses.push((await supertest(ex).get('/')).status, (await supertest(ko.callback()).get('/')).status);
        statuses.push((await supertest(fa.server).get('/')).status, (await ho.request('/')).status);
      }
      await fa.close();
      console.log(JSON.stringify({ statuses: [...new Set(statuses)], seen }));`;
    const expected = {
      statuses: [200],
      seen: { express: [3, 6], koa: [3, 6], fastify: [3, 6], hono: [3, 6] },
    };
    const esm = `import express from 'express'; import Koa from 'koa'; import Fastify from 'fastify'; import { Hono } from 'hono';
      import supertest from 'supertest';
      import * as express_ from 'ratekeeper/express'; import * as koa_ from 'ratekeeper/koa';
      import * as fastify_ from 'ratekeeper/fastify'; import * as hono_ from 'ratekeeper/hono';\n${body}`;
    expect(JSON.parse(run('slow-down.mjs', esm))).to.deep.equal(expected);
    const cjs = `const express = require('express'); const Koa = require('koa'); const Fastify = require('fastify');
      const { Hono } = require('hono'); const supertest = require('supertest');
      const express_ = require('ratekeeper/express'); const koa_ = require('ratekeeper/koa');
      const fastify_ = require('ratekeeper/fastify'); const hono_ = require('ratekeeper/hono');
      (async () => {\n${body}\n})();`;
    expect(JSON.parse(run('slow-down.cjs', cjs))).to.deep.equal(expected);
  });

  it('warns once when X-Forwarded-For reaches an ip rule of an app that trusts no proxy, and refuses a misspelt Fastify route config', () => {
    const out = run(
      'proxy-and-config.mjs',
      `import express from 'express'; import Fastify from 'fastify'; import supertest from 'supertest';
      import { rateLimit } from 'ratekeeper/express'; import { rateLimit as fastifyRateLimit } from 'ratekeeper/fastify';
      const codes = [];
      process.on('warning', (w) => { if (w.code?.startsWith('RATEKEEPER_')) codes.push(w.code); });
      const app = express();
      app.use(rateLimit([{ name: 'api', key: 'ip', limit: 10, window: { type: 'fixed', size: '1m' } }]));
      app.get('/', (_req, res) => res.send('ok'));
      for (let i = 0; i < 3; i++) await supertest(app).get('/').set('x-forwarded-for', '203.0.113.7');
      await new Promise((resolve) => setImmediate(resolve));
      const fastify = Fastify();
      await fastify.register(fastifyRateLimit, {});
      fastify.get('/', { config: { ratelimit: [] } }, async () => 'ok');
      const refused = await fastify.ready().then(() => undefined, (error) => [error.name, error.code]);
      console.log(JSON.stringify({ codes, refused }));`,
    );
    expect(JSON.parse(out)).to.deep.equal({
      codes: ['RATEKEEPER_UNTRUSTED_FORWARDED'],
      refused: ['RateLimitConfigError', 'ERR_OPTION'],
    });
  });

  it('serves the operator console through ratekeeper/console from ESM and from CommonJS', () => {
    const body = `const limiter = createLimiter({ rules: [{ name: 'login', key: 'ip', limit: 1, window: { type: 'fixed', size: '1m' }, lockout: { duration: '1m' } }] });
      await limiter.consume('login', 'a<b');
      await limiter.consume('login', 'a<b');
      const handler = operatorConsole(limiter, { authorize: (req) => req.headers['x-operator'] === 'yes' });
      const server = createServer((req, res) => void handler(req, res));
      await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
      const url = 'http://127.0.0.1:' + server.address().port + '/';
      const refused = await fetch(url);
      const page = await fetch(url, { headers: { 'x-operator': 'yes' } });
      const text = await page.text();
      console.log(JSON.stringify([refused.status, page.status, page.headers.get('content-security-policy').startsWith("default-src 'none'"), text.includes('a&lt;b')]));
      server.close();`;
    const expected = [403, 200, true, true];
    const esm = `import { createServer } from 'node:http'; import { createLimiter } from 'ratekeeper'; import { operatorConsole } from 'ratekeeper/console';\n${body}`;
    expect(JSON.parse(run('console.mjs', esm))).to.deep.equal(expected);
    const cjs = `const { createServer } = require('node:http'); const { createLimiter } = require('ratekeeper'); const { operatorConsole } = require('ratekeeper/console');\n(async () => {\n${body}\n})();`;
    expect(JSON.parse(run('console.cjs', cjs))).to.deep.equal(expected);
  });

  it('counts decisions into prom-client through ratekeeper/prometheus from ESM and from CommonJS', () => {
    const body = `const limiter = createLimiter({ rules: [{ name: 'api', key: 'ip', limit: 1, window: { type: 'fixed', size: '1m' } }] });
      const registry = new Registry();
      prometheusMetrics(limiter, { registry });
      await limiter.consume('api', 'a');
      await limiter.consume('api', 'a');
      const text = await registry.metrics();
      console.log(JSON.stringify(text.split('\\n').filter((line) => line.startsWith('ratekeeper_decisions_total'))));
      await limiter.close();`;
    const expected = [
      'ratekeeper_decisions_total{rule="api",result="allowed",source="store"} 1',
      'ratekeeper_decisions_total{rule="api",result="denied",source="store"} 1',
    ];
    const esm = `import { Registry } from 'prom-client'; import { createLimiter } from 'ratekeeper'; import { prometheusMetrics } from 'ratekeeper/prometheus';\n${body}`;
    expect(JSON.parse(run('prometheus.mjs', esm))).to.deep.equal(expected);
    const cjs = `const { Registry } = require('prom-client'); const { createLimiter } = require('ratekeeper'); const { prometheusMetrics } = require('ratekeeper/prometheus');\n(async () => {\n${body}\n})();`;
    expect(JSON.parse(run('prometheus.cjs', cjs))).to.deep.equal(expected);
  });

  it('runs the `ratekeeper` command its bin names, with an ESM and a CommonJS rules module', () => {
    const manifest = JSON.parse(
      run(
        'bin.mjs',
        `import { readFileSync } from 'node:fs';
      console.log(readFileSync('node_modules/ratekeeper/package.json', 'utf8'));`,
      ),
    ) as {
      bin: Record<string, string>;
    };
    const bin = join(installed, manifest.bin.ratekeeper as string);
    const ratekeeper = (...args: string[]) =>
      execFileSync(bin, args, { cwd: sandbox, encoding: 'utf8', timeout: 30_000 });
    const own = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')) as { version: string };
    expect(ratekeeper('--version')).to.equal(`${own.version}\n`);
    const rule = `{ name: 'sms', key: 'body.phone', limit: 1, window: { type: 'calendar', unit: 'day' } }`;
    writeFileSync(join(sandbox, 'rules.mjs'), `export const rules = [${rule}];`);
    writeFileSync(join(sandbox, 'rules.cjs'), `module.exports = [${rule}];`);
    for (const module of ['rules.mjs', 'rules.cjs']) {
      expect(JSON.parse(ratekeeper('rules', '--rules', module, '--json'))).to.deep.equal([
        {
          name: 'sms',
          limit: '1 per day (calendar)',
          match: 'every request',
          lockout: 'none',
          mode: 'enforce',
        },
      ]);
    }
  });

  it('says how to run a TypeScript rules module under tsx, and the command it prints runs', () => {
    const rule = `{ name: 'sms', key: 'body.phone', limit: 1, window: { type: 'calendar', unit: 'day' } }`;
    writeFileSync(
      join(sandbox, 'rules.ts'),
      `import type { Rule } from 'ratekeeper';\nexport const rules: Rule[] = [${rule}];\n`,
    );
    // What `npm install` links, so that `npx ratekeeper` finds the package's own command.
    mkdirSync(join(sandbox, 'node_modules', '.bin'), { recursive: true });
    symlinkSync('../ratekeeper/dist/cli.js', join(sandbox, 'node_modules', '.bin', 'ratekeeper'));
    const { NODE_OPTIONS: _, ...env } = process.env;
    const refused = spawnSync(
      join(installed, 'dist', 'cli.js'),
      ['rules', '--rules', './rules.ts', '--json', '--redis', 'redis://:s3cret@127.0.0.1:1'],
      { cwd: sandbox, env, encoding: 'utf8', timeout: 30_000 },
    );
    expect(refused.status, refused.stderr).to.equal(1);
    expect(refused.stderr).to.match(
      /^ratekeeper: --rules \.\/rules\.ts: Node [\d.]+ cannot import this TypeScript module\. Run the command under tsx \(npm install -D tsx\), as:\n/,
    );
    expect(refused.stderr).to.include('or point --rules at the built .js.').and.not.include('s3cret');
    const command = /^ {2}(NODE_OPTIONS=.*)$/m.exec(refused.stderr)?.[1];
    expect(command).to.equal(
      `NODE_OPTIONS="--import tsx" npx ratekeeper rules --rules ./rules.ts --json --redis 'redis://:***@127.0.0.1:1'`,
    );
    // The command as printed, through a shell (the rules command connects to nothing; npx finds the local bin).
    const out = execFileSync('sh', ['-c', command as string], {
      cwd: sandbox,
      env: { ...env, npm_config_offline: 'true', npm_config_update_notifier: 'false' },
      encoding: 'utf8',
      timeout: 60_000,
    });
    expect(JSON.parse(out)).to.deep.equal([
      {
        name: 'sms',
        limit: '1 per day (calendar)',
        match: 'every request',
        lockout: 'none',
        mode: 'enforce',
      },
    ]);
  });

  it('refuses what users get wrong at construction: rules [], a window of 60, a month of fixed length', () => {
    const out = run(
      'refusals.mjs',
      `import { createLimiter } from 'ratekeeper';
      import { rateLimit } from 'ratekeeper/express';
      const refusal = (make) => { try { make(); return 'accepted'; } catch (error) { return [error.name, error.code, error.message]; } };
      const rule = (window) => ({ name: 'api', key: 'ip', limit: 1, window });
      console.log(JSON.stringify([
        refusal(() => createLimiter({ rules: [] })),
        refusal(() => rateLimit([])),
        refusal(() => createLimiter({ rules: [rule({ type: 'fixed', size: 60 })] })),
        refusal(() => createLimiter({ rules: [rule({ type: 'gcra', size: '60' })] })),
        refusal(() => createLimiter({ rules: [rule({ type: 'fixed', size: '1mo' })] })),
      ]));`,
    );
    const [empty, emptyExpress, bare, bareString, month] = JSON.parse(out) as string[][];
    const rulesError = [
      'RateLimitConfigError',
      'ERR_RULES',
      'rules must be a non-empty array of rule objects, got []',
    ];
    expect(empty).to.deep.equal(rulesError);
    expect(emptyExpress).to.deep.equal(rulesError);
    for (const refused of [bare, bareString]) {
      expect(refused?.slice(0, 2)).to.deep.equal(['RateLimitConfigError', 'ERR_DURATION']);
      expect(refused?.[2]).to.include("such as '60s' or '60ms'");
    }
    expect(month?.[2]).to.include("use window { type: 'calendar', unit: 'month' }");
  });

  it('sends draft-6 and draft-7 header fields through ratekeeper/hono, from ESM and from CommonJS', () => {
    const body = `const rules = [{ name: 'api', key: () => 'all', limit: 5, window: { type: 'fixed', size: '1m' } }];
      const fields = [];
      for (const headers of ['draft-6', 'draft-7']) {
        const app = new Hono();
        app.use(rateLimit(rules, { headers }));
        app.get('/', (c) => c.text('ok'));
        const res = await app.request('/');
        fields.push(['ratelimit-limit', 'ratelimit-remaining', 'ratelimit-reset', 'ratelimit', 'ratelimit-policy'].map((name) => res.headers.get(name)));
      }
      console.log(JSON.stringify(fields));`;
    const expected = [
      ['5', '4', '60', null, '5;w=60'],
      [null, null, null, 'limit=5, remaining=4, reset=60', '5;w=60'],
    ];
    const esm = `import { Hono } from 'hono'; import { rateLimit } from 'ratekeeper/hono';\n${body}`;
    expect(JSON.parse(run('headers.mjs', esm))).to.deep.equal(expected);
    const cjs = `const { Hono } = require('hono'); const { rateLimit } = require('ratekeeper/hono');\n(async () => {\n${body}\n})();`;
    expect(JSON.parse(run('headers.cjs', cjs))).to.deep.equal(expected);
  });

  it('answers status and consume for a key with an override without calling the rule limit function', () => {
    const out = run(
      'plan-override.mjs',
      `import { createLimiter } from 'ratekeeper';
      let calls = 0;
      const limit = (req) => { calls++; return req.user.plan === 'pro' ? 10 : 4; };
      const limiter = createLimiter({ rules: [{ name: 'plan', key: 'user', limit, window: { type: 'fixed', size: '1m' } }] });
      await limiter.override('plan', 'f9', 6);
      const consumed = await limiter.consume('plan', 'f9');
      const status = await limiter.status('plan', 'f9');
      console.log(JSON.stringify([consumed.allowed, status.limit, status.overridden, status.count, calls]));
      await limiter.close();`,
    );
    expect(JSON.parse(out)).to.deep.equal([true, 6, true, 1, 0]);
  });

  it('carries its PostgreSQL schema in the built files (no sql/ shipped): the command, ESM and CommonJS', () => {
    const out = execFileSync(process.execPath, [join(installed, 'dist', 'cli.js'), 'sql'], {
      encoding: 'utf8',
    });
    expect(out).to.include('CREATE OR REPLACE FUNCTION "ratekeeper"."rk_check"(');
    // The store installs its schema on first use: a pool whose database has no tables, then fails the install.
    const probe = `
      const texts = [];
      const client = {
        query: async (q) => {
          texts.push(q.text);
          throw Object.assign(new Error('no'), { code: texts.length === 1 ? '42P01' : 'XX000' });
        },
        on() {}, removeListener() {}, release() {},
      };
      const pool = { connect: async () => client, totalCount: 0, idleCount: 0, options: {} };
      const store = new PostgresStore({ pool });
      store.locked({ name: 'r' }, 1).catch(() => {}).then(() => {
        console.log(String(texts[1]).includes('CREATE OR REPLACE FUNCTION "ratekeeper"."rk_check"('));
        return store.close();
      });`;
    expect(run('pg-esm.mjs', `import { PostgresStore } from 'ratekeeper';${probe}`).trim()).to.equal('true');
    expect(run('pg-cjs.cjs', `const { PostgresStore } = require('ratekeeper');${probe}`).trim()).to.equal(
      'true',
    );
  });

  it('carries its Lua scripts in the built files (no lua/ shipped), in both formats', () => {
    // The constructor assembles and hashes the scripts: it throws when a module it requires is missing.
    const probe = `
      const store = new RedisStore({ client: { call: async () => null, duplicate() {} }, clock: () => 0 });
      console.log(typeof store);`;
    expect(run('lua-esm.mjs', `import { RedisStore } from 'ratekeeper';${probe}`).trim()).to.equal('object');
    expect(run('lua-cjs.cjs', `const { RedisStore } = require('ratekeeper');${probe}`).trim()).to.equal(
      'object',
    );
  });
});
