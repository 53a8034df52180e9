// RedisStore over @upstash/redis on real workerd (miniflare 4.20260426.0, without nodejs_compat): a Worker
// reaches a real redis-server through the loopback REST server (test/support/upstash-rest.ts), and shares
// one limit exactly with a Node process that reaches the same Redis over ioredis.
import { randomBytes } from 'node:crypto';
import { join } from 'node:path';
import { expect } from 'chai';
import { Redis } from 'ioredis';
import { createLimiter, RedisStore } from '../../src/index.js';
import { getRedis, type RedisServer } from '../support/redis.js';
import { until } from '../support/settle.js';
import { startUpstashRest, type UpstashRest } from '../support/upstash-rest.js';
import { type RunningWorker, startWorker } from '../support/workerd.js';

const root = new URL('../..', import.meta.url).pathname;
const from = (address: string) => ({
  headers: { 'cf-connecting-ip': address, 'accept-encoding': 'identity' },
});

describe('workerd without nodejs_compat: RedisStore over @upstash/redis (Redis over HTTP)', function () {
  this.timeout(120_000);
  let server: RedisServer;
  let rest: UpstashRest;
  let worker: RunningWorker;
  let node: Redis;
  const prefix = `rkwu${randomBytes(4).toString('hex')}`;

  before(async () => {
    server = await getRedis();
    rest = await startUpstashRest({ redisPort: server.port });
    worker = await startWorker({
      entry: join(root, 'test/runtimes/apps/workerd-upstash.ts'),
      bindings: { UPSTASH_URL: rest.url, UPSTASH_TOKEN: rest.token, PREFIX: prefix },
    });
    node = new Redis({ host: '127.0.0.1', port: server.port });
  });
  after(async () => {
    await worker?.close();
    await rest?.close();
    node?.disconnect();
  });

  it('shares one limit exactly with a Node process on ioredis: 20 of 60 admitted, 30 sent to each', async () => {
    const limiter = createLimiter({
      store: new RedisStore({ client: node, prefix }),
      rules: [
        { name: 'api', match: 'GET /count', key: 'ip', limit: 20, window: { type: 'fixed', size: '1m' } },
      ],
    });
    const ip = '198.51.100.9';
    const [edge, local] = await Promise.all([
      Promise.all(
        Array.from({ length: 30 }, async () => {
          const response = await worker.fetch('/count', from(ip));
          await response.arrayBuffer();
          return response.status;
        }),
      ),
      Promise.all(
        Array.from(
          { length: 30 },
          async () => (await limiter.check({ ip, method: 'GET', path: '/count', headers: {} })).allowed,
        ),
      ),
    ]);
    const admitted = edge.filter((s) => s === 200).length + local.filter(Boolean).length;
    expect(admitted).to.equal(20);
    expect(edge.filter((s) => s !== 200 && s !== 429)).to.deep.equal([]);
    expect((await limiter.status('api', ip)).count).to.equal(20);
    // Scripts went over HTTP by EVALSHA (EVAL once at most, if the script was not cached yet).
    expect(rest.commands('EVALSHA')).to.be.greaterThan(0);
    await limiter.close();
  });

  it('holds a concurrency slot while the body streams, and frees it when the body ends', async () => {
    const ip = '203.0.113.44';
    const first = await worker.fetch('/stream', from(ip));
    expect(first.status).to.equal(200);
    const reader = (first.body as ReadableStream<Uint8Array>).getReader();
    expect(new TextDecoder().decode((await reader.read()).value)).to.equal('a');
    const second = await worker.fetch('/stream', from(ip));
    await second.arrayBuffer();
    expect(second.status).to.equal(429);
    await (await worker.fetch('/finish', from(ip))).arrayBuffer();
    let rest2 = '';
    for (let chunk = await reader.read(); !chunk.done; chunk = await reader.read())
      rest2 += new TextDecoder().decode(chunk.value);
    expect(rest2).to.equal('b');
    // The release is written after the body ended, kept alive by the Worker's ctx.waitUntil: the slot is
    // freed in Redis itself.
    const limiter = createLimiter({
      store: new RedisStore({ client: node, prefix }),
      rules: [{ name: 'streams', key: 'ip', limit: 1, window: { type: 'concurrency', lease: '30s' } }],
    });
    await until(
      'the slot is released in Redis',
      async () => (await limiter.status('streams', ip)).count === 0,
    );
    await limiter.close();
  });
});
