// Streamed responses under a concurrency rule on Express, Fastify, Koa and Hono: a slot is held while the body
// is written and freed when the client leaves mid-stream (sendFile, pipe, pipeline, Fastify's send(stream)
// and hijack, Koa's stream body, Hono's stream helper); a client that leaves before the handler answered
// frees nothing until the handler answers; on Hono, the slot is held until the body is written, on Node and
// through `app.fetch` (Web streams, as on Bun, Deno and Workers).
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pipeline } from 'node:stream';
import { getRequestListener } from '@hono/node-server';
import { expect } from 'chai';
import express from 'express';
import Fastify from 'fastify';
import { Hono } from 'hono';
import { stream as honoStream } from 'hono/streaming';
import Koa from 'koa';
import { rateLimit as expressLimit } from '../../adapters/express.js';
import { rateLimit as fastifyLimit } from '../../adapters/fastify.js';
import { rateLimit as honoLimit } from '../../adapters/hono.js';
import { rateLimit as koaLimit } from '../../adapters/koa.js';
import { createLimiter, type Limiter } from '../../src/index.js';
import {
  endless,
  listen,
  type StreamApp,
  startReading,
  statusOf,
  stop,
  streamsSuite,
  TWO_STREAMS,
} from '../adapters/suites/streams-suite.js';
import { PATIENT, until } from '../support/settle.js';
import { memoryStores, postgresStores, redisStores } from '../support/stores.js';

/** A file far larger than a socket's buffers: 16 MiB. */
const folder = mkdtempSync(join(tmpdir(), 'ratekeeper-streams-'));
const bigFile = join(folder, 'export.bin');
writeFileSync(bigFile, Buffer.alloc(16 * 1024 * 1024, 98));
after(() => rmSync(folder, { recursive: true, force: true }));

/** An Express app: the limiter, `GET /ok`, and `GET /stream` answered by `stream`. */
function expressApp(stream: (res: express.Response) => void): StreamApp {
  return async (limiter) => {
    const app = express();
    app.use(expressLimit(limiter));
    app.get('/ok', (_req, res) => {
      res.send('ok');
    });
    app.get('/stream', (_req, res) => stream(res));
    return app;
  };
}

/** A Fastify app: the limiter, `GET /ok`, and `GET /stream` handled by `stream`. */
function fastifyApp(stream: (reply: import('fastify').FastifyReply) => unknown): StreamApp {
  return async (limiter) => {
    const app = Fastify();
    await app.register(fastifyLimit, { limiter });
    app.get('/ok', async () => 'ok');
    app.get('/stream', (_request, reply) => stream(reply));
    await app.ready();
    return (req, res) => app.routing(req, res);
  };
}

const koaApp: StreamApp = async (limiter) => {
  const app = new Koa();
  // Koa logs each client that left mid-stream (ECONNRESET); expected here.
  app.silent = true;
  app.use(koaLimit(limiter));
  app.use(async (ctx) => {
    if (ctx.path === '/stream') ctx.body = endless();
    else ctx.body = 'ok';
  });
  return app.callback();
};

/** A Hono app whose `/stream` writes 64 KiB chunks until the client is gone. */
function honoApp(limiter: Limiter): Hono {
  const app = new Hono();
  app.use(honoLimit(limiter));
  app.get('/ok', (c) => c.text('ok'));
  app.get('/stream', (c) =>
    honoStream(c, async (s) => {
      const chunk = new Uint8Array(64 * 1024).fill(97);
      while (!s.aborted && !s.closed) await s.write(chunk);
    }),
  );
  return app;
}

const shapes = {
  express: {
    'res.sendFile of a 16 MiB file': expressApp((res) => res.sendFile(bigFile)),
    'stream.pipeline(readable, res)': expressApp((res) => pipeline(endless(), res, () => {})),
    'readable.pipe(res)': expressApp((res) => endless().pipe(res)),
  },
  fastify: {
    'reply.send(stream)': fastifyApp((reply) => reply.send(endless())),
    'reply.hijack() and pipeline(readable, reply.raw)': fastifyApp((reply) => {
      reply.hijack();
      reply.raw.writeHead(200, { 'content-type': 'application/octet-stream' });
      pipeline(endless(), reply.raw, () => {});
    }),
  },
  koa: { 'ctx.body = readable': koaApp },
  hono: {
    "hono/streaming's stream()": async (limiter: Limiter) => getRequestListener(honoApp(limiter).fetch),
  },
};

