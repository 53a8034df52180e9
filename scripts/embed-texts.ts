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
  /** What the build carries of a file, when not the file as written. */
  readonly compact?: (text: string) => string;
}

export const EMBEDDED: readonly EmbeddedTexts[] = [
  {
    from: 'lua',
    extension: '.lua',
    to: 'src/stores/redis/lua-texts.ts',
    constant: 'LUA_TEXTS',
    what: 'The Lua modules of the Redis store, by module name (the file name without .lua), without their comments',
    compact: stripLuaComments,
  },
  {
    from: 'sql',
    extension: '.sql',
    to: 'src/stores/postgres/sql-texts.ts',
    constant: 'SQL_TEXTS',
    what: 'The SQL files of the PostgreSQL store, by name (the file name without .sql)',
  },
];

/** The opening bracket of a Lua long string or comment at `at` ('[[', '[==['), or undefined. */
function longBracket(text: string, at: number): string | undefined {
  return /^\[=*\[/.exec(text.slice(at, at + 64))?.[0];
}

/**
 * A Lua text without its comments (`-- ...` to the end of the line, `--[[ ... ]]`) and the lines they leave
 * blank, strings (short and long) kept as they are: the files in lua/ explain themselves at length, and a
 * Worker bundle and every script sent to Redis would carry it all.
 */
export function stripLuaComments(text: string): string {
  // Newlines inside long strings are kept aside while blank lines are dropped.
  const KEPT_NEWLINE = '\u0000';
  let out = '';
  let at = 0;
  while (at < text.length) {
    const c = text[at] as string;
    if (c === '-' && text[at + 1] === '-') {
      const open = longBracket(text, at + 2);
      if (open !== undefined) {
        const close = text.indexOf(open.replace(/\[/g, ']'), at + 2 + open.length);
        if (close < 0) throw new Error('stripLuaComments: a block comment is not closed');
        // A block comment separates tokens, as a space does.
        out += ' ';
        at = close + open.length;
      } else {
        const end = text.indexOf('\n', at);
        at = end < 0 ? text.length : end;
      }
    } else if (c === "'" || c === '"') {
      let end = at + 1;
      while (end < text.length && text[end] !== c) end += text[end] === '\\' ? 2 : 1;
      out += text.slice(at, end + 1);
      at = end + 1;
    } else if (c === '[' && longBracket(text, at) !== undefined) {
      const open = longBracket(text, at) as string;
      const close = text.indexOf(open.replace(/\[/g, ']'), at + open.length);
      if (close < 0) throw new Error('stripLuaComments: a long string is not closed');
      out += text.slice(at, close + open.length).replace(/\n/g, KEPT_NEWLINE);
      at = close + open.length;
    } else {
      out += c;
      at += 1;
    }
  }
  const lines = out.split('\n').map((line) => line.trimEnd());
  return `${lines
    .filter((line) => line !== '')
    .join('\n')
    .replaceAll(KEPT_NEWLINE, '\n')}\n`;
}

/** The module `texts` makes from the folder as it is now: every file of its extension, in name order. */
export function renderTexts(texts: EmbeddedTexts, root: string = ROOT): string {
  const names = readdirSync(join(root, texts.from))
    .filter((file) => file.endsWith(texts.extension))
    .sort();
  const entries = names.map((file) => {
    const written = readFileSync(join(root, texts.from, file), 'utf8');
    const text = texts.compact === undefined ? written : texts.compact(written);
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
