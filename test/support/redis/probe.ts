// Short-lived admin connections to a Redis node (probes, INFO, CONFIG), apart from the clients under test.
import { Redis } from 'ioredis';

export const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

/** Polls `check` every 100 ms until it returns true; throws with the last error after `timeoutMs`. */
export async function waitFor(what: string, timeoutMs: number, check: () => Promise<boolean>): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  let lastError: unknown;
  while (Date.now() < deadline) {
    try {
      if (await check()) return;
    } catch (error) {
      lastError = error;
    }
    await sleep(100);
  }
  const why = lastError instanceof Error ? ` (last error: ${lastError.message})` : '';
  throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}${why}`);
}

export function withTimeout<T>(promise: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what} took over ${ms} ms`)), ms);
  });
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}

/** Where a node listens. */
export interface NodeAddress {
  readonly host: string;
  readonly port: number;
}

/**
 * One connection for `use`, closed afterwards. It never queues, retries or reconnects: a node that is
 * down or stopped fails the probe within 2 s instead of hanging it.
 */
export async function withConnection<T>(node: NodeAddress, use: (conn: Redis) => Promise<T>): Promise<T> {
  const conn = new Redis({
    host: node.host,
    port: node.port,
    lazyConnect: true,
    enableReadyCheck: false,
    enableOfflineQueue: false,
    maxRetriesPerRequest: 0,
    retryStrategy: () => null,
    connectTimeout: 2000,
    commandTimeout: 2000,
  });
  conn.on('error', () => {});
  try {
    await conn.connect();
    return await use(conn);
  } finally {
    conn.disconnect();
  }
}

/** One `field:value` line of an INFO reply. */
export function infoField(info: string, field: string): string | undefined {
  return new RegExp(`^${field}:(.*?)\\r?$`, 'm').exec(info)?.[1];
}

/** The node's redis_version (e.g. '7.0.15'). */
export async function serverVersion(node: NodeAddress): Promise<string> {
  const info = await withConnection(node, (conn) => conn.info('server'));
  return infoField(info, 'redis_version') ?? 'unknown';
}

/** Calls of `cmd` (e.g. 'evalsha', 'script|load') since start or CONFIG RESETSTAT, from INFO commandstats. */
export async function commandCalls(node: NodeAddress, cmd: string): Promise<number> {
  const info = await withConnection(node, (conn) => conn.info('commandstats'));
  const name = cmd.toLowerCase().replace(/[|.]/g, '\\$&');
  const calls = new RegExp(`^cmdstat_${name}:calls=(\\d+)`, 'm').exec(info)?.[1];
  return calls === undefined ? 0 : Number(calls);
}

export async function resetStats(node: NodeAddress): Promise<void> {
  await withConnection(node, (conn) => conn.config('RESETSTAT'));
}

/** 'master' or 'replica', from ROLE. */
export const roleOf = async (node: NodeAddress): Promise<'master' | 'replica'> =>
  withConnection(node, async (conn) => ((await conn.role())[0] === 'master' ? 'master' : 'replica'));
