// The real-Redis test support itself (test/support/redis/): spawned servers, the shared server, Cluster and Sentinel.
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { once } from 'node:events';
import type { Cluster } from 'ioredis';
import {
  getRedis,
  type RedisCluster,
  type RedisServer,
  startCluster,
  startProxy,
  startRedis,
  startSentinel,
} from '../support/redis.js';

const processState = (pid: number) =>
  execFileSync('ps', ['-o', 'state=', '-p', String(pid)], { encoding: 'utf8' })
    .trim()
    .slice(0, 1);

const isAlive = (pid: number) => {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
};

describe('test support: spawned redis-server', () => {
  let server: RedisServer;

  before(async () => {
    server = await startRedis({ args: ['--maxmemory', '10mb'] });
  });
  after(() => server.stop());

  it('answers on its own port with the extra args applied, and counts the commands it ran', async () => {
    const client = server.client();
    assert.equal(await client.ping(), 'PONG');
    assert.match(server.version, /^\d+\.\d+\.\d+$/);
    assert.deepEqual(await client.config('GET', 'maxmemory'), ['maxmemory', String(10 * 1024 * 1024)]);
    await server.resetStats();
    await client.set('a', '1');
    await client.set('b', '2');
    assert.equal(await server.commandCount('set'), 2);
    assert.equal(await server.commandCount('evalsha'), 0);
    await server.resetStats();
    assert.equal(await server.commandCount('set'), 0);
  });

  it('forgets loaded scripts after restart on the same port, and its clients reconnect', async () => {
    const client = server.client();
    const sha = String(await client.script('LOAD', 'return 1'));
    assert.deepEqual(await client.script('EXISTS', sha), [1]);
    const { port, pid } = server;
    await server.restart();
    assert.equal(server.port, port);
    assert.notEqual(server.pid, pid);
    assert.equal(isAlive(pid), false);
    assert.deepEqual(await client.script('EXISTS', sha), [0]);
  });

  it('keeps its data (and TTLs) but not its scripts across a restart with keepData', async () => {
    const client = server.client();
    await client.set('kept', 'v', 'PX', 60_000);
    const sha = String(await client.script('LOAD', 'return 2'));
    await server.restart({ keepData: true });
    assert.equal(await client.get('kept'), 'v');
    assert.ok((await client.pttl('kept')) > 0, 'the TTL survives');
    assert.deepEqual(await client.script('EXISTS', sha), [0]);
  });

  it('times out commands while paused and answers again after resume', async () => {
    const client = server.client({ commandTimeout: 200 });
    assert.equal(await client.ping(), 'PONG');
    server.pause();
    try {
      assert.equal(processState(server.pid), 'T', 'stopped by the time pause() returns');
      const started = Date.now();
      await assert.rejects(client.ping(), /timed out/i);
      assert.ok(Date.now() - started < 1000, 'the timeout fires at about 200 ms');
    } finally {
      server.resume();
    }
    assert.equal(await client.ping(), 'PONG');
  });

  it('leaves no process behind and disconnects its clients on stop, and a second stop is harmless', async () => {
    const own = await startRedis();
    const client = own.client();
    await client.ping();
    const { pid } = own;
    await own.stop();
    assert.equal(isAlive(pid), false);
    if (client.status !== 'end') await once(client, 'end');
    await own.stop();
  });
});

describe('test support: proxy that loses a reply', () => {
  it('passes commands both ways, and loses exactly one reply of a command Redis ran, closing that connection', async () => {
    const server = await startRedis();
    const proxy = await startProxy(server);
    try {
      const client = server.client({
        port: proxy.port,
        maxRetriesPerRequest: 0,
        autoResendUnfulfilledCommands: false,
      });
      assert.equal(await client.set('k', '1'), 'OK');
      assert.equal(proxy.connections, 1);
      const closed = once(client, 'close');
      const lost = proxy.loseNextReply('incr');
      assert.equal(await client.get('k'), '1', 'a command other than the one named passes');
      await assert.rejects(client.incr('k'), /max retries/i);
      await lost;
      await closed;
      const direct = server.client();
      assert.equal(await direct.get('k'), '2', 'Redis ran the command whose reply was lost');
      assert.equal(
        await client.incr('k'),
        3,
        'the client reconnected through the proxy and is answered again',
      );
    } finally {
      await proxy.stop();
      await server.stop();
    }
  });
});

