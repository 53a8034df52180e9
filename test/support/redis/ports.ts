// Free loopback ports for spawned servers, and waiting until a port is closed again.
import { connect, createServer } from 'node:net';
import { sleep } from './probe.js';

/** Every server of the harness listens on loopback only. */
export const HOST = '127.0.0.1';

/** A Cluster node's bus listens on its port + 10000. */
export const CLUSTER_BUS_OFFSET = 10_000;

// Ports handed out in this process, so two nodes never get the same one between release and bind.
const handedOut = new Set<number>();

function bindPort(port: number): Promise<number | undefined> {
  return new Promise((resolve) => {
    const server = createServer();
    server.unref();
    server.once('error', () => resolve(undefined));
    server.listen(port, HOST, () => {
      const address = server.address();
      server.close(() => resolve(typeof address === 'object' && address ? address.port : undefined));
    });
  });
}

/**
 * A port free right now and not handed out before by this process; with `busPort`, port + 10000 (the
 * Cluster bus) is free as well. Another process may still take it before the server binds it, so
 * launching retries on "Address already in use".
 */
export async function freePort(busPort = false): Promise<number> {
  for (let attempt = 0; attempt < 50; attempt++) {
    const port = await bindPort(0);
    if (port === undefined || handedOut.has(port)) continue;
    if (busPort) {
      const bus = port + CLUSTER_BUS_OFFSET;
      if (bus > 65535 || (await bindPort(bus)) === undefined) continue;
    }
    handedOut.add(port);
    return port;
  }
  throw new Error(`could not find a free TCP port on ${HOST}`);
}

/** Whether something accepts TCP connections on the port now. */
export function accepting(port: number, host = HOST): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = connect(port, host);
    socket.once('connect', () => {
      socket.destroy();
      resolve(true);
    });
    socket.once('error', () => resolve(false));
  });
}

/** Resolves once nothing accepts connections on `port` (the process there is gone). */
export async function refused(port: number, maxMs = 10_000, host = HOST): Promise<void> {
  const deadline = performance.now() + maxMs;
  while (performance.now() < deadline) {
    if (!(await accepting(port, host))) return;
    await sleep(20);
  }
  throw new Error(`port ${port} still accepts connections after ${maxMs} ms`);
}
