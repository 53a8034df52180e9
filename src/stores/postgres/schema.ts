// The PostgreSQL store's schema on first use: read its version, install or upgrade it when the role may.
import type { PoolCalls } from './pool.js';
import { type PostgresNames, SCHEMA_VERSION, schemaSql } from './sql.js';

/** SQLSTATEs of a missing schema or table: the schema was never installed. */
const MISSING = new Set(['3F000', '42P01']);
/** SQLSTATE of a role that may not create or change what the installation makes. */
const NOT_ALLOWED = '42501';

/**
 * Resolves once the schema of `names` is at this release's version: read from its version table, and
 * installed (or upgraded) in one transaction when missing or older, under an advisory lock so that
 * processes starting together install it once. Rejects when the database holds a newer version (an
 * older release must not run on it), or when the role may not install it: the error says to apply
 * `npx ratekeeper sql` as a role that may.
 */
export async function ensureSchema(calls: PoolCalls, names: PostgresNames): Promise<void> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await installOnce(calls, names);
    } catch (error) {
      // Another process's installation committed while this one waited for the advisory lock: this
      // transaction's catalog view can predate it (an advisory lock does not refresh it), so its CREATE
      // ... IF NOT EXISTS can collide. Read the version again, in a new transaction.
      if (attempt >= MAX_INSTALL_ATTEMPTS || !COLLIDED.has((error as { code?: unknown }).code as string)) {
        throw error;
      }
    }
  }
}

/** SQLSTATEs of an installation that collided with a concurrent one (unique_violation, duplicate_*). */
const COLLIDED = new Set(['23505', '42P06', '42P07', '42710', '42723']);
const MAX_INSTALL_ATTEMPTS = 3;

async function installOnce(calls: PoolCalls, names: PostgresNames): Promise<void> {
  const found = await installedVersion(calls, names);
  if (found === SCHEMA_VERSION) return;
  if (found !== undefined && found > SCHEMA_VERSION) {
    throw new Error(
      `ratekeeper: the PostgreSQL schema ${names.schema} (table prefix '${names.prefix}') is at version ${found}, newer than this release's ${SCHEMA_VERSION}: upgrade ratekeeper`,
    );
  }
  // One simple query: its statements run as one transaction, which the advisory lock serializes.
  const script = `SELECT pg_advisory_xact_lock(${names.installLock});\n${schemaSql(names)}`;
  try {
    await calls.query({ text: script });
  } catch (error) {
    if ((error as { code?: unknown }).code === NOT_ALLOWED) {
      throw new Error(
        `ratekeeper: this database role may not create the rate limit tables in schema ${names.schema} (${(error as Error).message}); ` +
          `apply the SQL of \`npx ratekeeper sql --schema ${JSON.stringify(names.schema)} --table-prefix ${JSON.stringify(names.prefix)}\` as a role that may, and grant this one USAGE on the schema, SELECT, INSERT, UPDATE, DELETE on its tables and EXECUTE on its functions`,
        { cause: error },
      );
    }
    throw error;
  }
}

/** The version the schema's version table holds, or undefined when there is none yet. */
async function installedVersion(calls: PoolCalls, names: PostgresNames): Promise<number | undefined> {
  try {
    const rows = await calls.query({ text: `SELECT version FROM ${names.qualified('schema_version')}` });
    const row = rows[0] as { version?: unknown } | undefined;
    return typeof row?.version === 'number' ? row.version : undefined;
  } catch (error) {
    if (MISSING.has((error as { code?: unknown }).code as string)) return undefined;
    throw error;
  }
}
