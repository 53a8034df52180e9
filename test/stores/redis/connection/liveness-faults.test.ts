// Store faults name their cause with every client (ioredis 6 and 5, iovalkey, node-redis 6 and 5): Redis down,
// an unknown host, a wrong or missing password and a malformed URL, on real spawned servers.
import { once } from 'node:events';
import { expect } from 'chai';
import { createLimiter, type Limiter, RedisStore, type StoreErrorEvent } from '../../../../src/index.js';
import {
  type AnyClient,
  type ClientKind,
  IOREDIS_5,
  IOREDIS_6,
  IOVALKEY,
  NODE_REDIS_5,
  NODE_REDIS_6,
} from '../../../support/clients.js';
import {
  freePort,
  HOST,
  type RedisServer,
  refused,
  startRedis,
  withConnection,
} from '../../../support/redis.js';

const RULE = { name: 'api', key: 'ip', limit: 5, window: { type: 'fixed', size: '1m' } } as const;
const KINDS: ClientKind[] = [IOREDIS_6, IOREDIS_5, IOVALKEY, NODE_REDIS_6, NODE_REDIS_5];

/**
 * What a limiter on `client` shows of a fault once the client has told its connection error (the store
 * hears of it from then on) or is ready: the event, a thrown operator call, the debug log, health().
 */
async function faultSeen(client: AnyClient) {
  const lines: string[] = [];
  const events: StoreErrorEvent[] = [];
  const limiter: Limiter = createLimiter({
    store: new RedisStore({ client, prefix: 'faults' }),
    rules: [RULE],
    storeTimeout: 2000,
    debug: (line) => lines.push(line),
  });
  limiter.on('storeError', (event) => events.push(event));
  try {
    // Or ready: a RESP2 client without a password connects, and Redis answers each command NOAUTH.
    const emitter = client as unknown as NodeJS.EventEmitter;
    await Promise.race([once(emitter, 'error'), once(emitter, 'ready')]);
    const decision = await limiter.consume('api', 'k');
    const thrown = await limiter.status('api', 'k').then(
      () => undefined,
      (error: unknown) => error as Error & { code?: string },
    );
    const health = await limiter.health();
    return { decision, events, thrown, lines, health };
  } finally {
    await limiter.close();
  }
}

function expectNamed(seen: Awaited<ReturnType<typeof faultSeen>>, code: string, text: string): void {
  expect(seen.decision.allowed, 'the insurance store answered').to.equal(true);
  expect(
    seen.events.map((e) => (e.error as { code?: string }).code),
    seen.events[0]?.error.message,
  ).to.deep.equal([code]);
  expect(seen.events[0]?.error.message).to.include(text);
  expect(seen.thrown?.code, 'status() throws the cause').to.equal(code);
  expect(seen.thrown?.message).to.include(text);
  expect(seen.lines.find((line) => line.startsWith('store error during check'))).to.include(text);
  expect(seen.health.state).to.equal('down');
  expect(seen.health.sinceMs).to.be.a('number');
  expect(seen.health.lastError?.code).to.equal(code);
  expect(seen.health.lastError?.message).to.include(text);
}

describe('store faults name their cause, with every client', function () {
  this.timeout(30_000);
  let secured: RedisServer;
  let downPort: number;
  const clients: Array<[ClientKind, AnyClient]> = [];
  before(async () => {
    secured = await startRedis();
    // Set once it answers: the harness's start-up PING goes without a password.
    await withConnection(secured, (conn) => conn.config('SET', 'requirepass', 'right-password'));
    downPort = await freePort();
    await refused(downPort);
  });
  afterEach(async () => {
    for (const [kind, client] of clients.splice(0)) await kind.close(client).catch(() => {});
  });
  after(() => secured?.stop());

  const make = (kind: ClientKind, url: string) => {
    const client = kind.unready(url);
    clients.push([kind, client]);
    return client;
  };

  for (const kind of KINDS) {
    describe(kind.name, () => {
      it('Redis down: ECONNREFUSED', async () => {
        const seen = await faultSeen(make(kind, `redis://${HOST}:${downPort}`));
        expectNamed(seen, 'ECONNREFUSED', `ECONNREFUSED ${HOST}:${downPort}`);
      });

      it('an unknown host: ENOTFOUND', async () => {
        const seen = await faultSeen(make(kind, 'redis://no-such-host.invalid:6390'));
        expectNamed(seen, 'ENOTFOUND', 'no-such-host.invalid');
      });

      it('a wrong password: WRONGPASS; none at all: NOAUTH', async () => {
        const wrong = await faultSeen(make(kind, `redis://:wrong-password@${secured.host}:${secured.port}`));
        expectNamed(wrong, 'WRONGPASS', 'WRONGPASS');
        const none = await faultSeen(make(kind, `redis://${secured.host}:${secured.port}`));
        const code = (none.events[0]?.error as { code?: string } | undefined)?.code;
        if (code === 'NOAUTH') {
          expectNamed(none, 'NOAUTH', 'NOAUTH');
        } else {
          // node-redis 5 (RESP2, no handshake) sends its first call unauthenticated: FUNCTION LOAD, whose
          // argument is the whole library. Redis refuses that bulk's length before it can say NOAUTH, and
          // closes the connection (the next call meets it closed).
          expect(kind.name).to.equal('node-redis 5');
          expect(none.events.map((e) => e.error.message)).to.deep.equal([
            'ERR Protocol error: unauthenticated bulk length',
          ]);
          expect(none.thrown).to.be.an.instanceOf(Error);
          expect(none.health.state).to.equal('down');
        }
      });

      it('the right password decides on Redis', async () => {
        const client = await kind.standalone({
          host: secured.host,
          port: secured.port,
          password: 'right-password',
        });
        clients.push([kind, client]);
        const limiter = createLimiter({
          store: new RedisStore({ client, prefix: `auth:${kind.name}` }),
          rules: [RULE],
        });
        try {
          expect((await limiter.consume('api', 'k')).remaining).to.equal(4);
          expect((await limiter.health()).state).to.equal('ok');
        } finally {
          await limiter.close();
        }
      });

      it('a malformed URL: refused when the client is made, or a connection fault naming it', async () => {
        const url = `redis//${HOST}:${downPort}`; // no colon after the scheme
        let client: AnyClient;
        try {
          client = make(kind, url);
        } catch (error) {
          // ioredis 6 and node-redis parse the URL with WHATWG URL: a TypeError at construction.
          expect((error as Error & { code?: string }).code).to.equal('ERR_INVALID_URL');
          return;
        }
        // ioredis 5 reads it as a Unix socket path, iovalkey as a host name: neither exists.
        const seen = await faultSeen(client);
        const code = (seen.events[0]?.error as { code?: string } | undefined)?.code;
        expect(code).to.be.oneOf(['ENOENT', 'ENOTFOUND']);
        expectNamed(seen, code as string, code as string);
      });
    });
  }
});
