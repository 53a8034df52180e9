// Express: a concurrency rule's slot freed when the app has ended the response (adapters/response-ends.ts),
// on keep-alive and pipelined connections, a client gone before its handler ended, two limiters, a response
// ended before the limiter ran, no header set, a Unix socket and a mock socket. Every case ends with the
// slots freed, read from the limiter.
import { once } from 'node:events';
import { mkdtempSync, rmSync } from 'node:fs';
import { Agent, createServer, IncomingMessage, request, type Server, ServerResponse } from 'node:http';
import { type AddressInfo, connect } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import { expect } from 'chai';
import express, { type Express } from 'express';
import { rateLimit } from '../../adapters/express.js';
import { createLimiter, type Limiter, type Rule } from '../../src/index.js';
import { until } from '../support/settle.js';

const perIp = (name: string, limit: number): Rule =>
  ({ name, key: 'ip', limit, window: { type: 'concurrency' } }) as Rule;

async function listen(app: Express): Promise<Server> {
  const server = createServer(app);
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  return server;
}

function stop(server: Server): void {
  server.closeAllConnections();
  server.close();
}

/** A GET on `agent`'s connections: the status and body. */
function get(
  server: Server,
  path: string,
  agent: Agent | false = false,
): Promise<{ status: number; body: string }> {
  const { port } = server.address() as AddressInfo;
  return new Promise((resolve, reject) => {
    const req = request({ port, host: '127.0.0.1', path, agent }, (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (chunk: string) => {
        body += chunk;
      });
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
    });
    req.once('error', reject);
    req.end();
  });
}

/** A promise and what settles it: a handler tells the test it got somewhere, or waits for the test. */
function signal(): { done: Promise<void>; fire(): void } {
  let fire = () => {};
  const done = new Promise<void>((resolve) => {
    fire = resolve;
  });
  return { done, fire: () => fire() };
}

