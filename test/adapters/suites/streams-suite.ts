// Streamed responses under a concurrency rule, on real sockets: each stream holds its slot while it is
// written, and a client that leaves mid-stream frees it once nothing more can be written (the response torn
// down by the stream machinery, no `end()` ever called). Run by test/concurrency/streamed-responses.test.ts
// for Express, Fastify, Koa and Hono, and by nest-streams.ts for Nest's `StreamableFile` on both platforms.
import { once } from 'node:events';
import { createServer, type Server } from 'node:http';
import { type AddressInfo, connect, type Socket } from 'node:net';
import { Readable } from 'node:stream';
import { expect } from 'chai';
import { createLimiter, type Limiter } from '../../../src/index.js';
import { PATIENT, until } from '../../support/settle.js';
import type { StoreFactory } from '../../support/stores.js';
import type { Listener } from './concurrency-suite.js';

/** Two streams at once per client address; a lease shorter than the test, so a leak cannot hide behind it. */
export const TWO_STREAMS = {
  name: 'streams',
  key: 'ip',
  limit: 2,
  window: { type: 'concurrency', lease: '2s' },
} as const;

/** 64 KiB a chunk, without end: a stream that only its consumer going away can stop. */
export function endless(): Readable {
  const chunk = Buffer.alloc(64 * 1024, 97);
  return new Readable({
    read() {
      this.push(chunk);
    },
  });
}

/**
 * Builds an app whose `GET /stream` answers with the shape under test (a body that never ends on its own,
 * or one far larger than the socket's buffers) and whose `GET /ok` answers 200 "ok", both behind the limiter.
 */
export type StreamApp = (limiter: Limiter) => Promise<Listener>;

/** A client of `GET path` that has read the first bytes of the body and may leave. */
interface Reader {
  readonly socket: Socket;
  leave(): void;
}

/** Connects, sends `GET path`, and resolves once the status line and the first body bytes arrived. */
export async function startReading(server: Server, path: string): Promise<Reader> {
  const socket = connect((server.address() as AddressInfo).port, '127.0.0.1');
  socket.write(`GET ${path} HTTP/1.1\r\nHost: x\r\n\r\n`);
  let seen = '';
  await new Promise<void>((resolve, reject) => {
    const onData = (chunk: Buffer) => {
      seen += chunk.toString('latin1');
      const head = seen.indexOf('\r\n\r\n');
      if (head >= 0 && seen.length > head + 4) {
        socket.off('data', onData);
        socket.pause();
        resolve();
      }
    };
    socket.on('data', onData);
    socket.once('error', reject);
    socket.once('close', () =>
      reject(new Error(`the connection closed before a body: ${seen.slice(0, 200)}`)),
    );
  });
  expect(seen.slice(0, 12)).to.equal('HTTP/1.1 200');
  socket.removeAllListeners('close');
  socket.removeAllListeners('error');
  socket.on('error', () => {});
  return { socket, leave: () => socket.destroy() };
}

/** One plain GET on a connection of its own: its status. */
export async function statusOf(server: Server, path: string): Promise<number> {
  const { port } = server.address() as AddressInfo;
  const response = await fetch(`http://127.0.0.1:${port}${path}`);
  await response.arrayBuffer();
  return response.status;
}

export async function listen(listener: Listener): Promise<Server> {
  const server = createServer(listener);
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  return server;
}

export function stop(server: Server | undefined): void {
  server?.closeAllConnections();
  server?.close();
}

/**
 * For each shape: two clients stream at once (both slots held, a third request refused), both leave
 * mid-stream, and both slots are freed; then a plain request is admitted.
 */
export function streamsSuite(
  framework: string,
  shapes: Record<string, StreamApp>,
  stores: StoreFactory,
): void {
  describe(`${framework}: a stream abandoned mid-way frees its slot (${stores.name} store)`, function () {
    this.timeout(60_000);
    let limiter: Limiter | undefined;
    let server: Server | undefined;
    afterEach(async () => {
      stop(server);
      server = undefined;
      await limiter?.close();
    });

    for (const [shape, app] of Object.entries(shapes)) {
      it(`${shape}: two streams hold both slots; both clients leaving mid-stream frees them`, async () => {
        const current = createLimiter({
          store: await stores.makeStore(Date.now),
          rules: [TWO_STREAMS],
          ...PATIENT,
        });
        limiter = current;
        server = await listen(await app(current));
        const held = async () => (await current.status('streams', '127.0.0.1')).count;
        const readers = [await startReading(server, '/stream'), await startReading(server, '/stream')];
        expect(await held()).to.equal(2);
        expect(await statusOf(server, '/ok')).to.equal(429);
        for (const reader of readers) reader.leave();
        await until('both slots are freed', async () => (await held()) === 0);
        expect(await statusOf(server, '/ok')).to.equal(200);
        await until('the plain request frees its slot', async () => (await held()) === 0);
      });
    }
  });
}
