// Redis in a container through testcontainers, used when a Docker engine answers.

import { serverVersion, withTimeout } from './probe.js';
import { Server } from './server.js';

const CONTAINER_IMAGE = 'redis:7.2-alpine';

/** Whether testcontainers finds a container engine within 5 s (none is a normal answer, not an error). */
export async function dockerAnswers(): Promise<boolean> {
  try {
    const { getContainerRuntimeClient } = await import('testcontainers');
    await withTimeout(getContainerRuntimeClient(), 5000, 'finding a Docker engine');
    return true;
  } catch {
    return false;
  }
}

/**
 * A Redis container with the spawned servers' settings; it is not ours to stop, pause or restart.
 * Ryuk, testcontainers' reaper, removes it when this process ends.
 */
export async function startContainer(): Promise<Server> {
  // Loaded only here: without Docker, the tests never pay for importing testcontainers.
  const { RedisContainer } = await import('@testcontainers/redis');
  const container = await new RedisContainer(CONTAINER_IMAGE)
    .withCommand([
      'redis-server',
      ...['--protected-mode', 'no', '--save', '', '--appendonly', 'no'],
      ...['--enable-debug-command', 'yes'],
    ])
    .start();
  const address = { host: container.getHost(), port: container.getPort() };
  const version = await serverVersion(address);
  return new Server(address.host, address.port, version, undefined, [], container.getConnectionUrl());
}
