// Operator calls (status with its holders, locked, reset, override) made while the Redis client's first connection is
// still being made wait for it, as decisions do, on fail-fast clients (ioredis enableOfflineQueue: false,
// node-redis disableOfflineQueue): made before the client is ready, and made before the Redis server is even started.
import { randomBytes } from 'node:crypto';
import { createServer, type Server, type Socket, connect as tcpConnect } from 'node:net';
import { expect } from 'chai';
import { Redis } from 'ioredis';
import { createClient } from 'redis';
import { createLimiter, type Limiter, RedisStore, type Rule } from '../../src/index.js';
import { RECOMMENDED_REDIS_OPTIONS } from '../fixtures/redis-options.js';
import { type AnyClient, NODE_REDIS_OPTIONS } from '../support/clients.js';
import { getRedis, HOST, type NodeAddress, type RedisServer, startRedis } from '../support/redis.js';
import { PATIENT } from '../support/settle.js';

const RULES: Rule[] = [
  { name: 'api', match: 'GET /api', key: 'ip', limit: 5, window: { type: 'fixed', size: '1m' } },
  {
    name: 'login',
    match: 'POST /login',
    key: 'body.email',
    limit: 3,
    window: { type: 'fixed', size: '15m' },
    lockout: { duration: '15m' },
  },
  { name: 'exports', match: 'POST /exports', key: 'user', limit: 2, window: { type: 'concurrency' } },
];

/** A fail-fast client of the recommended settings, connecting now; a command timeout no busy machine reaches. */
interface Kind {
  name: string;
  make(address: NodeAddress): AnyClient;
  ready(client: AnyClient): boolean;
  close(client: AnyClient): void;
}

const KINDS: Kind[] = [
  {
    name: 'ioredis',
    make: ({ host, port }) =>
      new Redis({ ...RECOMMENDED_REDIS_OPTIONS, commandTimeout: PATIENT.storeTimeout, host, port }).on(
        'error',
        () => {},
      ),
    ready: (client) => (client as Redis).status === 'ready',
    close: (client) => (client as Redis).disconnect(),
  },
  {
    name: 'node-redis',
    make({ host, port }) {
      const client = createClient({
        ...NODE_REDIS_OPTIONS,
        socket: { ...NODE_REDIS_OPTIONS.socket, host, port },
      });
      client.on('error', () => {});
      client.connect().catch(() => {});
      return client;
    },
    ready: (client) => (client as ReturnType<typeof createClient>).isReady,
    close: (client) => (client as ReturnType<typeof createClient>).destroy(),
  },
];

/**
 * A port that accepts connections at once and holds what clients send until `open(target)`: then each
 * connection is joined to the Redis at `target`, what it sent first included (a server that comes up late).
 */
async function startGate(): Promise<{ address: NodeAddress; open(target: NodeAddress): void; stop(): void }> {
  const held: Array<{ client: Socket; sent: Buffer[] }> = [];
  const sockets = new Set<Socket>();
  let target: NodeAddress | undefined;
  const join = (client: Socket, sent: Buffer[]) => {
    const redis = tcpConnect((target as NodeAddress).port, (target as NodeAddress).host);
    sockets.add(redis);
    for (const chunk of sent) redis.write(chunk);
    client.removeAllListeners('data');
    client.pipe(redis).pipe(client);
    for (const socket of [client, redis]) socket.on('error', () => socket.destroy());
  };
  const server: Server = createServer((client) => {
    sockets.add(client);
    const waiting = { client, sent: [] as Buffer[] };
    client.on('error', () => client.destroy());
    if (target !== undefined) return join(client, []);
    client.on('data', (chunk: Buffer) => waiting.sent.push(chunk));
    held.push(waiting);
  });
  await new Promise<void>((resolve) => server.listen(0, HOST, resolve));
  const { port } = server.address() as { port: number };
  return {
    address: { host: HOST, port },
    open(to) {
      target = to;
      for (const { client, sent } of held.splice(0)) join(client, sent);
    },
    stop() {
      server.close();
      for (const socket of sockets) socket.destroy();
    },
  };
}

