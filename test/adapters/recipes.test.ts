// The login and verification-code recipes through real frameworks: the attack suite through Express and Koa on the
// memory store and on Redis (Express also on PostgreSQL), and the docs' quotes of the example apps checked against
// the files. The recipes' own rules and keys: test/unit/recipes/login.test.ts, verification-code.test.ts.
import { readdirSync, readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { expect } from 'chai';
import { createExpressApp } from '../../examples/express-app.js';
import { createKoaApp } from '../../examples/koa-app.js';
import { memoryStores, postgresStores, redisStores } from '../support/stores.js';
import { attackSuite, type Framework } from './suites/attack-suite.js';

const express: Framework = {
  name: 'Express',
  create(options) {
    const { app, limiter, loginLimiter } = createExpressApp(options);
    return { listener: app, limiter, loginLimiter };
  },
};
const koa: Framework = {
  name: 'Koa',
  create(options) {
    const { app, limiter, loginLimiter } = createKoaApp(options);
    return { listener: app.callback(), limiter, loginLimiter };
  },
};

for (const stores of [memoryStores, redisStores]) {
  attackSuite(express, stores);
  attackSuite(koa, stores);
}
// The recipes unchanged on PostgreSQL, through one framework (the stores' own suites cover the rest).
attackSuite(express, postgresStores);

describe('README recipes', () => {
  /**
   * Every TypeScript block of README.md and docs/*.md whose first line is `// examples/<file>.ts` is that
   * file's code: each name it imports ('ratekeeper' standing for '../src/index.js') the file imports too,
   * and each run of lines between `// …` elisions appears in the file as it is (indentation aside).
   * RK_README=<file> checks another file, e.g. a section before it is pasted in.
   */
  const docsDir = new URL('../../docs/', import.meta.url);
  const pages = process.env.RK_README
    ? [process.env.RK_README]
    : [
        fileURLToPath(new URL('../../README.md', import.meta.url)),
        ...readdirSync(docsDir)
          .filter((f) => f.endsWith('.md'))
          .map((f) => fileURLToPath(new URL(f, docsDir))),
      ];
  const readme = pages.map((p) => readFileSync(p, 'utf8')).join('\n');
  const blocks = [...readme.matchAll(/```ts\n\/\/ (examples\/[\w-]+\.ts)[^\n]*\n([\s\S]*?)```/g)].map(
    (m) => ({
      file: m[1] as string,
      code: m[2] as string,
    }),
  );
  const IMPORT = /^import\s+(?:type\s+)?([\w$]+\s*,?\s*)?(?:\{([^}]*)\})?\s*from\s+'([^']+)';?$/gm;
  /** Module to imported names (the default import as `default:<local>`). */
  const importsOf = (code: string) => {
    const out = new Map<string, Set<string>>();
    for (const [, def, named, from] of code.matchAll(IMPORT)) {
      const module = (from as string)
        .replace(/^ratekeeper\/(express|koa)$/, '../adapters/$1.js')
        .replace(/^ratekeeper$/, '../src/index.js');
      const names = out.get(module) ?? new Set<string>();
      if (def) names.add(`default:${def.replace(/[\s,]/g, '')}`);
      for (const name of (named ?? '').split(',')) {
        const bare = name.replace(/\btype\s+/, '').trim();
        if (bare !== '') names.add(bare);
      }
      out.set(module, names);
    }
    return out;
  };
  const trimmed = (code: string) =>
    code
      .replace(IMPORT, '')
      .split('\n')
      .map((l) => l.trim())
      .filter((l) => l !== '');

  it('quotes the example apps as they are', () => {
    expect(blocks.length, 'the docs quote the examples').to.be.greaterThan(0);
    for (const { file, code } of blocks) {
      const text = readFileSync(new URL(`../../${file}`, import.meta.url), 'utf8');
      const fileImports = importsOf(text);
      for (const [module, names] of importsOf(code)) {
        for (const name of names)
          expect([...(fileImports.get(module) ?? [])], `${file} imports ${name} from ${module}`).to.include(
            name,
          );
      }
      const source = trimmed(text).join('\n');
      const runs: string[][] = [[]];
      for (const line of trimmed(code)) {
        if (line === '// …') runs.push([]);
        else runs.at(-1)?.push(line);
      }
      for (const run of runs) expect(source, `${file}, as quoted in the docs`).to.include(run.join('\n'));
    }
  });
});
