// RedisStore through every supported client on real servers: node-redis (standalone, Cluster, Sentinel) for what
// differs from ioredis (NOSCRIPT, pub/sub on a connection of its own, RESP3 replies, masters), and the
// compatibility run: the conformance suite and a Cluster through ioredis 5, node-redis 5 and iovalkey.
import { randomBytes } from 'node:crypto';
import { expect } from 'chai';
import { Redis } from 'ioredis';
import { Valkey } from 'iovalkey';
import { createClient } from 'redis';
import {
  createLimiter,
  type Limiter,
  RateLimitConfigError,
  RedisStore,
  type Rule,
} from '../../../src/index.js';
import { resetChannel } from '../../../src/stores/redis/keys.js';
import { RECOMMENDED_REDIS_OPTIONS } from '../../fixtures/redis-options.js';
import {
  type AnyClient,
  type ClientKind,
  IOREDIS_5,
  IOVALKEY,
  NODE_REDIS_5,
  NODE_REDIS_6,
  NODE_REDIS_OPTIONS,
  nodeRedisSentinel,
} from '../../support/clients.js';
import {
  getRedis,
  type RedisServer,
  startCluster,
  startProxy,
  startRedis,
  startSentinel,
  useCluster,
  withConnection,
} from '../../support/redis.js';
import { PATIENT } from '../../support/settle.js';
import { conformanceSuite } from '../conformance/suite.js';

const prefix = () => `rkn${randomBytes(4).toString('hex')}`;
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
const RULES: Rule[] = [
  { name: 'api', key: 'ip', limit: 3, window: { type: 'fixed', size: '1m' }, lockout: { duration: '5m' } },
  { name: 'burst', key: 'ip', limit: 10, window: { type: 'token-bucket', size: '1s' } },
];
const START = Date.parse('2026-03-02T00:00:00Z');

/** Polls `check` until it holds (a subscription or a reconnection is on its way), at most 5 s. */
async function until(what: string, check: () => boolean | Promise<boolean>): Promise<void> {
  const deadline = Date.now() + 5000;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`never happened: ${what}`);
    await sleep(20);
  }
}

/** Subscribers of a prefix's reset channel on `server`, as Redis counts them. */
async function subscribers(server: { host: string; port: number }, on: string): Promise<number> {
  const reply = await withConnection(server, (conn) => conn.call('PUBSUB', 'NUMSUB', resetChannel(on)));
  return Number((reply as [string, number])[1]);
}

/** A limiter through `client` on a frozen clock: the same calls give the same figures on every client. */
function frozenLimiter(client: AnyClient, on = prefix()): Limiter {
  return createLimiter({
    ...PATIENT,
    store: new RedisStore({ client, prefix: on, clock: () => START }),
    rules: RULES,
  });
}

/** Every figure a client's replies reach: decisions, status, a lock listed, a reset; then closes the limiter. */
async function figures(limiter: Limiter): Promise<unknown[]> {
  try {
    return await figuresOf(limiter);
  } finally {
    await limiter.close();
  }
}

async function figuresOf(limiter: Limiter): Promise<unknown[]> {
  const seen: unknown[] = [];
  for (let i = 0; i < 5; i++) {
    const d = await limiter.consume('api', '192.0.2.1');
    seen.push([d.allowed, d.remaining, d.retryAfterMs, d.resetMs]);
  }
  seen.push(await limiter.status('api', '192.0.2.1'));
  seen.push(await limiter.status('burst', '192.0.2.1'));
  seen.push(await limiter.locked('api'));
  seen.push(await limiter.reset('api', '192.0.2.1'));
  seen.push(await limiter.status('api', '192.0.2.1'));
  return seen;
}

