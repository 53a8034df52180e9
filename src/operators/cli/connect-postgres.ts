// Connecting the command line to PostgreSQL: the URL checked first, the app's tables found, a failure explained by its cause.
import type { PostgresPool } from '../../stores/postgres/pool.js';
import type { PostgresNames } from '../../stores/postgres/sql.js';
import { OperatorError, redactUrl } from './connect.js';

/** How long the command line waits for PostgreSQL to accept the connection, and for any one answer. */
const CONNECT_TIMEOUT_MS = 5000;

/** What the command line uses of a pg Pool beyond what the store uses. */
interface CliPool extends PostgresPool {
  query(text: string): Promise<{ rows: Array<Record<string, unknown>> }>;
  end(): Promise<void>;
  on(event: 'error', listener: (error: Error) => void): unknown;
}

/** The URL checked for what pg reads: postgres:// or postgresql://, with a host. */
export function checkPostgresUrl(url: string): URL {
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    throw new OperatorError(
      `--postgres '${redactUrl(url)}' is not a URL; expected postgres://[user[:password]@]host[:port]/database`,
    );
  }
  if (parsed.protocol !== 'postgres:' && parsed.protocol !== 'postgresql:') {
    throw new OperatorError(
      `--postgres '${redactUrl(url)}' is not a PostgreSQL URL: it must start with postgres:// (or postgresql://)`,
    );
  }
  if (parsed.hostname === '') throw new OperatorError(`--postgres '${redactUrl(url)}' names no host`);
  return parsed;
}

/**
 * A pg Pool (two connections) on which the app's PostgresStore tables were found at this release's
 * version, or an `OperatorError` naming the cause: refused, unknown host, no answer, a password needed
 * or refused, no such role or database, no such tables (a wrong --schema or --table-prefix). The command
 * line never creates or upgrades the tables: that is the app's store's (or its migrations') to do.
 * Every wait is bounded (connect and each query: 5 s); the caller ends the pool.
 */
export async function connectPostgres(url: string, names: PostgresNames): Promise<CliPool> {
  const parsed = checkPostgresUrl(url);
  const where = `${parsed.hostname}:${parsed.port || '5432'}${parsed.pathname.length > 1 ? parsed.pathname : ''}`;
  let Pool: new (config: Record<string, unknown>) => CliPool;
  try {
    ({ Pool } = (await import('pg')).default as unknown as { Pool: typeof Pool });
  } catch {
    throw new OperatorError('the ratekeeper command needs the pg package for --postgres: npm install pg');
  }
  const pool = new Pool({
    connectionString: url,
    max: 2,
    connectionTimeoutMillis: CONNECT_TIMEOUT_MS,
    query_timeout: CONNECT_TIMEOUT_MS,
    application_name: parsed.searchParams.get('application_name') ?? 'ratekeeper-cli',
  });
  // A connection lost while idle is reported on the pool; the next query says so.
  pool.on('error', () => {});
  try {
    await checkTables(pool, names, where);
    return pool;
  } catch (error) {
    await pool.end().catch(() => {});
    if (error instanceof OperatorError) throw error;
    throw new OperatorError(explain(error as Error & { code?: string }, where));
  }
}

/** The store's version table read: present and at this release's version, or an `OperatorError`. */
async function checkTables(pool: CliPool, names: PostgresNames, where: string): Promise<void> {
  const { SCHEMA_VERSION } = await import('../../stores/postgres/sql.js');
  let found: unknown;
  try {
    found = (await pool.query(`SELECT version FROM ${names.qualified('schema_version')}`)).rows[0]?.version;
  } catch (error) {
    const code = (error as { code?: unknown }).code;
    if (code !== '3F000' && code !== '42P01') throw error;
  }
  const options = `--schema ${JSON.stringify(names.schema)} --table-prefix ${JSON.stringify(names.prefix)}`;
  if (found === undefined) {
    throw new OperatorError(
      `no ratekeeper tables at ${where} in schema ${JSON.stringify(names.schema)} with table prefix ${JSON.stringify(names.prefix)}: ` +
        "give the app's PostgresStore options as --schema and --table-prefix (defaults ratekeeper, rk_), " +
        'or let the app decide once (it creates them), or apply `npx ratekeeper sql` with those options',
    );
  }
  if (found !== SCHEMA_VERSION) {
    throw new OperatorError(
      `the ratekeeper tables at ${where} (${options}) are at version ${String(found)}, this command's are at ${SCHEMA_VERSION}: ` +
        'run the command of the ratekeeper release the app runs',
    );
  }
}

function explain(error: Error & { code?: string }, where: string): string {
  const code = error.code ?? '';
  const text = `${code} ${error.message}`;
  if (code === '28P01') return `PostgreSQL at ${where} refused the user name or password in the URL (28P01)`;
  if (
    /client password must be a string|SASL: SCRAM-SERVER-FIRST-MESSAGE|password authentication/.test(text)
  ) {
    return `PostgreSQL at ${where} requires a password: put it in the URL (postgres://user:PASSWORD@${where}) or set PGPASSWORD`;
  }
  if (code === '28000' || code === '3D000') return `PostgreSQL at ${where}: ${error.message} (${code})`;
  if (/ECONNREFUSED/.test(text)) {
    return `cannot connect to PostgreSQL at ${where}: connection refused (ECONNREFUSED); is PostgreSQL running there?`;
  }
  if (/ENOTFOUND|EAI_AGAIN/.test(text)) {
    return `cannot connect to PostgreSQL at ${where}: unknown host (${code || 'ENOTFOUND'})`;
  }
  if (/timeout|ETIMEDOUT/i.test(text)) {
    return `cannot connect to PostgreSQL at ${where}: no answer within ${CONNECT_TIMEOUT_MS / 1000} s (ETIMEDOUT); is it PostgreSQL, and running?`;
  }
  if (/Connection terminated unexpectedly|ECONNRESET|EPIPE/.test(text)) {
    return `cannot use PostgreSQL at ${where}: the server closed the connection (${code || error.message}); is it PostgreSQL?`;
  }
  return `cannot use PostgreSQL at ${where}: ${error.message}${code === '' ? '' : ` (${code})`}`;
}
