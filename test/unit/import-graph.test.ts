// The parts of src/ as ARCHITECTURE.md draws them: each part imports only the parts below it (type-only
// imports included), no import loop anywhere, and the window algorithms see nothing of the stores but the
// types of the store contract.
import { readdirSync, readFileSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { expect } from 'chai';

const ROOT = resolve(import.meta.dirname, '../..');
const SRC = join(ROOT, 'src');

/**
 * The parts each part may import, besides itself, the shared base (src/*.ts but index.ts) and the store
 * contract's types: from the top down. `index` is src/index.ts, the public API over all of them.
 */
const MAY_IMPORT: Readonly<Record<string, readonly string[]>> = {
  index: ['operators', 'recipes', 'limiter', 'calls', 'rules', 'keys', 'stores', 'algorithms', 'config'],
  operators: ['limiter', 'calls', 'rules', 'keys', 'stores', 'algorithms', 'config'],
  recipes: ['rules', 'keys', 'config'],
  limiter: ['calls', 'rules', 'keys', 'stores', 'algorithms', 'config'],
  calls: ['rules', 'keys', 'config'],
  rules: ['keys', 'algorithms', 'config'],
  stores: ['algorithms', 'config'],
  keys: ['config'],
  algorithms: [],
  config: [],
  shared: [],
};

/** The store contract's data (a rule, an op, a result): every part may import its types, and it imports nothing. */
const CONTRACT = join(SRC, 'stores', 'store-ops.ts');

interface Import {
  readonly from: string;
  readonly to: string;
  readonly typeOnly: boolean;
}

/** Every relative import of every .ts file of src/ (`import type` and re-exports too). */
function imports(): Import[] {
  const found: Import[] = [];
  for (const name of readdirSync(SRC, { recursive: true, encoding: 'utf8' })) {
    if (!name.endsWith('.ts')) continue;
    const from = join(SRC, name);
    const source = readFileSync(from, 'utf8');
    for (const m of source.matchAll(/^(?:import|export)\b([^;]*?)\bfrom\s+'(\.{1,2}\/[^']+)'/gms)) {
      const to = resolve(dirname(from), (m[2] as string).replace(/\.js$/, '.ts'));
      found.push({ from, to, typeOnly: /^\s*type\b/.test(m[1] as string) });
    }
  }
  return found;
}

/** Each import loop once, as the files it runs through. */
function loops(graph: readonly Import[]): string[][] {
  const targets = new Map<string, string[]>();
  for (const i of graph) targets.set(i.from, [...(targets.get(i.from) ?? []), i.to]);
  const found: string[][] = [];
  const state = new Map<string, 'open' | 'done'>();
  const path: string[] = [];
  const visit = (file: string) => {
    state.set(file, 'open');
    path.push(file);
    for (const target of targets.get(file) ?? []) {
      if (state.get(target) === 'open') found.push(path.slice(path.indexOf(target)));
      else if (!state.has(target)) visit(target);
    }
    path.pop();
    state.set(file, 'done');
  };
  for (const file of targets.keys()) if (!state.has(file)) visit(file);
  return found;
}

/** The part a file of src/ belongs to: its folder, `index` for src/index.ts, `shared` for src/'s other files. */
function partOf(file: string): string {
  const [first, ...rest] = relative(SRC, file).split('/');
  if (rest.length > 0) return first as string;
  return first === 'index.ts' ? 'index' : 'shared';
}

const named = (file: string) => relative(ROOT, file);

describe('the import graph of src/', () => {
  const graph = imports();

  it('reads every file and its imports', () => {
    expect(new Set(graph.map((i) => i.from)).size).to.be.greaterThan(50);
    expect(graph.map((i) => `${named(i.from)} -> ${named(i.to)}`)).to.include(
      'src/limiter/limiter.ts -> src/calls/paced-calls.ts',
    );
  });

  it('names every folder of src/ as a part', () => {
    const folders = readdirSync(SRC, { withFileTypes: true })
      .filter((entry) => entry.isDirectory())
      .map((entry) => entry.name);
    expect(folders.filter((folder) => !(folder in MAY_IMPORT))).to.deep.equal([]);
  });

  it('has each part import only the parts below it', () => {
    const upward = graph
      .filter((i) => {
        if (i.to === CONTRACT) return false;
        const from = partOf(i.from);
        const to = partOf(i.to);
        return from !== to && to !== 'shared' && !(MAY_IMPORT[from] ?? []).includes(to);
      })
      .map((i) => `${named(i.from)} -> ${named(i.to)}`);
    expect(upward).to.deep.equal([]);
  });

  it('has no import loop, within a part or across parts', () => {
    expect(loops(graph).map((loop) => loop.map(named).join(' -> '))).to.deep.equal([]);
  });

  it('keeps the store contract a leaf its importers see as types only', () => {
    expect(graph.filter((i) => i.from === CONTRACT).map((i) => named(i.to))).to.deep.equal([]);
    const valued = graph.filter((i) => i.to === CONTRACT && !i.typeOnly).map((i) => named(i.from));
    expect(valued).to.deep.equal([]);
  });

  it('keeps the shared base below every part: src/*.ts imports no part but the contract', () => {
    const up = graph
      .filter((i) => partOf(i.from) === 'shared' && partOf(i.to) !== 'shared' && i.to !== CONTRACT)
      .map((i) => `${named(i.from)} -> ${named(i.to)}`);
    expect(up).to.deep.equal([]);
  });

  it('keeps the window algorithms pure: src/algorithms imports only itself and the contract', () => {
    const outside = graph
      .filter((i) => partOf(i.from) === 'algorithms' && partOf(i.to) !== 'algorithms' && i.to !== CONTRACT)
      .map((i) => `${named(i.from)} -> ${named(i.to)}`);
    expect(outside).to.deep.equal([]);
  });
});
