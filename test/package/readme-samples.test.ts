// The manual's code as users meet it: every ```ts block of README.md and docs/*.md type-checked with
// --strict and nodenext against the packed package, every ```js block run, and every export of every
// entry point named somewhere in the manual. The README stays short and links the rest: the table of contents
// of docs/, the error codes in docs/errors.md, bench/RESULTS.md's one-line-per-library table.
//
// The package is packed (`npm pack`) and unpacked into .samples-test/node_modules/ratekeeper; the
// samples' other imports (express, koa, ioredis, fastify, hono, their @types) resolve from the
// project's node_modules one level up, so nothing is installed. .samples-test/ has a package.json of
// its own, so `ratekeeper` cannot resolve to the project itself (a package's self-reference).
//
// Samples importing @nestjs/* or ratekeeper/nest compile with experimentalDecorators and
// emitDecoratorMetadata, as Nest apps do; the rest with standard decorators.
//
// A block that is deliberately a fragment is fenced ```ts fragment (or ```js fragment): counted and
// skipped, with the reason printed. Keep them rare.
import { execFileSync, spawnSync } from 'node:child_process';
import { mkdirSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import { expect } from 'chai';
import ts from 'typescript';
import { getRedis } from '../support/redis.js';

const root = new URL('../..', import.meta.url).pathname;
const sandbox = join(root, '.samples-test');
const installed = join(sandbox, 'node_modules', 'ratekeeper');

interface Sample {
  /** Where the block is: `docs/rules.md:42` (the line of its opening fence). */
  where: string;
  lang: 'ts' | 'js';
  fragment: boolean;
  code: string;
}

/** The manual's pages: README.md, then docs/*.md. */
function pages(): string[] {
  const docs = join(root, 'docs');
  return [
    join(root, 'README.md'),
    ...readdirSync(docs)
      .filter((f) => f.endsWith('.md'))
      .sort()
      .map((f) => join(docs, f)),
  ];
}

/** Every fenced ts/js block; other languages (bash, text) are not code to check. */
function samplesOf(file: string): Sample[] {
  const lines = readFileSync(file, 'utf8').split('\n');
  const out: Sample[] = [];
  for (let i = 0; i < lines.length; i++) {
    const open = /^(\s*)```(\w*)\s*(.*)$/.exec(lines[i] as string);
    if (!open) continue;
    const [, indent, lang, info] = open as unknown as [string, string, string, string];
    let end = i + 1;
    while (end < lines.length && (lines[end] as string).trim() !== '```') end++;
    if (lang === 'ts' || lang === 'js') {
      out.push({
        where: `${relative(root, file)}:${i + 1}`,
        lang,
        fragment: info.split(/\s+/).includes('fragment'),
        code: lines
          .slice(i + 1, end)
          .map((l) => (l.startsWith(indent) ? l.slice(indent.length) : l))
          .join('\n'),
      });
    }
    i = end;
  }
  return out;
}

/** Packs the project (building dist/ first only when it is missing or older than the sources). */
function pack(): void {
  const newest = (dir: string): number =>
    Math.max(
      0,
      ...(readdirSync(join(root, dir), { recursive: true }) as string[]).map(
        (f) => statSync(join(root, dir, f)).mtimeMs,
      ),
    );
  let built = 0;
  try {
    built = statSync(join(root, 'dist', 'index.d.ts')).mtimeMs;
  } catch {}
  if (built < Math.max(newest('src'), newest('adapters'), newest('lua')))
    execFileSync('npm', ['run', 'build', '--silent'], { cwd: root, stdio: 'ignore' });
  const tarball = execFileSync(
    'npm',
    ['pack', '--silent', '--ignore-scripts', '--pack-destination', sandbox],
    {
      cwd: root,
      encoding: 'utf8',
    },
  )
    .trim()
    .split('\n')
    .pop() as string;
  execFileSync('tar', ['-xzf', join(sandbox, tarball), '-C', installed, '--strip-components=1']);
}

/** The packed package's declarations of every entry point in its package.json, in one program (built once). */
let declared:
  | { entries: (readonly [string, string])[]; program: ts.Program; checker: ts.TypeChecker }
  | undefined;
function declarations(): NonNullable<typeof declared> {
  if (declared) return declared;
  const pkg = JSON.parse(readFileSync(join(installed, 'package.json'), 'utf8')) as {
    exports: Record<string, string | { import?: { types?: string } }>;
  };
  const entries = Object.entries(pkg.exports).flatMap(([name, target]) =>
    typeof target === 'object' && target.import?.types
      ? [[name, join(installed, target.import.types)] as const]
      : [],
  );
  const program = ts.createProgram(
    entries.map(([, file]) => file),
    {
      module: ts.ModuleKind.NodeNext,
      moduleResolution: ts.ModuleResolutionKind.NodeNext,
      noEmit: true,
      types: [],
      skipLibCheck: true,
    },
  );
  declared = { entries, program, checker: program.getTypeChecker() };
  return declared;
}

const all = pages().flatMap(samplesOf);
const fragments = all.filter((s) => s.fragment);

describe('the manual: README.md and docs/*.md', function () {
  this.timeout(300_000); // a build, when dist/ is stale, takes most of it

  before(() => {
    rmSync(sandbox, { recursive: true, force: true });
    mkdirSync(installed, { recursive: true });
    writeFileSync(
      join(sandbox, 'package.json'),
      JSON.stringify({ name: 'samples', private: true, type: 'module' }),
    );
    pack();
    const count = (lang: string) => all.filter((s) => s.lang === lang && !s.fragment).length;
    console.log(`      ${count('ts')} ts and ${count('js')} js samples in README.md and docs/*.md`);
    if (fragments.length > 0)
      console.log(
        `      ${fragments.length} fragment(s) skipped, fenced as such: ${fragments.map((f) => f.where).join(', ')}`,
      );
  });
  after(() => rmSync(sandbox, { recursive: true, force: true }));

  it('has samples to check, and fragments are rare', () => {
    expect(all.filter((s) => s.lang === 'ts').length).to.be.greaterThan(20);
    expect(fragments.length, 'fragments').to.be.at.most(3);
  });

  it('every ts block compiles under tsc --strict --module nodenext against the packed package', () => {
    const ts_ = all.filter((s) => s.lang === 'ts' && !s.fragment);
    const files = ts_.map((s, i) => {
      const file = join(sandbox, `sample-${String(i).padStart(3, '0')}.ts`);
      // `export {}` makes each block a module of its own (top-level await, no shared globals).
      writeFileSync(file, `${s.code}\nexport {};\n`);
      return file;
    });
    const options: ts.CompilerOptions = {
      strict: true,
      module: ts.ModuleKind.NodeNext,
      moduleResolution: ts.ModuleResolutionKind.NodeNext,
      target: ts.ScriptTarget.ES2022,
      types: ['node'],
      noEmit: true,
      skipLibCheck: true,
    };
    // NestJS apps compile with legacy decorators and their metadata (the Nest CLI's tsconfig); every
    // other sample with TypeScript's standard decorators (`@limited`).
    const nest = (i: number) => /from '(@nestjs\/[\w-]+|ratekeeper\/nest)'/.test((ts_[i] as Sample).code);
    const groups = [
      { files: files.filter((_, i) => !nest(i)), options },
      {
        files: files.filter((_, i) => nest(i)),
        options: { ...options, experimentalDecorators: true, emitDecoratorMetadata: true },
      },
    ].filter((g) => g.files.length > 0);
    const problems: string[] = [];
    for (const group of groups) {
      const program = ts.createProgram(group.files, group.options);
      for (const d of ts.getPreEmitDiagnostics(program)) {
        const text = ts.flattenDiagnosticMessageText(d.messageText, '\n');
        const index = d.file ? files.indexOf(d.file.fileName) : -1;
        if (index < 0) {
          problems.push(`${d.file?.fileName ?? '(global)'}: TS${d.code} ${text}`);
          continue;
        }
        const { line } = (d.file as ts.SourceFile).getLineAndCharacterOfPosition(d.start ?? 0);
        const [page, fence] = (ts_[index] as Sample).where.split(':') as [string, string];
        problems.push(`${page}:${Number(fence) + 1 + line}: TS${d.code} ${text}`);
      }
    }
    // The packed package, not the project's sources or dist/, answered `ratekeeper`.
    const resolved = ts.resolveModuleName(
      'ratekeeper',
      files[0] as string,
      options,
      ts.sys,
      undefined,
      undefined,
      ts.ModuleKind.ESNext,
    );
    expect(resolved.resolvedModule?.resolvedFileName).to.equal(join(installed, 'dist', 'index.d.ts'));
    if (problems.length > 0) {
      const unique = [...new Set(problems)];
      throw new Error(`${unique.length} type error(s) in ${ts_.length} samples:\n${unique.join('\n')}`);
    }
  });

  it('every js block runs (on the memory store, or on a spawned Redis when it uses one)', async () => {
    const js = all.filter((s) => s.lang === 'js' && !s.fragment);
    expect(js.length).to.be.greaterThan(0);
    for (const [i, s] of js.entries()) {
      const file = join(sandbox, `sample-${i}.${/\brequire\(/.test(s.code) ? 'cjs' : 'mjs'}`);
      writeFileSync(file, s.code);
      const env = { ...process.env };
      if (/ioredis|REDIS_URL|RedisStore/.test(s.code)) env.REDIS_URL = (await getRedis()).url;
      const run = spawnSync(process.execPath, [file], {
        cwd: sandbox,
        env,
        encoding: 'utf8',
        timeout: 30_000,
      });
      expect(run.status, `${s.where} exited ${run.status}: ${run.stderr}`).to.equal(0);
      expect(run.stderr, s.where).to.equal('');
    }
  });

  it('names every export of every entry point in package.json', () => {
    const manual = pages()
      .map((p) => readFileSync(p, 'utf8'))
      .join('\n');
    const { entries, checker, program } = declarations();
    expect(entries.map(([name]) => name)).to.include.members(['.', './express', './koa']);
    const missing: string[] = [];
    let count = 0;
    for (const [entry, file] of entries) {
      const source = program.getSourceFile(file) as ts.SourceFile;
      const module = checker.getSymbolAtLocation(source) as ts.Symbol;
      for (const symbol of checker.getExportsOfModule(module)) {
        if (symbol.name === 'default') continue; // the Fastify plugin's default is `rateLimit`
        count++;
        if (!new RegExp(`\\b${symbol.name}\\b`).test(manual)) missing.push(`${entry}: ${symbol.name}`);
      }
    }
    expect(count).to.be.greaterThan(50);
    expect(missing, 'exports no page of the manual names').to.deep.equal([]);
  });

  it('keeps the README a short manual: at most 300 lines, the rest in docs/, CONTRIBUTING.md and CHANGELOG.md', () => {
    const readme = readFileSync(join(root, 'README.md'), 'utf8');
    expect(readme.trimEnd().split('\n').length).to.be.at.most(300);
    for (const page of ['CONTRIBUTING.md', 'CHANGELOG.md', 'docs/errors.md', 'docs/api.md'])
      expect(readme, `the README links ${page}`).to.include(`](${page}`);
  });

  it("links every docs/ page from the README's table of contents of docs/", () => {
    const readme = readFileSync(join(root, 'README.md'), 'utf8');
    const from = readme.indexOf('## The manual: docs/');
    expect(from, 'the README has the section "## The manual: docs/"').to.be.greaterThan(-1);
    const next = readme.indexOf('\n## ', from + 1);
    const toc = readme.slice(from, next < 0 ? undefined : next);
    const pages = readdirSync(join(root, 'docs')).filter((f) => f.endsWith('.md'));
    expect(pages.filter((f) => !toc.includes(`](docs/${f})`))).to.deep.equal([]);
  });

  it("shows bench/RESULTS.md's one-line-per-library table of the quiet machine", () => {
    const results = readFileSync(join(root, 'bench', 'RESULTS.md'), 'utf8');
    const readme = readFileSync(join(root, 'README.md'), 'utf8');
    const from = results.indexOf('### One line per library, quiet machine');
    expect(from, 'bench/RESULTS.md has the summary table').to.be.greaterThan(-1);
    const rows: string[] = [];
    for (const line of results.slice(from).split('\n').slice(1)) {
      if (line.startsWith('|')) rows.push(line);
      else if (rows.length > 0) break;
    }
    expect(rows.length).to.be.greaterThan(2);
    expect(readme).to.include(rows.join('\n'));
  });

  it("lists every error class's every code in docs/errors.md's table of error codes, linked from the README", () => {
    const readme = readFileSync(join(root, 'README.md'), 'utf8');
    expect(readme, 'the README links docs/errors.md').to.include('](docs/errors.md)');
    const page = readFileSync(join(root, 'docs', 'errors.md'), 'utf8');
    const from = page.indexOf('## Error codes');
    expect(from, 'docs/errors.md has the section "## Error codes"').to.be.greaterThan(-1);
    const next = page.indexOf('\n## ', from + 1);
    const table = page.slice(from, next < 0 ? undefined : next);
    const rows = new Set(
      [...table.matchAll(/^\| `(ERR_\w+)` \| `(\w+)` \|/gm)].map(([, code, cls]) => `${cls} ${code}`),
    );
    const { checker, program } = declarations();
    const index = join(installed, 'dist', 'index.d.ts');
    const module = checker.getSymbolAtLocation(program.getSourceFile(index) as ts.SourceFile) as ts.Symbol;
    const codes: string[] = [];
    for (const symbol of checker.getExportsOfModule(module)) {
      const target = symbol.flags & ts.SymbolFlags.Alias ? checker.getAliasedSymbol(symbol) : symbol;
      if (!(target.flags & ts.SymbolFlags.Class)) continue;
      const instance = checker.getDeclaredTypeOfSymbol(target);
      const code = instance.getProperty('code');
      if (!code) continue;
      const type = checker.getTypeOfSymbol(code);
      for (const member of type.isUnion() ? type.types : [type])
        if (member.isStringLiteral()) codes.push(`${symbol.name} ${member.value}`);
    }
    expect(codes.length).to.be.greaterThan(15);
    expect(
      codes.filter((c) => !rows.has(c)),
      'codes missing from the table in docs/errors.md',
    ).to.deep.equal([]);
    expect(
      [...rows].filter((r) => !codes.includes(r)),
      'rows of docs/errors.md no error class carries',
    ).to.deep.equal([]);
  });
});