describe('RedisStore through node-redis (the redis package)', function () {
  this.timeout(60_000);

  it('refuses a client it does not know, naming what it got and what it takes', () => {
    expect(() => new RedisStore({ client: { get: () => {} } as never })).to.throw(
      RateLimitConfigError,
      'RedisStore: client must be an ioredis or iovalkey Redis or Cluster, a node-redis client (createClient, ' +
        'createCluster or createSentinel of the redis package), or an @upstash/redis Redis, got an object',
    );
    expect(() => new RedisStore({ client: 'redis://localhost' as never })).to.throw(
      /got "redis:\/\/localhost"/,
    );
  });

  it('says to connect a node-redis client that was never connected', async () => {
    const client = createClient({ ...NODE_REDIS_OPTIONS, url: 'redis://127.0.0.1:1' });
    const limiter = createLimiter({ store: new RedisStore({ client, prefix: prefix() }), rules: RULES });
    try {
      const error = await limiter.status('api', 'k').then(
        () => undefined,
        (e: unknown) => e as Error & { code?: string },
      );
      expect(error?.code).to.equal('ERR_CLIENT_CLOSED');
      expect(error?.message).to.include('call `await client.connect()`');
    } finally {
      await limiter.close();
    }
  });

  describe('standalone', () => {
    let server: RedisServer;
    let client: AnyClient;
    before(async () => {
      server = await startRedis();
      client = await NODE_REDIS_6.standalone(server);
    });
    after(async () => {
      await NODE_REDIS_6.close(client);
      await server.stop();
    });

    it('gives the figures ioredis gives, over RESP3 (its default) and RESP2, and ioredis 6 with replyMapping resp3', async () => {
      const reference = server.client();
      const resp2 = createClient({ ...NODE_REDIS_OPTIONS, RESP: 2, url: server.url });
      await resp2.connect();
      const mapped = new Redis({
        ...RECOMMENDED_REDIS_OPTIONS,
        host: server.host,
        port: server.port,
        protocol: 3,
        replyMapping: 'resp3',
      });
      try {
        const expected = await figures(frozenLimiter(reference));
        expect(expected[7], 'a lock is listed').to.have.length(1);
        expect(await figures(frozenLimiter(client)), 'node-redis 6, RESP3').to.deep.equal(expected);
        expect(await figures(frozenLimiter(resp2)), 'node-redis 6, RESP2').to.deep.equal(expected);
        expect(await figures(frozenLimiter(mapped)), 'ioredis 6, replyMapping resp3').to.deep.equal(expected);
      } finally {
        reference.disconnect();
        resp2.destroy();
        mapped.disconnect();
      }
    });

    it('loads its function library again, once, after FUNCTION FLUSH (as node-redis words the error), then FCALL alone', async () => {
      const limiter = createLimiter({
        ...PATIENT,
        store: new RedisStore({ client, prefix: prefix() }),
        rules: RULES,
      });
      try {
        expect((await limiter.consume('api', 'k')).remaining).to.equal(2);
        await withConnection(server, (conn) => conn.call('FUNCTION', 'FLUSH'));
        const loads = await server.commandCount('function|load');
        expect((await limiter.consume('api', 'k')).remaining).to.equal(1);
        expect(await server.commandCount('function|load')).to.equal(loads + 1);
        const calls = await server.commandCount('fcall');
        expect((await limiter.consume('api', 'k')).remaining).to.equal(0);
        expect(await server.commandCount('function|load'), 'loaded once').to.equal(loads + 1);
        expect(await server.commandCount('fcall'), 'one FCALL').to.equal(calls + 1);
      } finally {
        await limiter.close();
      }
    });

    it("hears another process's resets on a connection of its own; killed, it subscribes again and says so", async () => {
      const on = prefix();
      const announcer = new RedisStore({ client, prefix: on });
      const listener = new RedisStore({ client, prefix: on });
      const heard: string[] = [];
      const last = () => heard[heard.length - 1];
      // A reset is announced twice when its script had to be loaded first: the test waits for the news.
      const storeRule = { name: 'api' } as Parameters<RedisStore['reset']>[0];
      try {
        void listener.onChange((change, rule, key) => {
          if (change === 'reset') heard.push(`${rule}/${key}`);
        });
        await until('subscribed', async () => (await subscribers(server, on)) === 1);
        await announcer.reset(storeRule, 'user {1}');
        await until('the reset heard', () => last() === 'api/user {1}');

        await withConnection(server, (conn) => conn.call('CLIENT', 'KILL', 'TYPE', 'pubsub'));
        // Resets may have been missed meanwhile: ('', '') says forget everything.
        await until('resubscribed', () => last() === '/');
        await until('subscribed again', async () => (await subscribers(server, on)) === 1);
        await announcer.reset(storeRule, 'k2');
        await until('the next reset heard', () => last() === 'api/k2');
        expect(
          heard.filter((news) => news === '/'),
          'one reconnection',
        ).to.have.length(1);
      } finally {
        await announcer.close();
        await listener.close();
      }
      await until('unsubscribed on close', async () => (await subscribers(server, on)) === 0);
      expect((client as unknown as { isOpen: boolean }).isOpen, "the caller's client stays open").to.equal(
        true,
      );
    });

    it("never leaves a decision in node-redis's offline queue, even with the queue on (its default)", async () => {
      // Through a proxy that goes away: reconnections are refused, retried only after a minute.
      const proxy = await startProxy(server);
      const queued = createClient({
        socket: { host: proxy.host, port: proxy.port, reconnectStrategy: () => 60_000 },
      });
      queued.on('error', () => {});
      await queued.connect();
      const events: string[] = [];
      const limiter = createLimiter({
        store: new RedisStore({ client: queued, prefix: prefix() }),
        rules: RULES,
        // A queued call would hold its decision this long: past the test's timeout.
        storeTimeout: 120_000,
      });
      limiter.on('storeError', ({ error }) => events.push(error.message));
      try {
        expect((await limiter.consume('api', 'k')).remaining, 'Redis decides').to.equal(2);
        await proxy.stop();
        await until('disconnected', () => !queued.isReady);
        const decisions = [];
        for (let i = 0; i < 3; i++) decisions.push(await limiter.consume('api', 'k'));
        // The insurance store answers at once, counting on its own.
        expect(decisions.map((d) => d.remaining)).to.deep.equal([2, 1, 0]);
        expect(events, 'then the store is skipped for storeRetryInterval').to.have.length(1);
        expect(events[0]).to.include('(the node-redis client is not connected');
        expect((await limiter.health()).state).to.equal('down');
      } finally {
        await limiter.close();
        queued.destroy();
      }
    });

    it('keeps deciding after the server restarts (empty script cache), and health() says ok again', async () => {
      const limiter = createLimiter({
        ...PATIENT,
        store: new RedisStore({ client, prefix: 'restart' }),
        rules: RULES,
        storeRetryInterval: 1,
      });
      try {
        expect((await limiter.consume('api', 'k')).remaining).to.equal(2);
        await server.restart();
        // Fails fast (no offline queue) while node-redis reconnects: the policy answers meanwhile.
        await until('Redis deciding again', async () => (await limiter.health()).state === 'ok');
        const status = await limiter.status('api', 'k');
        expect(status.count, 'the restarted server has no data').to.equal(0);
        expect((await limiter.consume('api', 'k')).remaining).to.equal(2);
      } finally {
        await limiter.close();
      }
    });
  });

  describe('Cluster', () => {
    const cluster = useCluster();
    let client: AnyClient;
    before(async () => {
      client = await NODE_REDIS_6.cluster(cluster.nodes);
    });
    after(() => NODE_REDIS_6.close(client));

    it('routes by key, lists locks from every master, and loads its library on each again after FUNCTION FLUSH', async () => {
      const limiter = createLimiter({
        ...PATIENT,
        store: new RedisStore({ client, prefix: prefix() }),
        rules: RULES,
      });
      const keys = ['a', 'b', 'c', 'd', 'e', 'f', 'g', 'h'];
      try {
        for (const key of keys) {
          for (let i = 0; i < 4; i++) await limiter.consume('api', key);
        }
        const locked = await limiter.locked('api');
        expect(locked.map((lock) => lock.key).sort()).to.deep.equal(keys);
        const masters = cluster.nodes.filter((node) => node.role === 'master');
        await Promise.all(
          masters.map((node) => withConnection(node, (conn) => conn.call('FUNCTION', 'FLUSH'))),
        );
        for (const key of keys) expect((await limiter.consume('api', `${key}2`)).remaining).to.equal(2);
        expect((await limiter.status('api', 'a')).locked).to.equal(true);
      } finally {
        await limiter.close();
      }
    });

    it("hears resets announced through the Cluster on node-redis's own subscriber", async () => {
      const on = prefix();
      const announcer = new RedisStore({ client, prefix: on });
      const listener = new RedisStore({ client, prefix: on });
      const heard: Array<[string, string]> = [];
      try {
        void listener.onChange((change, rule, key) => {
          if (change === 'reset') heard.push([rule, key]);
        });
        const counts = () => Promise.all(cluster.nodes.map((node) => subscribers(node, on)));
        await until('subscribed', async () => (await counts()).reduce((a, b) => a + b, 0) === 1);
        await announcer.reset({ name: 'api' } as Parameters<RedisStore['reset']>[0], 'k');
        // Twice when the script had to be loaded first on that master.
        await until('the reset heard', () => heard.length >= 1);
        expect(heard[0]).to.deep.equal(['api', 'k']);
      } finally {
        await announcer.close();
        await listener.close();
      }
    });

    it('12 stores on one Cluster client all hear a reset, with one event listener for them all (no MaxListeners warning)', async () => {
      const on = prefix();
      const warnings: Error[] = [];
      const onWarning = (warning: Error) => warnings.push(warning);
      process.on('warning', onWarning);
      const stores = Array.from({ length: 12 }, () => new RedisStore({ client, prefix: on }));
      const heard = new Set<number>();
      try {
        stores.forEach((store, i) => {
          void store.onChange((change, rule) => {
            if (change === 'reset' && rule === 'api') heard.add(i);
          });
        });
        const counts = () => Promise.all(cluster.nodes.map((node) => subscribers(node, on)));
        await until('subscribed', async () => (await counts()).reduce((a, b) => a + b, 0) >= 1);
        await (stores[0] as RedisStore).reset({ name: 'api' } as Parameters<RedisStore['reset']>[0], 'k');
        await until('heard by all', () => heard.size === 12);
      } finally {
        for (const store of stores) await store.close();
        process.off('warning', onWarning);
      }
      expect(warnings.filter((w) => w.name === 'MaxListenersExceededWarning')).to.deep.equal([]);
    });
  });

  it('Sentinel: createSentinel (and an iovalkey client given the sentinels) finds the master and decides', async function () {
    this.timeout(60_000);
    const sentinel = await startSentinel();
    const client = await nodeRedisSentinel(sentinel.sentinels, sentinel.masterName);
    const valkey = new Valkey({ sentinels: sentinel.sentinels, name: sentinel.masterName });
    valkey.on('error', () => {});
    const on = prefix();
    const limiter = createLimiter({
      ...PATIENT,
      store: new RedisStore({ client, prefix: on }),
      rules: RULES,
    });
    const viaValkey = createLimiter({
      ...PATIENT,
      store: new RedisStore({ client: valkey, prefix: on }),
      rules: RULES,
    });
    try {
      expect((await limiter.consume('api', 'k')).remaining).to.equal(2);
      expect((await limiter.status('api', 'k')).count).to.equal(1);
      expect((await limiter.health()).state).to.equal('ok');
      expect((await viaValkey.consume('api', 'k')).remaining, 'the same master').to.equal(1);
    } finally {
      await limiter.close();
      await viaValkey.close();
      await client.close();
      valkey.disconnect();
      await sentinel.stop();
    }
  });
});