for (const stores of [memoryStores, redisStores]) {
  for (const [framework, frameworkShapes] of Object.entries(shapes))
    streamsSuite(framework, frameworkShapes, stores);
}
// The release goes to the store like any other: one shape on PostgreSQL.
streamsSuite(
  'express',
  { 'res.sendFile of a 16 MiB file': shapes.express['res.sendFile of a 16 MiB file'] },
  postgresStores,
);

/** A promise and what settles it: a handler tells the test it got somewhere, or waits for the test. */
function signal(): { done: Promise<void>; fire(): void } {
  let fire = () => {};
  const done = new Promise<void>((resolve) => {
    fire = resolve;
  });
  return { done, fire: () => fire() };
}

describe('Express: a client that leaves while its handler works', function () {
  this.timeout(60_000);
  let limiter: Limiter | undefined;
  let server: import('node:http').Server | undefined;
  afterEach(async () => {
    stop(server);
    server = undefined;
    await limiter?.close();
  });

  /** One slot at a time; `GET /ok` and `GET /work`, whose handler is `work`. Resolves the server and `held`. */
  async function serve(work: express.RequestHandler) {
    const current = createLimiter({ rules: [{ ...TWO_STREAMS, limit: 1 }], ...PATIENT });
    limiter = current;
    const app = express();
    app.use(expressLimit(current));
    app.get('/ok', (_req, res) => {
      res.send('ok');
    });
    app.get('/work', work);
    const live = await listen(app);
    server = live;
    const held = async () => (await current.status('streams', '127.0.0.1')).count;
    const closed = () =>
      until(
        'the server saw the connection close',
        () => new Promise<boolean>((resolve) => live.getConnections((_e, n) => resolve(n === 0))),
      );
    /** The slot stays taken (the next request refused) until `letFinish` lets the handler answer; then freed. */
    const heldUntil = async (letFinish: () => void, finished: Promise<void>) => {
      expect(await held()).to.equal(1);
      expect(await statusOf(live, '/ok')).to.equal(429);
      letFinish();
      await finished;
      await until('the slot is freed', async () => (await held()) === 0);
      expect(await statusOf(live, '/ok')).to.equal(200);
    };
    return { live, held, closed, heldUntil };
  }

  for (const [name, answer] of Object.entries({
    'res.sendFile': (res: express.Response) => res.sendFile(bigFile, () => {}),
    'readable.pipe(res)': (res: express.Response) => endless().pipe(res),
    'res.send': (res: express.Response) => res.send('late'),
  })) {
    it(`before it answered: holds its slot while the handler works, freed when it answers by ${name}`, async () => {
      const [entered, mayAnswer, answered] = [signal(), signal(), signal()];
      const { live, closed, heldUntil } = await serve(async (req, res) => {
        entered.fire();
        await mayAnswer.done;
        expect(req.socket.destroyed).to.equal(true);
        answer(res);
        answered.fire();
      });
      const { connect } = await import('node:net');
      const socket = connect((live.address() as import('node:net').AddressInfo).port, '127.0.0.1');
      socket.on('error', () => {});
      socket.write('GET /work HTTP/1.1\r\nHost: x\r\n\r\n');
      await entered.done;
      socket.destroy();
      await closed();
      await heldUntil(mayAnswer.fire, answered.done);
    });
  }

  it('mid-stream, written by hand: keeps its slot until the handler ends the response', async () => {
    const [mayEnd, ended] = [signal(), signal()];
    const { live, closed, heldUntil } = await serve(async (_req, res) => {
      res.writeHead(200, { 'content-type': 'text/plain' });
      res.write('working\n');
      await mayEnd.done;
      res.write('more\n');
      res.end('done');
      ended.fire();
    });
    (await startReading(live, '/work')).leave();
    await closed();
    await heldUntil(mayEnd.fire, ended.done);
  });

  it('mid-stream, an SSE handler that never ends: the slot is no longer renewed and lapses a lease later', async () => {
    const clientGone = signal();
    const { live, held } = await serve((req, res) => {
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      res.write('data: 1\n\n');
      const timer = setInterval(() => res.write('data: tick\n\n'), 50);
      // The common SSE handler: it stops writing when its client goes, and never calls end().
      req.on('close', () => {
        clearInterval(timer);
        clientGone.fire();
      });
    });
    const reader = await startReading(live, '/work');
    expect(await held()).to.equal(1);
    reader.leave();
    await clientGone.done;
    // Held until its lease (2 s) runs out without renewals, then free for the next client.
    await until('the slot lapses', async () => (await held()) === 0);
    expect(await statusOf(live, '/ok')).to.equal(200);
  });
});

