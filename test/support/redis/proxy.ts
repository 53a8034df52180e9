// A TCP proxy in front of a Redis node that can lose one reply on purpose: Redis runs the request, the
// client never hears back, and its connection drops. Deterministic, unlike racing CLIENT KILL on a paused server.
import { createServer, type Socket, connect as tcpConnect } from 'node:net';
import { HOST } from './ports.js';
import type { NodeAddress } from './probe.js';

export interface RedisProxy extends NodeAddress {
  /** Client connections open through the proxy now. */
  readonly connections: number;
  /**
   * Arms the proxy: the next request a client sends with `command` in it (e.g. 'evalsha'; any request
   * when omitted) goes on to Redis, which runs it; what Redis sends back for it is dropped, and that
   * client's connection is closed (a connection lost after Redis ran a command and before its reply
   * arrived). Resolves once the reply was dropped. Naming the command keeps other connections of the
   * same client (a subscriber, a ready check) out of it. Use it while no other command of that
   * connection is in flight: the proxy drops whatever Redis sends next on that connection.
   */
  loseNextReply(command?: string): Promise<void>;
  /** Closes the proxy and every connection through it. */
  stop(): Promise<void>;
}

/** One client connection and the proxy's own connection to Redis for it. */
interface Link {
  readonly client: Socket;
  readonly redis: Socket;
  /** Set while this link's next reply is to be dropped. */
  lose: (() => void) | undefined;
}

/** A proxy on a free loopback port passing every connection on to `target`. */
export async function startProxy(target: NodeAddress): Promise<RedisProxy> {
  const links = new Set<Link>();
  let armed: { resolve: () => void; request: (chunk: Buffer) => boolean } | undefined;

  const close = (link: Link) => {
    links.delete(link);
    link.client.destroy();
    link.redis.destroy();
  };

  const server = createServer((client) => {
    const link: Link = { client, redis: tcpConnect(target.port, target.host), lose: undefined };
    links.add(link);
    client.on('data', (chunk) => {
      if (armed?.request(chunk) === true && link.lose === undefined) {
        link.lose = armed.resolve;
        armed = undefined;
      }
      link.redis.write(chunk);
    });
    link.redis.on('data', (chunk) => {
      const dropped = link.lose;
      if (dropped === undefined) {
        client.write(chunk);
        return;
      }
      // Redis answered, so it ran the request: the reply goes nowhere and the client's connection ends.
      close(link);
      dropped();
    });
    for (const socket of [client, link.redis]) {
      socket.on('error', () => close(link));
      socket.on('close', () => close(link));
    }
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, HOST, () => resolve());
  });
  const address = server.address();
  if (typeof address !== 'object' || address === null) throw new Error('the proxy has no port');

  return {
    host: HOST,
    port: address.port,
    get connections() {
      return links.size;
    },
    loseNextReply(command?: string) {
      if (armed !== undefined) return Promise.reject(new Error('loseNextReply(): already armed'));
      // A command name travels as a bulk string of its own: "$7\r\nEVALSHA\r\n" (any letter case).
      const name = command === undefined ? undefined : `$${command.length}\r\n${command.toLowerCase()}\r\n`;
      return new Promise<void>((resolve) => {
        armed = {
          resolve,
          request: (chunk) => name === undefined || chunk.toString('latin1').toLowerCase().includes(name),
        };
      });
    },
    async stop() {
      for (const link of links) close(link);
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
