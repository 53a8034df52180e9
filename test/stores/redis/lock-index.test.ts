// The lock index on a real Redis, standalone and Cluster: written by the same script call as the lock, so
// a process that dies right after sending the request leaves no lock unlisted; read per master on a Cluster.
import { type ChildProcess, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { createInterface } from 'node:readline';
import { expect } from 'chai';
import type { Redis } from 'ioredis';
import { lockIndexKey, opKeys } from '../../../src/stores/redis/check-call.js';
import { allSlotTags, SLOTS, tagSlot } from '../../../src/stores/redis/keys.js';
import { SERVER_TIME } from '../../../src/stores/redis/op-text.js';
import { RedisStore } from '../../../src/stores/redis/redis-store.js';
import { Flag, LEVEL_UNIT } from '../../../src/stores/redis/replies.js';
import { LOCK_RULE, lockingOps } from '../../fixtures/lock-index-rule.js';
import {
  type RedisCluster,
  type RedisServer,
  startRedis,
  useCluster,
  withConnection,
} from '../../support/redis.js';

const prefix = () => `rkl${randomBytes(4).toString('hex')}`;

/** Runs the child that sends a locking request and hangs; resolves once it says the request was sent. */
async function lockAndHang(target: string, keyPrefix: string, key: string): Promise<ChildProcess> {
  const child = spawn(
    process.execPath,
    ['--import', 'tsx', 'test/fixtures/lock-and-hang.ts', target, keyPrefix, key],
    {
      stdio: ['ignore', 'pipe', 'inherit'],
    },
  );
  for await (const line of createInterface({ input: child.stdout as NonNullable<typeof child.stdout> })) {
    if (line === 'sent') return child;
  }
  throw new Error('the child ended before sending its request');
}

/** Waits until `exists` says the lock key is there (the child's request ran), then kills the child. */
async function killOnceLocked(child: ChildProcess, exists: () => Promise<number>): Promise<void> {
  const exited = new Promise((resolve) => child.once('exit', resolve));
  try {
    while ((await exists()) === 0) await new Promise((resolve) => setTimeout(resolve, 5));
  } finally {
    child.kill('SIGKILL');
    await exited;
  }
}

describe('Redis lock index (written by the script that places the lock)', function () {
  this.timeout(120_000);

  it('names the reply flags and the server-time argument alike in TypeScript and in Lua', () => {
    const protocol = readFileSync(new URL('../../../lua/protocol.lua', import.meta.url), 'utf8');
    const table = /local Flag = \{([^}]*)\}/.exec(protocol)?.[1] ?? '';
    const luaFlags = Object.fromEntries(
      [...table.matchAll(/(\w+) = (\d+)/g)].map((m) => [m[1], Number(m[2])]),
    );
    expect(luaFlags).to.deep.equal(Flag);
    expect(Number(/local LEVEL_UNIT = (\d+)/.exec(protocol)?.[1])).to.equal(LEVEL_UNIT);
    expect(/local SERVER_TIME = '([^']*)'/.exec(protocol)?.[1]).to.equal(SERVER_TIME);
  });

  describe('on a standalone server', () => {
    let server: RedisServer;
    let client: Redis;
    before(async () => {
      server = await startRedis();
      client = server.client();
    });
    after(async () => {
      client.disconnect();
      await server.stop();
    });

    it('lists a lock placed by a process killed right after sending the request that placed it', async () => {
      const keyPrefix = prefix();
      const store = new RedisStore({ client, prefix: keyPrefix });
      try {
        const key = 'user {1}';
        expect((await store.evaluate(lockingOps(key), 'check')).results[0]?.allowed).to.equal(true);
        const child = await lockAndHang(server.url, keyPrefix, key);
        await killOnceLocked(child, () => client.exists(opKeys(keyPrefix, 'login', key).lock));
        const locked = await store.locked(LOCK_RULE, 10);
        expect(locked.map((l) => [l.key, l.level])).to.deep.equal([[key, 1]]);

        expect(await store.reset(LOCK_RULE, key)).to.equal(true);
        expect(await store.locked(LOCK_RULE, 10), 'the reset took it off the index').to.deep.equal([]);
        expect(await client.zcard(lockIndexKey(keyPrefix, 'login', undefined))).to.equal(0);
      } finally {
        await store.close();
      }
    });
  });

  describe('on a 3-master Cluster', () => {
    const cluster = useCluster();

    it('has a slot tag for every slot that Redis hashes to that slot', async () => {
      const tags = allSlotTags();
      expect(tags).to.have.length(SLOTS);
      const slots = await withConnection(cluster.nodes[0] as RedisCluster['nodes'][0], async (conn) => {
        const pipeline = conn.pipeline();
        for (const tag of tags) pipeline.cluster('KEYSLOT', `x{${tag}}y`);
        return ((await pipeline.exec()) ?? []).map(([, slot]) => Number(slot));
      });
      expect(slots.every((slot, i) => slot === i)).to.equal(true);
      expect(tags.every((tag, i) => tagSlot(tag) === i)).to.equal(true);
    });

    it('lists a lock placed by a process killed right after sending the request that placed it', async () => {
      const keyPrefix = prefix();
      const store = new RedisStore({ client: cluster.ioredis, prefix: keyPrefix });
      try {
        const key = 'user {2}';
        expect((await store.evaluate(lockingOps(key), 'check')).results[0]?.allowed).to.equal(true);
        const target = cluster.nodes.map((node) => `${node.host}:${node.port}`).join(',');
        const child = await lockAndHang(target, keyPrefix, key);
        await killOnceLocked(child, () => cluster.ioredis.exists(opKeys(keyPrefix, 'login', key).lock));
        expect((await store.locked(LOCK_RULE, 10)).map((l) => [l.key, l.level])).to.deep.equal([[key, 1]]);
      } finally {
        await store.close();
      }
    });

    it("indexes each lock in its identity's slot and lists the locks of every master soonest first, up to the limit", async () => {
      // Glob characters in the prefix match only themselves in SCAN's pattern.
      // Unescaped, the pattern would also match the indexes of the prefix `<base>x?`.
      const base = prefix();
      const keyPrefix = `${base}*[?]`;
      await cluster.ioredis.zadd(`${base}x?:{a}:login:locks`, Date.now() + 60_000, '1:other-prefix');
      // A sorted set the pattern matches that is no lock index (its tag is not its slot's tag).
      await cluster.ioredis.zadd(`${keyPrefix}:{zzz}:login:locks`, Date.now() + 60_000, '1:decoy');
      let nowMs = Date.now();
      const store = new RedisStore({ client: cluster.ioredis, prefix: keyPrefix, clock: () => nowMs });
      try {
        const keys = Array.from({ length: 12 }, (_, i) => `id-${i}`);
        for (const key of keys) {
          nowMs += 10;
          await store.evaluate(lockingOps(key), 'check');
          await store.evaluate(lockingOps(key), 'check');
          const keySlot = Number(
            await cluster.ioredis.cluster('KEYSLOT', opKeys(keyPrefix, 'login', key).count),
          );
          const index = lockIndexKey(keyPrefix, 'login', keySlot);
          expect(Number(await cluster.ioredis.cluster('KEYSLOT', index)), key).to.equal(keySlot);
          expect(await cluster.ioredis.zscore(index, `1:${key}`), key).to.not.equal(null);
        }
        const masters = new Set(keys.map((key) => String(cluster.ioredis.slots[tagSlot(key)])));
        expect(masters.size, 'the identities span the masters').to.be.greaterThan(1);
        expect((await store.locked(LOCK_RULE, Infinity)).map((l) => l.key)).to.deep.equal(keys);
        expect((await store.locked(LOCK_RULE, 5)).map((l) => l.key)).to.deep.equal(keys.slice(0, 5));
        nowMs += 60_000 - 12 * 10 + 25;
        expect(
          (await store.locked(LOCK_RULE, 100)).map((l) => l.key),
          'ended locks are left out',
        ).to.deep.equal(keys.slice(2));
      } finally {
        await store.close();
      }
    });
  });
});
