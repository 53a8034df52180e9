// Every list of window types, in TypeScript, Lua and SQL, against the registry (src/algorithms/index.ts): a type
// added, renamed or removed there fails here until each list that must name it agrees.
import { readdirSync, readFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import { expect } from 'chai';
import { algorithms, WINDOW_NAMES, WINDOW_TYPES, windowKind } from '../../../src/algorithms/index.js';
import { TYPE_CODES } from '../../../src/stores/postgres/protocol.js';
import { MAX_PREFIX_BYTES } from '../../../src/stores/postgres/sql.js';
import type { WindowType } from '../../../src/stores/store-ops.js';
import type { WindowSpec } from '../../../src/types.js';

const ROOT = join(import.meta.dirname, '../../..');
const read = (path: string) => readFileSync(join(ROOT, path), 'utf8');

/** The files under `dir` (relative to the repository) whose name ends with `ext`, recursively. */
function filesUnder(dir: string, ext: string): string[] {
  return readdirSync(join(ROOT, dir), { recursive: true, encoding: 'utf8' })
    .filter((name) => name.endsWith(ext))
    .map((name) => relative(ROOT, join(ROOT, dir, name)));
}

/** A type's name as PostgreSQL function names spell it (`token_bucket`). */
const sqlName = (type: string) => type.replaceAll('-', '_');

// The public window shapes name exactly the registry's types and aliases (a compile-time check as well).
type SpecTypes = WindowSpec['type'];
type Aliases = Exclude<SpecTypes, WindowType>;
const specCovers: [WindowType] extends [SpecTypes] ? true : false = true;
const aliasesOnly: Aliases extends 'leaky-bucket' ? true : false = true;

describe('window types: every list agrees with the registry', () => {
  describe('TypeScript', () => {
    it('WindowType (src/stores/store-ops.ts) names exactly the registry types, in its order', () => {
      const union = /export type WindowType =([^;]*);/.exec(read('src/stores/store-ops.ts'))?.[1] ?? '';
      expect([...union.matchAll(/'([^']+)'/g)].map((m) => m[1])).to.deep.equal([...WINDOW_TYPES]);
    });

    it("WindowSpec (src/types.ts) names exactly the registry's types and aliases", () => {
      expect(specCovers && aliasesOnly).to.equal(true);
      const spec = /export type WindowSpec =([\s\S]*?)\n\n/.exec(read('src/types.ts'))?.[1] ?? '';
      const named = new Set(
        [...spec.matchAll(/type: ([^;]+);/g)].flatMap((m) =>
          [...(m[1] as string).matchAll(/'([^']+)'/g)].map((n) => n[1]),
        ),
      );
      expect([...named].sort()).to.deep.equal([...WINDOW_NAMES].sort());
    });

    it('no file outside src/algorithms lists or checks a type by name: only a rule written out names one', () => {
      const quoted = new RegExp(
        `(["'])(${WINDOW_NAMES.map((n) => n.replace('-', '\\-')).join('|')})\\1`,
        'g',
      );
      const found: string[] = [];
      const declarations = new Set(['src/stores/store-ops.ts', 'src/types.ts']);
      for (const file of [...filesUnder('src', '.ts'), ...filesUnder('adapters', '.ts')]) {
        // The registry itself, the unions checked above, and the generated texts of lua/ and sql/.
        if (file.startsWith('src/algorithms/') || declarations.has(file) || file.endsWith('-texts.ts'))
          continue;
        read(file)
          .split('\n')
          .forEach((line, i) => {
            const comment = /^\s*(\/\/|\*|\/\*)/.test(line);
            for (const m of line.matchAll(quoted)) {
              // A window written out (`window: { type: 'fixed', ... }`, in code, a message or an example).
              const written = /type:\s*$/.test(line.slice(0, m.index));
              if (!written && !comment) found.push(`${file}:${i + 1}: ${line.trim()}`);
            }
          });
      }
      expect(found, 'read the registry (windowKind(type), WINDOW_TYPES) or RuleFacts instead').to.deep.equal(
        [],
      );
    });

    it("each kind's traits are what its fields and state say", () => {
      for (const type of WINDOW_TYPES) {
        const kind = windowKind(type);
        expect(kind.holdsSlots, type).to.equal(kind.fields.includes('lease'));
        // A counter (count and end) is one small value: groupable too; a type holding slots is neither.
        if (kind.counter) expect(kind.groupable, type).to.equal(true);
        if (kind.holdsSlots) expect(kind.groupable || kind.counter, type).to.equal(false);
      }
    });
  });

  describe('Lua (lua/)', () => {
    const luaFiles = readdirSync(join(ROOT, 'lua')).filter((f) => f.endsWith('.lua'));

    it('every type has its twin lua/<type>.lua, dispatched by build in lua/algorithms.lua, and no other', () => {
      for (const type of WINDOW_TYPES) expect(luaFiles, type).to.include(`${type}.lua`);
      const build =
        /local function build\(windowType\)([\s\S]*?)\nend/.exec(read('lua/algorithms.lua'))?.[1] ?? '';
      const dispatched = [...build.matchAll(/windowType == '([^']+)' then return require\('([^']+)'\)/g)];
      for (const [, type, module] of dispatched)
        expect(module, `${type} is built from its own module`).to.equal(type);
      expect(dispatched.map((m) => m[1])).to.deep.equal([...WINDOW_TYPES]);
    });

    it('every algorithm module of lua/ is a registry type', () => {
      const modules = luaFiles.filter((f) =>
        /\bIts algorithm\b/.test(read(`lua/${f}`).split('\n-- State')[0] ?? ''),
      );
      expect(modules.map((f) => f.replace(/\.lua$/, '')).sort()).to.deep.equal([...WINDOW_TYPES].sort());
    });

    it('every type a Lua file compares an op to is a registry type', () => {
      for (const file of luaFiles) {
        for (const m of read(`lua/${file}`).matchAll(/[tT]ype\s*[~=]=\s*'([^']+)'/g)) {
          expect(WINDOW_TYPES as readonly string[], `lua/${file} names '${m[1]}'`).to.include(m[1]);
        }
      }
    });

    it('a twin can renew and release slots exactly when its kind holds slots, and encodes its state as one value exactly when groupable', () => {
      for (const type of WINDOW_TYPES) {
        const text = read(`lua/${type}.lua`);
        const exported = /\nreturn \{([^}]*)\}\s*$/.exec(text)?.[1] ?? '';
        expect(
          /\brenew\b/.test(exported) && /\brelease\b/.test(exported),
          `${type}: renew, release`,
        ).to.equal(windowKind(type).holdsSlots);
        expect(
          /\n\s*encode = /.test(text) && /\n\s*decode = /.test(text),
          `${type}: encode, decode`,
        ).to.equal(windowKind(type).groupable);
      }
    });
  });

  describe('PL/pgSQL (sql/)', () => {
    const sqlFiles = readdirSync(join(ROOT, 'sql')).filter((f) => f.endsWith('.sql'));
    const dispatch = read('sql/algorithms.sql');

    it('every type has its twin sql/<type>.sql with its _evaluate and _apply, and no other file is a twin', () => {
      for (const type of WINDOW_TYPES) {
        const text = read(`sql/${type}.sql`);
        for (const step of ['evaluate', 'apply'])
          expect(text, `${type}.sql`).to.include(`FUNCTION @schema@.@${sqlName(type)}_${step}@(`);
      }
      const twins = sqlFiles.filter((f) =>
        read(`sql/${f}`).includes(`@${sqlName(f.replace(/\.sql$/, ''))}_evaluate@(`),
      );
      expect(twins.map((f) => f.replace(/\.sql$/, '')).sort()).to.deep.equal([...WINDOW_TYPES].sort());
    });

    it("numbers the types as the store sends them (TYPE_CODES, the registry's order)", () => {
      expect(Object.values(TYPE_CODES)).to.deep.equal(WINDOW_TYPES.map((_, i) => i + 1));
      const header = /-- Types: ([^\n]*)\./.exec(dispatch)?.[1] ?? '';
      expect(header).to.equal(WINDOW_TYPES.map((type) => `${TYPE_CODES[type]} ${type}`).join(', '));
    });

    for (const [fn, step] of [
      ['evaluate', 'evaluate'],
      ['apply', 'apply'],
    ] as const) {
      it(`dispatches @${fn}@ of each type's number to its own ${step}, and no number the registry lacks`, () => {
        const body =
          new RegExp(`FUNCTION @schema@\\.@${fn}@\\(([\\s\\S]*?)END CASE;`).exec(dispatch)?.[1] ?? '';
        const arms = new Map<number | 'else', string>();
        for (const m of body.matchAll(/WHEN ([\d, ]+) THEN RETURN @schema@\.@(\w+)@/g))
          for (const code of (m[1] as string).split(',')) arms.set(Number(code), m[2] as string);
        const fallback = /ELSE RETURN @schema@\.@(\w+)@/.exec(body)?.[1];
        for (const code of arms.keys()) expect(Object.values(TYPE_CODES)).to.include(code);
        for (const type of WINDOW_TYPES)
          expect(arms.get(TYPE_CODES[type]) ?? fallback, type).to.equal(`${sqlName(type)}_${step}`);
      });
    }

    it('every number the other dispatchers and the callers compare a type to is a registry type', () => {
      for (const file of sqlFiles) {
        for (const m of read(`sql/${file}`).matchAll(/WHEN ([\d, ]+) THEN|\btype = (\d+)/g)) {
          for (const code of (m[1] ?? m[2] ?? '').split(','))
            expect(Object.values(TYPE_CODES), `sql/${file}: ${m[0]}`).to.include(Number(code));
        }
      }
    });

    it('a refund singles out by number exactly the types that hold slots', () => {
      const named = [...read('sql/refund.sql').matchAll(/\btype = (\d+)/g)].map((m) => Number(m[1]));
      const holding = WINDOW_TYPES.filter((type) => windowKind(type).holdsSlots).map(
        (type) => TYPE_CODES[type],
      );
      expect([...new Set(named)].sort()).to.deep.equal(holding.sort());
    });

    it('the table prefix leaves room for every name sql/ makes (MAX_PREFIX_BYTES)', () => {
      const names = sqlFiles.flatMap((f) =>
        [...read(`sql/${f}`).matchAll(/@(\w+)@/g)].map((m) => m[1] as string),
      );
      const longest = names
        .filter((name) => name !== 'schema')
        .reduce((a, b) => (b.length > a.length ? b : a));
      expect(MAX_PREFIX_BYTES + longest.length, longest).to.be.at.most(63);
    });
  });

  it('the registry holds an algorithm for every type it names', () => {
    for (const type of WINDOW_TYPES) expect(typeof algorithms[type].evaluate, type).to.equal('function');
  });
});