describe('Hono: the slot is held until the body is written', function () {
  this.timeout(60_000);
  let limiter: Limiter | undefined;
  let server: import('node:http').Server | undefined;
  afterEach(async () => {
    stop(server);
    server = undefined;
    await limiter?.close();
  });

  /** An app whose `/stream` writes "a" then waits for the test before writing "b" and ending. */
  function gatedApp(current: Limiter, key: 'ip' | (() => string)) {
    let release = () => {};
    const mayEnd = new Promise<void>((resolve) => {
      release = resolve;
    });
    const app = new Hono();
    app.use(honoLimit(current));
    app.get('/ok', (c) => c.text('ok'));
    app.get('/stream', (c) =>
      honoStream(c, async (s) => {
        await s.write('a');
        await mayEnd;
        await s.write('b');
      }),
    );
    return { app, release, rules: key };
  }

  it('on Node: a second request is refused while the first streams, admitted once it ended', async () => {
    const current = createLimiter({ rules: [{ ...TWO_STREAMS, limit: 1 }], ...PATIENT });
    limiter = current;
    const { app, release } = gatedApp(current, 'ip');
    server = await listen(getRequestListener(app.fetch));
    const live = server;
    const held = async () => (await current.status('streams', '127.0.0.1')).count;
    const { port } = live.address() as import('node:net').AddressInfo;
    const response = await fetch(`http://127.0.0.1:${port}/stream`);
    const reader = (response.body as ReadableStream<Uint8Array>).getReader();
    expect(new TextDecoder().decode((await reader.read()).value)).to.equal('a');
    expect(await held()).to.equal(1);
    expect(await statusOf(live, '/ok')).to.equal(429);
    release();
    let rest = '';
    for (let chunk = await reader.read(); !chunk.done; chunk = await reader.read())
      rest += new TextDecoder().decode(chunk.value);
    expect(rest).to.equal('b');
    await until('the slot is freed', async () => (await held()) === 0);
    expect(await statusOf(live, '/ok')).to.equal(200);
  });

  describe('through app.fetch (Web streams, no Node server)', () => {
    const everyone = { ...TWO_STREAMS, limit: 1, key: () => 'everyone' };
    const held = async (current: Limiter) => (await current.status('streams', 'everyone')).count;
    const get = (app: Hono, path: string) => app.fetch(new Request(`http://x${path}`));

    it('holds the slot while the body is unread and streaming, frees it when read to its end', async () => {
      const current = createLimiter({ rules: [everyone], ...PATIENT });
      limiter = current;
      const { app, release } = gatedApp(current, everyone.key);
      const response = await get(app, '/stream');
      expect(response.status).to.equal(200);
      expect(await held(current)).to.equal(1);
      expect((await get(app, '/ok')).status).to.equal(429);
      release();
      expect(await response.text()).to.equal('ab');
      expect(await held(current)).to.equal(0);
      expect((await get(app, '/ok')).status).to.equal(200);
    });

    it('frees the slot when the runtime cancels the body (its client went)', async () => {
      const current = createLimiter({ rules: [everyone], ...PATIENT });
      limiter = current;
      const { app } = gatedApp(current, everyone.key);
      const response = await get(app, '/stream');
      const reader = (response.body as ReadableStream<Uint8Array>).getReader();
      await reader.read();
      expect(await held(current)).to.equal(1);
      await reader.cancel();
      await until('the slot is freed', async () => (await held(current)) === 0);
    });

    it('frees the slot when the request is aborted before its body is read', async () => {
      const current = createLimiter({ rules: [everyone], ...PATIENT });
      limiter = current;
      const { app } = gatedApp(current, everyone.key);
      const abort = new AbortController();
      const response = await app.fetch(new Request('http://x/stream', { signal: abort.signal }));
      expect(response.status).to.equal(200);
      expect(await held(current)).to.equal(1);
      abort.abort();
      await until('the slot is freed', async () => (await held(current)) === 0);
    });

    it('a body-less response frees its slot when the handler returns', async () => {
      const current = createLimiter({ rules: [everyone], ...PATIENT });
      limiter = current;
      const app = new Hono();
      app.use(honoLimit(current));
      app.get('/empty', (c) => c.body(null, 204));
      expect((await get(app, '/empty')).status).to.equal(204);
      expect(await held(current)).to.equal(0);
    });
  });
});
