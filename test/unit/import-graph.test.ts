// The parts of src/ as ARCHITECTURE.md draws them: no import loop through the limiter's parts (type-only
// imports included), and the window algorithms import nothing of the limiter.
import { readdirSync, readFileSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { expect } from 'chai';

const ROOT = resolve(import.meta.dirname, '../..');
const SRC = join(ROOT, 'src');

/** Every .ts file of src/ and the src/ files it imports (relative imports, `import type` and re-exports too). */
function importGraph(): Map<string, string[]> {
  const files = readdirSync(SRC, { recursive: true, encoding: 'utf8' })
    .filter((f) => f.endsWith('.ts'))
    .map((f) => join(SRC, f));
  const graph = new Map<string, string[]>();
  for (const file of files) {
    const source = readFileSync(file, 'utf8');
    const targets = [...source.matchAll(/^(?:import|export)\b[^;]*?\bfrom\s+'(\.{1,2}\/[^']+)'/gms)].map(
      (m) => resolve(dirname(file), (m[1] as string).replace(/\.js$/, '.ts')),
    );
    graph.set(file, targets);
  }
  return graph;
}

/** Each loop once, as the files it runs through. */
function loops(graph: Map<string, string[]>): string[][] {
  const found: string[][] = [];
  const state = new Map<string, 'open' | 'done'>();
  const path: string[] = [];
  const visit = (file: string) => {
    state.set(file, 'open');
    path.push(file);
    for (const target of graph.get(file) ?? []) {
      if (state.get(target) === 'open') found.push(path.slice(path.indexOf(target)));
      else if (!state.has(target)) visit(target);
    }
    path.pop();
    state.set(file, 'done');
  };
  for (const file of graph.keys()) if (!state.has(file)) visit(file);
  return found;
}

const named = (file: string) => relative(ROOT, file);

describe('the import graph of src/', () => {
  const graph = importGraph();

  it('reads every file and its imports', () => {
    expect(graph.size).to.be.greaterThan(50);
    const limiter = graph.get(join(SRC, 'limiter', 'limiter.ts'));
    expect(limiter?.map(named)).to.include('src/calls/paced-calls.ts');
  });

  it('has no import loop through the limiter, its calls, rules, keys, configuration or algorithms', () => {
    const parts = ['limiter', 'calls', 'rules', 'keys', 'config', 'algorithms'].map((part) =>
      join(SRC, part),
    );
    const through = loops(graph).filter((loop) =>
      loop.some((file) => parts.some((part) => file.startsWith(part))),
    );
    expect(through.map((loop) => loop.map(named).join(' -> '))).to.deep.equal([]);
  });

  it('keeps the window algorithms free of the limiter: src/algorithms imports only src/algorithms', () => {
    const algorithms = join(SRC, 'algorithms');
    const outside = [...graph]
      .filter(([file]) => file.startsWith(algorithms))
      .flatMap(([file, targets]) =>
        targets.filter((t) => !t.startsWith(algorithms)).map((t) => `${named(file)} -> ${named(t)}`),
      );
    expect(outside).to.deep.equal([]);
  });
});
