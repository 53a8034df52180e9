// The one server shared by suites that never kill it: REDIS_URL, else a container, else a spawned one.
import { dockerAnswers, startContainer } from './containers.js';
import { infoField } from './probe.js';
import { type RedisServer, Server, startRedis } from './server.js';

async function connectUrl(url: string): Promise<RedisServer> {
  const parsed = new URL(url);
  const address = new Server(parsed.hostname, Number(parsed.port || 6379), 'unknown', undefined, [], url);
  // Through the URL's own client settings (password, TLS, database), which a bare probe would lack.
  const probe = address.client({ lazyConnect: true, maxRetriesPerRequest: 0, retryStrategy: () => null });
  try {
    await probe.connect();
    const version = infoField(await probe.info('server'), 'redis_version') ?? 'unknown';
    return new Server(address.host, address.port, version, undefined, [], url);
  } catch (error) {
    throw new Error(`REDIS_URL=${url} does not answer: ${(error as Error).message}`);
  } finally {
    probe.disconnect();
  }
}

async function findSharedRedis(): Promise<RedisServer> {
  const url = process.env.REDIS_URL;
  if (url) return connectUrl(url);
  let containerError = '; no Docker engine answered for testcontainers';
  if (await dockerAnswers()) {
    try {
      return await startContainer();
    } catch (error) {
      containerError = `; testcontainers failed too: ${(error as Error).message}`;
    }
  }
  try {
    // Spawned, but handed out without its fleet, so that no suite can stop it for the others.
    const own = await startRedis();
    return new Server(own.host, own.port, own.version);
  } catch (error) {
    throw new Error(
      `no Redis for the tests (REDIS_URL is unset${containerError}): ${(error as Error).message}`,
    );
  }
}

let shared: Promise<RedisServer> | undefined;

/**
 * The server shared by suites that never kill it: REDIS_URL if set, else a testcontainers Redis
 * when a Docker engine answers, else a spawned redis-server. Its stop/restart/pause throw.
 */
export function getRedis(): Promise<RedisServer> {
  shared ??= findSharedRedis().catch((error: unknown) => {
    shared = undefined;
    throw error;
  });
  return shared;
}