describe('test support: shared server', () => {
  it('hands every suite the same answering server and refuses to stop, restart or pause it', async () => {
    const shared = await getRedis();
    assert.equal(await getRedis(), shared);
    const client = shared.client();
    assert.equal(await client.ping(), 'PONG');
    client.disconnect();
    await assert.rejects(shared.stop(), /startRedis\(\)/);
    await assert.rejects(shared.restart(), /startRedis\(\)/);
    assert.throws(() => shared.pause(), /startRedis\(\)/);
  });
});

describe('test support: Redis Cluster', function () {
  this.timeout(30_000);

  describe('with 3 masters and no replicas', () => {
    let cluster: RedisCluster;
    let client: Cluster;

    before(async () => {
      cluster = await startCluster();
      client = cluster.client();
    });
    after(() => cluster.stop());

    it('has 3 masters that route hash-tagged keys to their slot', async () => {
      assert.deepEqual(
        cluster.nodes.map((node) => node.role),
        ['master', 'master', 'master'],
      );
      await cluster.resetStats();
      await client.set('{x}:a', '1');
      await client.set('{y}:a', '2');
      // Same hash tag, same slot: a multi-key command is allowed.
      await client.set('{x}:b', '3');
      assert.deepEqual(await client.mget('{x}:a', '{x}:b'), ['1', '3']);
      assert.equal(await client.get('{y}:a'), '2');
      assert.equal(await client.cluster('KEYSLOT', '{x}:a'), await client.cluster('KEYSLOT', 'x'));
      assert.equal(await cluster.commandCount('set'), 3);
    });
  });

  describe('with 1 replica per master', () => {
    let cluster: RedisCluster;
    let client: Cluster;

    before(async () => {
      cluster = await startCluster({ replicas: 1 });
      client = cluster.client();
    });
    after(() => cluster.stop());

    it('promotes a replica when a master is killed, and the cluster answers again', async () => {
      const replicaPorts = cluster.nodes.filter((node) => node.role === 'replica').map((node) => node.port);
      assert.equal(replicaPorts.length, 3);
      const tags = ['a', 'b', 'c', 'd', 'e', 'f', 'g', 'h', 'i', 'j'];
      for (const tag of tags) await client.set(`{${tag}}:k`, tag);
      await Promise.all(client.nodes('master').map((node) => node.wait(1, 1000)));

      const victim = cluster.nodes.find((node) => node.role === 'master');
      await cluster.killMaster(0);

      assert.equal(cluster.nodes.length, 5);
      assert.equal(isAlive(victim?.pid ?? -1), false);
      const masters = cluster.nodes.filter((node) => node.role === 'master');
      assert.equal(masters.length, 3);
      assert.equal(masters.filter((node) => replicaPorts.includes(node.port)).length, 1);
      for (const tag of tags) assert.equal(await client.get(`{${tag}}:k`), tag);
      await client.set('{x}:after', 'ok');
      assert.equal(await client.get('{x}:after'), 'ok');

      await cluster.restartNode(victim?.port ?? -1);
      const back = cluster.nodes.find((node) => node.port === victim?.port);
      assert.equal(back?.role, 'replica', 'the old master rejoined as a replica');
      assert.equal(cluster.nodes.filter((node) => node.role === 'replica').length, 3);
      await cluster.killMaster(0);
      for (const tag of tags) assert.equal(await client.get(`{${tag}}:k`), tag);
    });
  });
});

describe('test support: Redis Sentinel', function () {
  this.timeout(40_000);

  it('fails over to the replica, and the client follows to the new master', async () => {
    const setup = await startSentinel();
    try {
      const client = setup.client();
      await client.set('k', 'v');
      assert.equal(await client.wait(1, 2000), 1);
      const before = await setup.master();

      await setup.killMaster();

      const after = await setup.master();
      assert.notEqual(after.port, before.port);
      assert.equal(await client.get('k'), 'v');
      assert.equal((await client.role())[0], 'master');
      assert.deepEqual(await client.config('GET', 'port'), ['port', String(after.port)]);
    } finally {
      await setup.stop();
    }
  });
});
