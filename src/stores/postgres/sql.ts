// The PostgreSQL store's SQL: the sql/ files (embedded in the build) rendered for one schema and table prefix, every name a quoted identifier.

import { bytesToHex } from '@noble/hashes/utils';
import { WINDOW_TYPES } from '../../algorithms/index.js';
import { refuse } from '../../config/refuse.js';
import { sha256Bytes } from '../../digest.js';
import { describe } from '../../errors.js';
import { SQL_TEXTS } from './sql-texts.js';

/**
 * The version of the tables and functions the sql/ files make; a later release migrates from it (a store
 * finding an older one runs the whole script again: it creates what is missing and replaces the functions).
 * 2: the concurrency window (sql/concurrency.sql, renew and holders in sql/holders.sql), reset keeping a
 * concurrency key's last slot id, GCRA's TAT ceiling. 3: refunds answer whether each released slot was
 * still held (give_back in sql/refund.sql; refund stays for processes of version 2). 4: rule-wide limits
 * (limiter.setLimit: a row of the overrides table with an empty key_hash, read by check, check-batch and
 * give_back; rule_limits in sql/keys.sql). 5: a key's override may set its window (limiter.override with a
 * window: a row of the overrides table whose key_hash is the key's and a 1 byte, read by check, check-batch and
 * give_back; override takes window_ms, its 6-argument form is dropped). No table changes.
 */
export const SCHEMA_VERSION = 5;

/** The sql/ files in the order they are run: tables and types, the algorithms, then what calls them. */
const FILES = ['schema', ...WINDOW_TYPES, 'algorithms', 'check', 'refund', 'keys', 'holders'];

/**
 * PostgreSQL cuts identifiers at 63 bytes: the prefix leaves room for the longest name it starts, a window
 * type's `<type>_expires_at` (registry-lists.test.ts checks that no name of sql/ is longer).
 */
const MAX_IDENTIFIER_BYTES = 63;
const LONGEST_NAME = WINDOW_TYPES.map((type) => `${type.replaceAll('-', '_')}_expires_at`).reduce((a, b) =>
  b.length > a.length ? b : a,
);
export const MAX_PREFIX_BYTES = MAX_IDENTIFIER_BYTES - LONGEST_NAME.length;

/** The schema and table prefix a store works in, and the names derived from them. */
export interface PostgresNames {
  readonly schema: string;
  readonly prefix: string;
  /** `"schema"."prefix<name>"`: a table or function, quoted. */
  qualified(name: string): string;
  /** The channel resets and overrides are announced on (a name of hex digits, safe to LISTEN to unquoted). */
  readonly channel: string;
  /** The channel releases of concurrency slots are announced on: listened to only while a call waits. */
  readonly freeChannel: string;
  /** The key of the advisory lock the installation takes, so that processes install one at a time. */
  readonly installLock: string;
}

/** A quoted identifier: any text but NUL is safe inside double quotes, its own quotes doubled. */
export function quoteIdent(name: string): string {
  return `"${name.replaceAll('"', '""')}"`;
}

/**
 * Checks the schema and prefix options (refusing what PostgreSQL would cut or reject) and derives the
 * names. Any other text is allowed: every name is quoted, so an option cannot be read as SQL.
 */
export function postgresNames(schema: unknown, prefix: unknown): PostgresNames {
  if (typeof schema !== 'string' || schema === '' || schema.includes('\0')) {
    refuse(
      'ERR_OPTION',
      'PostgresStore',
      `schema must be a non-empty string without NUL, got ${describe(schema)}`,
    );
  }
  if (Buffer.byteLength(schema) > MAX_IDENTIFIER_BYTES) {
    refuse('ERR_OPTION', 'PostgresStore', `schema must be at most 63 bytes long, got ${describe(schema)}`);
  }
  if (typeof prefix !== 'string' || prefix.includes('\0') || Buffer.byteLength(prefix) > MAX_PREFIX_BYTES) {
    refuse(
      'ERR_OPTION',
      'PostgresStore',
      `tablePrefix must be a string of at most ${MAX_PREFIX_BYTES} bytes without NUL, got ${describe(prefix)}`,
    );
  }
  const digest = sha256Bytes(`${schema}\0${prefix}`);
  return {
    schema,
    prefix,
    qualified: (name) => `${quoteIdent(schema)}.${quoteIdent(prefix + name)}`,
    channel: `ratekeeper_${bytesToHex(digest.subarray(0, 12))}`,
    freeChannel: `ratekeeper_${bytesToHex(digest.subarray(0, 12))}_free`,
    installLock: new DataView(digest.buffer, digest.byteOffset).getBigInt64(12).toString(),
  };
}

let sources: string[] | undefined;

/** The text of sql/<file>.sql (embedded at build time by `npm run embed`). */
function sqlFile(file: string): string {
  const text = SQL_TEXTS[file];
  if (text === undefined) throw new Error(`ratekeeper: no SQL file named '${file}' (sql/${file}.sql)`);
  return text;
}

/** SQL text with each name between at signs replaced for these names (schemaSql's rendering); `tag` for $$. */
function render(names: PostgresNames, text: string, tag = '$$'): string {
  return text.replaceAll('$$', tag).replace(/@([a-z_]+)@/g, (_, name: string) => {
    if (name === 'schema') return quoteIdent(names.schema);
    if (name === 'channel') return `'${names.channel}'`;
    if (name === 'free_channel') return `'${names.freeChannel}'`;
    return quoteIdent(names.prefix + name);
  });
}

/**
 * The whole schema for these names, as one script of statements: what a store runs on first use, and
 * what `npx ratekeeper sql` prints for teams that run their migrations themselves. Running it again is
 * harmless. Function bodies are dollar-quoted with a tag found in no name, so a name cannot end one.
 */
export function schemaSql(names: PostgresNames): string {
  sources ??= FILES.map(sqlFile);
  let tag = '$rk$';
  for (let i = 0; names.schema.includes(tag) || names.prefix.includes(tag); i++) tag = `$rk${i}$`;
  const body = sources.map((text) => render(names, text, tag)).join('\n');
  const version = render(
    names,
    `INSERT INTO @schema@.@schema_version@ (one, version) VALUES (true, ${SCHEMA_VERSION})\n` +
      `  ON CONFLICT (one) DO UPDATE SET version = EXCLUDED.version;\n`,
    tag,
  );
  return `${body}\n-- Written last: the version this schema is at.\n${version}`;
}

/**
 * A statement the store sends (not part of the schema): sql/<file>.sql rendered for these names, its
 * comment lines dropped. It holds no dollar quotes, so a name cannot end one.
 */
export function statementSql(names: PostgresNames, file: string): string {
  const text = sqlFile(file)
    .split('\n')
    .filter((line) => !line.startsWith('--'))
    .join('\n');
  return render(names, text);
}
