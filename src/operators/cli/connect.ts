// Connecting the command line to Redis: the URL checked first, and a failure explained by its cause.
import type { Redis } from 'ioredis';

/** A fault the operator can fix (a wrong URL, password, rule or module): printed as is, exit status 1. */
export class OperatorError extends Error {
  override readonly name = 'OperatorError';
}

/** How long the command line waits for Redis to accept the connection. */
const CONNECT_TIMEOUT_MS = 5000;

/** The URL with any password replaced, for messages. */
export function redactUrl(url: string): string {
  try {
    const parsed = new URL(url);
    if (parsed.password !== '') parsed.password = '***';
    return parsed.toString();
  } catch {
    return url;
  }
}

/** The URL checked for what ioredis needs; throws `OperatorError` saying what a Redis URL looks like. */
export function checkRedisUrl(url: string | undefined): URL {
  if (url === undefined) {
    throw new OperatorError(
      'no Redis URL: give --redis redis://host:6379 or set REDIS_URL (on PostgreSQL: --postgres postgres://host/db)',
    );
  }
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    throw new OperatorError(
      `--redis '${redactUrl(url)}' is not a URL; expected redis://[user:password@]host:port[/db]`,
    );
  }
  if (parsed.protocol !== 'redis:' && parsed.protocol !== 'rediss:') {
    throw new OperatorError(
      `--redis '${redactUrl(url)}' is not a Redis URL: it must start with redis:// (or rediss:// for TLS)`,
    );
  }
  if (parsed.hostname === '') throw new OperatorError(`--redis '${redactUrl(url)}' names no host`);
  return parsed;
}

/**
 * A connected ioredis client, or an `OperatorError` naming the cause: refused, unknown host, no
 * answer, a password needed or refused. The client does not reconnect: a command line fails fast.
 */
export async function connectRedis(url: string | undefined): Promise<Redis> {
  const parsed = checkRedisUrl(url);
  const where = `${parsed.hostname}:${parsed.port || '6379'}`;
  let Client: typeof Redis;
  try {
    ({ Redis: Client } = await import('ioredis'));
  } catch {
    throw new OperatorError('the ratekeeper command needs the ioredis package: npm install ioredis');
  }
  const client = new Client(parsed.toString(), {
    lazyConnect: true,
    connectTimeout: CONNECT_TIMEOUT_MS,
    maxRetriesPerRequest: 0,
    enableOfflineQueue: false,
    retryStrategy: () => null,
  });
  // ioredis rejects `connect()` with "Connection is closed"; the cause arrives as an 'error' event.
  let cause: (Error & { code?: string }) | undefined;
  client.on('error', (error: Error) => {
    cause = error;
  });
  try {
    await client.connect();
    await client.ping();
    return client;
  } catch (error) {
    client.disconnect();
    throw new OperatorError(explain(cause ?? (error as Error), where));
  }
}

function explain(error: Error & { code?: string }, where: string): string {
  const text = `${error.code ?? ''} ${error.message}`;
  if (/NOAUTH/.test(text)) {
    return `Redis at ${where} requires a password (NOAUTH): put it in the URL, redis://:PASSWORD@${where}`;
  }
  if (/WRONGPASS|invalid password|invalid username-password/.test(text)) {
    return `Redis at ${where} refused the user name or password in the URL (WRONGPASS)`;
  }
  if (/ECONNREFUSED/.test(text)) {
    return `cannot connect to Redis at ${where}: connection refused (ECONNREFUSED); is Redis running there?`;
  }
  if (/ENOTFOUND|EAI_AGAIN/.test(text)) {
    return `cannot connect to Redis at ${where}: unknown host (${error.code ?? 'ENOTFOUND'})`;
  }
  if (/ETIMEDOUT|timeout/i.test(text)) {
    return `cannot connect to Redis at ${where}: no answer within ${CONNECT_TIMEOUT_MS / 1000} s (ETIMEDOUT)`;
  }
  return `cannot use Redis at ${where}: ${error.message}`;
}