describe('compatibility: ioredis 5, node-redis 5 and iovalkey', function () {
  this.timeout(60_000);
  const kinds: ClientKind[] = [IOREDIS_5, NODE_REDIS_5, IOVALKEY];
  const clients = new Map<ClientKind, AnyClient>();
  before(async () => {
    const server = await getRedis();
    for (const kind of kinds) clients.set(kind, await kind.standalone(server));
  });
  after(async () => {
    for (const [kind, client] of clients) await kind.close(client);
  });

  for (const kind of kinds) {
    conformanceSuite({
      name: `RedisStore through ${kind.name}`,
      makeStore: (clock) =>
        new RedisStore({ client: clients.get(kind) as AnyClient, prefix: prefix(), clock }),
    });
  }

  it('the same figures through each, on a standalone server and on a Cluster', async () => {
    const expected = await figures(frozenLimiter(clients.get(IOREDIS_5) as AnyClient));
    for (const kind of kinds.slice(1)) {
      expect(await figures(frozenLimiter(clients.get(kind) as AnyClient)), kind.name).to.deep.equal(expected);
    }
    const cluster = await startCluster();
    try {
      for (const kind of kinds) {
        const client = await kind.cluster(cluster.nodes);
        try {
          expect(await figures(frozenLimiter(client)), `${kind.name} Cluster`).to.deep.equal(expected);
        } finally {
          await kind.close(client);
        }
      }
    } finally {
      await cluster.stop();
    }
  });
});
