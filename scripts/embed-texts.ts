// Writes the Lua and SQL sources (lua/, sql/) into TypeScript modules, so the build carries them and nothing reads them from disk at run time.
import { readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..');

/** The command that writes the generated files: the header names it, and the freshness test quotes it. */
export const EMBED_COMMAND = 'npm run embed';

/** A generated module: the folder it is made from, the file it is written to, and its exported constant. */
export interface EmbeddedTexts {
  readonly from: string;
  readonly extension: string;
  readonly to: string;
  readonly constant: string;
  readonly what: string;
}

export const EMBEDDED: readonly EmbeddedTexts[] = [
  {
    from: 'lua',
    extension: '.lua',
    to: 'src/stores/redis/lua-texts.ts',
    constant: 'LUA_TEXTS',
    what: 'The Lua modules of the Redis store, by module name (the file name without .lua)',
  },
  {
    from: 'sql',
    extension: '.sql',
    to: 'src/stores/postgres/sql-texts.ts',
    constant: 'SQL_TEXTS',
    what: 'The SQL files of the PostgreSQL store, by name (the file name without .sql)',
  },
];

/** The module `texts` makes from the folder as it is now: every file of its extension, in name order. */
export function renderTexts(texts: EmbeddedTexts, root: string = ROOT): string {
  const names = readdirSync(join(root, texts.from))
    .filter((file) => file.endsWith(texts.extension))
    .sort();
  const entries = names.map((file) => {
    const text = readFileSync(join(root, texts.from, file), 'utf8');
    return `  ${JSON.stringify(file.slice(0, -texts.extension.length))}: ${JSON.stringify(text)},`;
  });
  return [
    `// Generated from ${texts.from}/ by \`${EMBED_COMMAND}\` (scripts/embed-texts.ts): edit ${texts.from}/, never this file.`,
    '',
    `/** ${texts.what}. */`,
    '// biome-ignore format: generated, one entry a line',
    `export const ${texts.constant}: Readonly<Record<string, string>> = {`,
    ...entries,
    '};',
    '',
  ].join('\n');
}

/** Writes every generated module; returns the files written. */
export function writeTexts(root: string = ROOT): string[] {
  return EMBEDDED.map((texts) => {
    writeFileSync(join(root, texts.to), renderTexts(texts, root));
    return texts.to;
  });
}

if (process.argv[1] !== undefined && fileURLToPath(import.meta.url) === process.argv[1]) {
  for (const file of writeTexts()) console.log(`wrote ${file}`);
}
