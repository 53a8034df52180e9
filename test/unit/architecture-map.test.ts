// ARCHITECTURE.md's table of parts names every file of src/ and adapters/: a file in no part fails here.
// test/ mirrors the parts: a folder of test/unit/ that is no part fails, and so does a test path the map names
// that is gone.
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { join, relative, resolve } from 'node:path';
import { expect } from 'chai';
import { algorithms } from '../../src/algorithms/index.js';

const ROOT = resolve(import.meta.dirname, '../..');

/** What the table's placeholders stand for. */
const PLACEHOLDERS: Readonly<Record<string, readonly string[]>> = {
  type: Object.keys(algorithms),
  framework: ['express', 'koa', 'fastify', 'hono', 'nest'],
};

/** Every `.ts` file of src/ and adapters/, as a path from the repository root. */
function sourceFiles(): string[] {
  return ['src', 'adapters'].flatMap((top) =>
    readdirSync(join(ROOT, top), { recursive: true, encoding: 'utf8' })
      .filter((name) => name.endsWith('.ts'))
      .map((name) => `${top}/${name}`),
  );
}

/**
 * The paths the table names, as patterns from the repository root: in each row's folder cell, a code span
 * ending in `/` under src/ or adapters/ is the folder the names after it are in; one holding a `/` is a
 * path of its own; a name ending in `/` stands for its folder's files; `*` and `<type>`, `<framework>`
 * stand for what they say.
 */
function namedPatterns(map: string): RegExp[] {
  const table = map.slice(map.indexOf('## The parts'), map.indexOf('## The path of one request'));
  const patterns: RegExp[] = [];
  for (const row of table.split('\n').filter((line) => line.startsWith('| ') && !line.startsWith('| part'))) {
    const cell = row.split(' | ')[1] ?? '';
    let folder = '';
    for (const [, span] of cell.matchAll(/`([^`]+)`/g)) {
      const name = span as string;
      if (/^(src|adapters)(\/|$)/.test(name) && name.endsWith('/')) folder = name;
      else if (/^(src|adapters)\//.test(name)) patterns.push(pattern(name));
      else if (folder !== '' && /\.ts$|\/$/.test(name)) patterns.push(pattern(folder + name));
    }
  }
  return patterns;
}

function pattern(path: string): RegExp {
  const escaped = path.replace(/[.+?^${}()|[\]\\]/g, '\\$&');
  const filled = escaped
    .replace(/\*/g, '[^/]+')
    .replace(/<(\w+)>/g, (_, name: string) => `(${(PLACEHOLDERS[name] ?? ['<unknown>']).join('|')})`);
  return new RegExp(`^${filled}${path.endsWith('/') ? '.+' : ''}$`);
}

describe("ARCHITECTURE.md's map", () => {
  const map = readFileSync(join(ROOT, 'ARCHITECTURE.md'), 'utf8');
  const patterns = namedPatterns(map);

  it('reads the table of parts', () => {
    expect(patterns.length).to.be.greaterThan(40);
  });

  it('names every file of src/ and adapters/ in a part', () => {
    const unnamed = sourceFiles().filter((file) => !patterns.some((p) => p.test(file)));
    expect(unnamed, 'files in no part of ARCHITECTURE.md').to.deep.equal([]);
  });

  it('names no file that is gone', () => {
    const files = sourceFiles();
    const gone = patterns.filter((p) => !files.some((file) => p.test(file))).map(String);
    expect(gone, 'names in ARCHITECTURE.md that match no file').to.deep.equal([]);
  });

  it('has no file path in its prose that is gone', () => {
    const paths = [...map.matchAll(/`((?:src|adapters)\/[\w./-]+\.ts)`/g)].map((m) => m[1] as string);
    const files = new Set(sourceFiles());
    expect(paths.filter((path) => !files.has(path))).to.deep.equal([]);
  });

  it('names no test path that is gone', () => {
    const paths = [...map.matchAll(/`(test\/[\w./-]+)`/g)].map((m) => m[1] as string);
    expect(paths.length).to.be.greaterThan(5);
    expect(paths.filter((path) => !existsSync(join(ROOT, path)))).to.deep.equal([]);
  });

  it("keeps test/unit/ in the parts' folders: each of its folders is a folder of src/ or adapters/", () => {
    const folders = readdirSync(join(ROOT, 'test', 'unit'), { recursive: true, withFileTypes: true })
      .filter((entry) => entry.isDirectory())
      .map((entry) => relative(join(ROOT, 'test', 'unit'), join(entry.parentPath, entry.name)));
    expect(folders.length).to.be.greaterThan(5);
    const isPart = (folder: string) =>
      folder === 'adapters' ||
      (existsSync(join(ROOT, 'src', folder)) && statSync(join(ROOT, 'src', folder)).isDirectory());
    expect(folders.filter((folder) => !isPart(folder))).to.deep.equal([]);
  });
});