describe('Express: slots freed when the response ends', () => {
  let limiter: Limiter;
  let server: Server | undefined;
  const held = async (rule = 'one') => (await limiter.status(rule, '127.0.0.1')).count;

  /**
   * `times` requests one after another on one keep-alive connection: each answered `expected`, and its
   * slots freed (`freed`) before the next is sent.
   */
  async function inTurn(
    times: number,
    expected: { status: number; body?: string },
    freed: () => Promise<boolean> = async () => (await held()) === 0,
  ): Promise<void> {
    const agent = new Agent({ keepAlive: true, maxSockets: 1 });
    try {
      for (let i = 0; i < times; i++) {
        const answer = await get(server as Server, '/', agent);
        expect(answer.status).to.equal(expected.status);
        if (expected.body !== undefined) expect(answer.body).to.equal(expected.body);
        await until('the slots are freed', freed);
      }
    } finally {
      agent.destroy();
    }
  }

  afterEach(async () => {
    if (server !== undefined) stop(server);
    server = undefined;
    await limiter.close();
  });

  it('frees each slot of a keep-alive connection as its response ends', async () => {
    limiter = createLimiter({ rules: [perIp('one', 1)] });
    const app = express();
    app.use(rateLimit(limiter));
    app.get('/', (_req, res) => void res.send('done'));
    server = await listen(app);
    // Limit 1 on one connection: each request is admitted only once the one before freed its slot.
    await inTurn(5, { status: 200, body: 'done' });
  });

  it('frees the slots of pipelined requests, the second answered while the first still works', async () => {
    limiter = createLimiter({ rules: [perIp('one', 2)] });
    const app = express();
    app.use(rateLimit(limiter));
    const firstMayEnd = signal();
    const secondAnswered = signal();
    app.get('/first', async (_req, res) => {
      await firstMayEnd.done;
      res.send('first');
    });
    app.get('/second', (_req, res) => {
      res.send('second');
      secondAnswered.fire();
    });
    server = await listen(app);
    const socket = connect((server.address() as AddressInfo).port, '127.0.0.1');
    let received = '';
    socket.setEncoding('utf8');
    socket.on('data', (chunk: string) => {
      received += chunk;
    });
    socket.write('GET /first HTTP/1.1\r\nHost: x\r\n\r\nGET /second HTTP/1.1\r\nHost: x\r\n\r\n');
    try {
      await secondAnswered.done;
      // The second's response waits behind the first's on the connection: both slots are held.
      expect(await held()).to.equal(2);
      firstMayEnd.fire();
      await until('both responses arrived', () => received.includes('second'));
      await until('both slots are freed', async () => (await held()) === 0);
    } finally {
      socket.destroy();
    }
  });

  it('a client that goes frees nothing while its handler works; the handler ending frees it', async () => {
    limiter = createLimiter({ rules: [perIp('one', 1)] });
    const app = express();
    app.use(rateLimit(limiter));
    const started = signal();
    const mayEnd = signal();
    const ended = signal();
    let closedBeforeEnd = false;
    app.get('/', async (req, res) => {
      started.fire();
      await mayEnd.done;
      closedBeforeEnd = req.socket.destroyed;
      res.send('late');
      ended.fire();
    });
    server = await listen(app);
    const socket = connect((server.address() as AddressInfo).port, '127.0.0.1');
    socket.write('GET / HTTP/1.1\r\nHost: x\r\n\r\n');
    await started.done;
    socket.destroy();
    await until(
      'the server saw the connection close',
      () => new Promise<boolean>((resolve) => server?.getConnections((_e, n) => resolve(n === 0))),
    );
    expect((await get(server, '/')).status).to.equal(429);
    expect(await held()).to.equal(1);
    mayEnd.fire();
    await ended.done;
    expect(closedBeforeEnd).to.equal(true);
    await until('the slot is freed', async () => (await held()) === 0);
  });

  it('frees the slots of two limiters on one response', async () => {
    limiter = createLimiter({ rules: [perIp('one', 1)] });
    const other = createLimiter({ rules: [perIp('two', 1)] });
    try {
      const app = express();
      app.use(rateLimit(limiter), rateLimit(other));
      app.get('/', (_req, res) => void res.send('done'));
      server = await listen(app);
      await inTurn(3, { status: 200 }, async () => {
        const [one, two] = await Promise.all([held('one'), other.status('two', '127.0.0.1')]);
        return one === 0 && two.count === 0;
      });
    } finally {
      await other.close();
    }
  });

  it('frees the slot of a response an earlier middleware ended, the connection kept open', async () => {
    limiter = createLimiter({ rules: [perIp('one', 1)] });
    const app = express();
    app.use((_req, res, next) => {
      res.end('early');
      next();
    });
    app.use(rateLimit(limiter));
    app.use((_req, _res, next) => next());
    server = await listen(app);
    await inTurn(3, { status: 200, body: 'early' });
  });

  it('frees the slot of a response that sets no rate-limit header (headers: false)', async () => {
    limiter = createLimiter({ rules: [perIp('one', 1)] });
    const app = express();
    app.use(rateLimit(limiter, { headers: false }));
    app.get('/', (_req, res) => void res.send('done'));
    server = await listen(app);
    await inTurn(3, { status: 200 });
  });

  it('frees each slot of a keep-alive connection on a Unix domain socket', async () => {
    limiter = createLimiter({
      rules: [{ name: 'one', key: () => 'unix', limit: 1, window: { type: 'concurrency' } } as Rule],
    });
    const app = express();
    app.use(rateLimit(limiter));
    app.get('/', (_req, res) => void res.send('done'));
    const dir = mkdtempSync(join(tmpdir(), 'rk-unix-'));
    const path = join(dir, 'app.sock');
    const unix = createServer(app);
    unix.listen(path);
    await once(unix, 'listening');
    const agent = new Agent({ keepAlive: true, maxSockets: 1 });
    const ask = () =>
      new Promise<number>((resolve, reject) => {
        const req = request({ socketPath: path, path: '/', agent }, (res) => {
          res.resume();
          res.on('end', () => resolve(res.statusCode ?? 0));
        });
        req.once('error', reject);
        req.end();
      });
    try {
      for (let i = 0; i < 3; i++) {
        expect(await ask()).to.equal(200);
        await until('the slot is freed', async () => (await limiter.status('one', 'unix')).count === 0);
      }
    } finally {
      agent.destroy();
      stop(unix);
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('frees the slot of a request handed to the app on a socket of its own (a serverless bridge)', async () => {
    limiter = createLimiter({ rules: [perIp('one', 1)] });
    const app = express();
    app.set('trust proxy', false);
    app.use(rateLimit(limiter));
    app.get('/', (_req, res) => void res.send('done'));
    for (let i = 0; i < 3; i++) {
      // As serverless-http builds them: no net.Socket, no server to announce the response's end.
      const socket = Object.assign(new Writable({ write: (_chunk, _encoding, next) => next() }), {
        remoteAddress: '127.0.0.1',
        encrypted: false,
      });
      const req = new IncomingMessage(socket as never);
      req.method = 'GET';
      req.url = '/';
      req.headers = { host: 'localhost' };
      req.push(null);
      const res = new ServerResponse(req);
      res.assignSocket(socket as never);
      const finished = once(res, 'finish');
      app(req as never, res as never);
      await finished;
      expect(res.statusCode).to.equal(200);
      await until('the slot is freed', async () => (await held()) === 0);
    }
  });
});