/**
 * Seeds the store at `address` under `prefix` through a client that is ready: 2 requests of 10.0.0.1 and 1 of
 * 10.0.0.2 on 'api', 4 login attempts of a@example.com (the 4th locks), one export slot of u1 held.
 */
async function seed(address: NodeAddress, prefix: string): Promise<void> {
  const client = new Redis({
    ...RECOMMENDED_REDIS_OPTIONS,
    commandTimeout: PATIENT.storeTimeout,
    ...address,
  });
  const limiter = createLimiter({ store: new RedisStore({ client, prefix }), rules: RULES, ...PATIENT });
  try {
    const api = (ip: string) => ({ method: 'GET', path: '/api', headers: {}, ip });
    for (const ip of ['10.0.0.1', '10.0.0.1', '10.0.0.2']) await limiter.check(api(ip));
    const login = { method: 'POST', path: '/login', headers: {}, body: { email: 'a@example.com' } };
    for (let i = 0; i < 4; i++) await limiter.check(login);
    const slot = await limiter.check({ method: 'POST', path: '/exports', headers: {}, user: 'u1' });
    expect(slot.allowed).to.equal(true);
  } finally {
    // Closing stops renewing: the slot stays held for its lease.
    await limiter.close();
    client.disconnect();
  }
}

/** The operator calls, made at once on a limiter whose client is not ready; none depends on another. */
function operatorCalls(limiter: Limiter) {
  return Promise.all([
    limiter.status('api', '10.0.0.1'),
    limiter.locked('login'),
    limiter.status('exports', 'u1'),
    limiter.reset('api', '10.0.0.2'),
    limiter.override('api', '10.0.0.3', 7),
  ]);
}

/** The seeded store's answers, and what the reset and the override wrote. */
async function expectAnswers(limiter: Limiter, calls: ReturnType<typeof operatorCalls>) {
  const [status, locked, slots, reset, override] = await calls;
  expect(status).to.include({ rule: 'api', key: '10.0.0.1', count: 2, limit: 5, remaining: 3 });
  expect(locked.map((l) => [l.rule, l.key, l.level])).to.deep.equal([['login', 'a@example.com', 1]]);
  expect(slots).to.include({ rule: 'exports', key: 'u1', count: 1, remaining: 1 });
  expect(slots.holders).to.have.length(1);
  expect([reset, override]).to.deep.equal([undefined, undefined]);
  expect(await limiter.status('api', '10.0.0.2')).to.include({ count: 0 });
  expect(await limiter.status('api', '10.0.0.3')).to.include({ limit: 7, overridden: true });
}

describe('operator calls made while the Redis client makes its first connection', function () {
  this.timeout(60_000);
  for (const kind of KINDS) {
    it(`${kind.name}: made before the client is ready, they wait for it and answer`, async () => {
      const server = await getRedis();
      const prefix = `rko${randomBytes(4).toString('hex')}`;
      await seed(server, prefix);
      const client = kind.make(server);
      const limiter = createLimiter({ store: new RedisStore({ client, prefix }), rules: RULES, ...PATIENT });
      try {
        expect(kind.ready(client), 'not ready yet when the calls are made').to.equal(false);
        await expectAnswers(limiter, operatorCalls(limiter));
      } finally {
        await limiter.close();
        kind.close(client);
      }
    });

    it(`${kind.name}: made before the Redis server is started, they wait for it and answer`, async () => {
      const gate = await startGate();
      const client = kind.make(gate.address);
      const limiter = createLimiter({
        store: new RedisStore({ client, prefix: 'rko' }),
        rules: RULES,
        ...PATIENT,
      });
      let server: RedisServer | undefined;
      try {
        const calls = operatorCalls(limiter);
        server = await startRedis();
        await seed(server, 'rko');
        expect(kind.ready(client), 'not ready before the server is reached').to.equal(false);
        gate.open(server);
        await expectAnswers(limiter, calls);
      } finally {
        await limiter.close();
        kind.close(client);
        gate.stop();
        await server?.stop();
      }
    });
  }
});
