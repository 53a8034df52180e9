// Redis-specific behaviour of RedisStore on a real Redis: parity with the memory store, round trips,
// NOSCRIPT recovery, key layout and TTLs, identity escaping, bytes per key, exactness across processes, Cluster.
import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { createInterface } from 'node:readline';
import { expect } from 'chai';
import type { Redis } from 'ioredis';
import { type CompiledRule, compileRules } from '../../../src/rules/compile.js';
import { MemoryStore } from '../../../src/stores/memory/memory-store.js';
import { escapeIdentity, identityKey, opKeys } from '../../../src/stores/redis/check-call.js';
import { resetChannel, tagSlot } from '../../../src/stores/redis/keys.js';
import { RedisStore } from '../../../src/stores/redis/redis-store.js';
import type { EvalMode, Store, StoreOp } from '../../../src/stores/store.js';
import type { LockInfo, Rule } from '../../../src/types.js';
import { type RedisServer, startRedis, startSentinel, useCluster } from '../../support/redis.js';
import { until } from '../../support/settle.js';

const WINDOWS: Record<string, Rule['window']> = {
  fixed: { type: 'fixed', size: 1000 },
  calendar: { type: 'calendar', unit: 'minute' },
  'sliding-log': { type: 'sliding-log', size: 1000 },
  sliding: { type: 'sliding', size: 1000, buckets: 10 },
  'token-bucket': { type: 'token-bucket', size: 1000 },
  gcra: { type: 'gcra', size: 1000 },
};

/** Sizes that do not divide evenly, bursts unlike limits: where float and integer math would part. */
const ODD_WINDOWS: Record<string, Rule['window']> = {
  fixed: { type: 'fixed', size: '777ms' },
  calendar: { type: 'calendar', unit: 'minute' },
  'sliding-log': { type: 'sliding-log', size: '913ms' },
  sliding: { type: 'sliding', size: 1000, buckets: 7 },
  'token-bucket': { type: 'token-bucket', size: '700ms', burst: 4 },
  gcra: { type: 'gcra', size: '900ms', burst: 2 },
  // Slots taken, released (a quiet refund: one ZREM) and lapsed at an odd lease.
  concurrency: { type: 'concurrency', lease: '1300ms' },
};

function compile(rules: Array<Omit<Rule, 'key'>>): CompiledRule[] {
  return compileRules(
    rules.map((rule) => ({ key: 'ip', ...rule })),
    { ipv6Subnet: 64 },
  );
}

function opOf(rule: CompiledRule, key: string, cost: number, nowMs: number): StoreOp {
  const periods = rule.periods?.(nowMs);
  return {
    rule: rule.store,
    key,
    cost,
    limit: rule.limit as number,
    ...(periods && { periodEndMs: periods.endMs, nextPeriodEndMs: periods.nextEndMs }),
  };
}

const uniquePrefix = () => `rkt${randomBytes(4).toString('hex')}`;

/** A small seeded PRNG (mulberry32): failures print the seed and replay. */
function prng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** Script calls run by one server: FCALL (the library), and EVALSHA and EVAL (where functions are refused). */
async function scriptCalls(server: { commandCount(cmd: string): Promise<number> }): Promise<number> {
  const counts = await Promise.all(['fcall', 'evalsha', 'eval'].map((cmd) => server.commandCount(cmd)));
  return counts.reduce((a, b) => a + b, 0);
}

describe('RedisStore', function () {
  this.timeout(120_000);
  let server: RedisServer;
  let client: Redis;
  const stores: Store[] = [];
  const track = <T extends Store>(store: T): T => {
    stores.push(store);
    return store;
  };

  // A server of its own: tests flush its scripts and count its commands (REDIS_URL's would be disturbed).
  before(async () => {
    server = await startRedis();
    client = server.client();
  });
  afterEach(async () => {
    await Promise.all(stores.splice(0).map((store) => store.close()));
  });
  after(() => server.stop());

  describe('computes exactly what the memory store computes', () => {
    for (const type of Object.keys(ODD_WINDOWS)) {
      it(`${type}: same results for 600 random steps of check, peek, record, refund, clear and reset`, async () => {
        const seed = Number(process.env.RK_SEED ?? Math.floor(Math.random() * 2 ** 31));
        const random = prng(seed);
        const window = ODD_WINDOWS[type] as Rule['window'];
        const rules = compile([
          { name: 'a', limit: 7, window },
          {
            name: 'b',
            limit: 3,
            window,
            // A slot is held until released: no lockout for a concurrency rule.
            ...(type !== 'concurrency' && {
              lockout: { duration: '700ms', escalate: 2, maxDuration: 2500, forgetAfter: 3000 },
            }),
          },
          { name: 'c', limit: 2, window, mode: 'dry-run' },
        ]);
        // Frozen during a step, never behind real time: a Redis TTL then never ends before the
        // memory store's expiry does, as in production where both run on the same clock.
        let jumpMs = 0;
        let nowMs = Date.now();
        const clock = () => nowMs;
        const memory = track(new MemoryStore({ clock }));
        const redis = track(new RedisStore({ client, prefix: uniquePrefix(), clock }));
        const receipts: Array<{ op: StoreOp; receipt: number }> = [];
        for (let step = 0; step < 600; step++) {
          const roll = random();
          if (roll < 0.3) jumpMs += Math.floor(random() * 400);
          else if (roll < 0.35) jumpMs += Math.floor(random() * 5000);
          nowMs = Date.now() + jumpMs;
          const key = random() < 0.7 ? 'k1' : 'k2';
          const picked = rules.filter(() => random() < 0.6);
          const ops = picked.map((rule) => opOf(rule, key, Math.floor(random() * 4), nowMs));
          const what = random();
          const context = `seed ${seed}, step ${step}`;
          if (what < 0.08 && receipts.length > 0) {
            const refund = receipts[Math.floor(random() * receipts.length)] as {
              op: StoreOp;
              receipt: number;
            };
            await memory.refund([refund]);
            await redis.refund([refund]);
          } else if (what < 0.1) {
            const rule = (rules[Math.floor(random() * rules.length)] as CompiledRule).store;
            await memory.reset(rule, key, { keepLock: true });
            await redis.reset(rule, key, { keepLock: true });
          } else if (what < 0.12) {
            const rule = (rules[Math.floor(random() * rules.length)] as CompiledRule).store;
            expect(await redis.reset(rule, key), context).to.equal(await memory.reset(rule, key));
          } else {
            const mode: EvalMode = what < 0.8 ? 'check' : what < 0.9 ? 'peek' : 'record';
            const expected = memory.evaluateSync(ops, mode);
            const actual = await redis.evaluate(ops, mode);
            expect(
              actual,
              `${context}, ${mode} ${JSON.stringify(ops.map((o) => [o.rule.name, o.cost]))}`,
            ).to.deep.equal(expected);
            actual.results.forEach((result, i) => {
              if (result.receipt !== 0 || (result.allowed && !result.locked)) {
                receipts.push({ op: ops[i] as StoreOp, receipt: result.receipt });
              }
            });
          }
          const lockRule = (rules[1] as CompiledRule).store;
          // Locks ending in the same ms may come in either order.
          const byEnd = (list: LockInfo[]) =>
            list.sort((x, y) => x.lockedUntil - y.lockedUntil || x.key.localeCompare(y.key));
          expect(byEnd(await redis.locked(lockRule, 10)), context).to.deep.equal(
            byEnd(await memory.locked(lockRule, 10)),
          );
        }
      });
    }
  });

  it('announces a reset to every store on the same prefix (deny caches drop the key)', async () => {
    const prefix = uniquePrefix();
    const other = server.client();
    try {
      const a = track(new RedisStore({ client, prefix }));
      const b = track(new RedisStore({ client: other, prefix }));
      const heard = new Promise<[string, string]>(
        (resolve) =>
          void b.onChange((change, rule, key) => {
            if (change === 'reset') resolve([rule, key]);
          }),
      );
      const [rule] = compile([{ name: 'login', limit: 1, window: { type: 'fixed', size: '1m' } }]);
      // The subscription is made lazily, on a connection of its own: publish once Redis counts it.
      const channel = resetChannel(prefix);
      await until('the reset subscription is in place', async () => {
        const [, count] = (await other.call('PUBSUB', 'NUMSUB', channel)) as [string, number];
        return Number(count) === 1;
      });
      expect(await a.reset((rule as CompiledRule).store, 'user {1}')).to.equal(false);
      expect(await heard).to.deep.equal(['login', 'user {1}']);
      await b.close();
      expect(other.status, "the caller's client stays open").to.equal('ready');
    } finally {
      other.disconnect();
    }
  });

  it('decides a 3-rule request in exactly one script call', async () => {
    const store = track(new RedisStore({ client, prefix: uniquePrefix() }));
    const rules = compile([
      { name: 'per-second', limit: 1, window: { type: 'fixed', size: '1s' } },
      { name: 'per-day', limit: 10, window: { type: 'calendar', unit: 'day' } },
      { name: 'burst', limit: 5, window: { type: 'token-bucket', size: '1m' } },
    ]);
    const ops = () => rules.map((rule) => opOf(rule, '10.0.0.1', 1, store.now()));
    await store.evaluate(ops(), 'check'); // loads the script, if this server has not seen it yet
    const before = await scriptCalls(server);
    const { results } = await store.evaluate(ops(), 'check');
    expect(await scriptCalls(server)).to.equal(before + 1);
    expect(results.map((r) => r.allowed)).to.deep.equal([false, true, true]);
  });

  it('a request whose key cannot be read fails alone: its batch is decided, and the keys its other rules created are deleted', async () => {
    const prefix = uniquePrefix();
    const store = track(new RedisStore({ client, prefix }));
    const rules = compile([
      { name: 'one', limit: 5, window: { type: 'fixed', size: '1m' } },
      { name: 'two', limit: 5, window: { type: 'sliding-log', size: '1m' } },
      { name: 'three', limit: 5, window: { type: 'gcra', size: '1m' } },
    ]);
    const [one] = rules as [CompiledRule];
    // 'one' and 'three' share the key form 'ip': their states are in the identity's record.
    expect(one.store.grouped).to.equal(true);
    await client.hset(identityKey(prefix, 'broken'), 'x', '1');
    await client.set(identityKey(prefix, 'broken3'), `${Date.now() + 60_000}|three=not a number`);
    const now = store.now();
    // Made in one turn of the event loop: one script call.
    const [before, broken, after, multi] = await Promise.allSettled([
      store.evaluate([opOf(one, 'fine-1', 1, now)], 'check'),
      store.evaluate([opOf(one, 'broken', 1, now)], 'check'),
      store.evaluate([opOf(one, 'fine-2', 1, now)], 'check'),
      store.evaluate(
        rules.map((rule) => opOf(rule, 'broken3', 1, now)),
        'check',
      ),
    ]);
    expect(before.status === 'fulfilled' && before.value.results[0]?.remaining).to.equal(4);
    expect(after.status === 'fulfilled' && after.value.results[0]?.remaining).to.equal(4);
    expect(broken.status === 'rejected' && String(broken.reason)).to.match(/WRONGTYPE/);
    expect(multi.status, 'gcra cannot read its key').to.equal('rejected');
    expect(await client.get(identityKey(prefix, 'broken3')), 'nothing written').to.not.include('one=');
    expect(await client.exists(opKeys(prefix, 'two', 'broken3').count), 'nothing written').to.equal(0);
  });

  it('loads its function library once; after FUNCTION FLUSH loads it again, once, and counts on', async () => {
    const own = await startRedis();
    try {
      const ownClient = own.client();
      const store = track(new RedisStore({ client: ownClient, prefix: uniquePrefix() }));
      const [rule] = compile([{ name: 'r', limit: 4, window: WINDOWS.fixed as Rule['window'] }]);
      const op = () => opOf(rule as CompiledRule, 'x', 1, store.now());
      expect((await store.evaluate([op()], 'check')).results[0]?.remaining).to.equal(3);
      expect(await own.commandCount('function|load'), 'loaded on first use').to.equal(1);
      expect((await store.evaluate([op()], 'check')).results[0]?.remaining).to.equal(2);
      expect(await own.commandCount('function|load')).to.equal(1);
      await ownClient.call('FUNCTION', 'FLUSH');
      const calls = await own.commandCount('fcall');
      expect((await store.evaluate([op()], 'check')).results[0]?.remaining).to.equal(1);
      expect(await own.commandCount('function|load'), 'loaded again').to.equal(2);
      expect(
        await own.commandCount('fcall'),
        'the FCALL that found none, then the one that decided',
      ).to.equal(calls + 2);
      expect((await store.evaluate([op()], 'check')).results[0]?.remaining).to.equal(0);
      expect(await own.commandCount('fcall')).to.equal(calls + 3);
      expect(await own.commandCount('evalsha')).to.equal(0);
    } finally {
      await own.stop();
    }
  });

  it('where FUNCTION is refused, runs its scripts by EVALSHA, and recovers from SCRIPT FLUSH through EVAL once', async () => {
    const own = await startRedis();
    try {
      const admin = own.client();
      await admin.call('ACL', 'SETUSER', 'nofunctions', 'on', '>secret', '~*', '&*', '+@all', '-function');
      const limited = own.client({ username: 'nofunctions', password: 'secret' });
      const store = track(new RedisStore({ client: limited, prefix: uniquePrefix() }));
      const [rule] = compile([{ name: 'r', limit: 4, window: WINDOWS.fixed as Rule['window'] }]);
      const op = () => opOf(rule as CompiledRule, 'x', 1, store.now());
      expect((await store.evaluate([op()], 'check')).results[0]?.remaining).to.equal(3);
      expect(await own.commandCount('eval'), 'EVAL once FUNCTION LOAD was refused').to.equal(1);
      const evalshas = await own.commandCount('evalsha');
      expect((await store.evaluate([op()], 'check')).results[0]?.remaining).to.equal(2);
      expect(await own.commandCount('evalsha')).to.equal(evalshas + 1);
      await admin.script('FLUSH');
      expect((await store.evaluate([op()], 'check')).results[0]?.remaining).to.equal(1);
      expect(await own.commandCount('eval'), 'EVAL after NOSCRIPT').to.equal(2);
      expect((await store.evaluate([op()], 'check')).results[0]?.remaining).to.equal(0);
      expect(await own.commandCount('eval'), 'EVALSHA again once reloaded').to.equal(2);
      expect(await own.commandCount('fcall'), 'FUNCTION LOAD is tried before any FCALL').to.equal(0);
    } finally {
      await own.stop();
    }
  });

  it('keeps working after the Redis server restarts (empty script cache)', async () => {
    const own = await startRedis();
    try {
      const ownClient = own.client();
      const store = track(new RedisStore({ client: ownClient, prefix: 'rk' }));
      const [rule] = compile([{ name: 'r', limit: 3, window: { type: 'fixed', size: '1m' } }]);
      const op = () => opOf(rule as CompiledRule, 'x', 1, store.now());
      expect((await store.evaluate([op()], 'check')).results[0]?.allowed).to.equal(true);
      await own.restart();
      const { results } = await store.evaluate([op()], 'check');
      // The restarted server has no data: the count starts over.
      expect(results[0]?.remaining).to.equal(2);
    } finally {
      await own.stop();
    }
  });

  it('sends the releases asked for in one turn in one call (32 at most), and a decision asked for after a release after it', async () => {
    const own = await startRedis();
    try {
      const ownClient = own.client();
      const store = track(new RedisStore({ client: ownClient, prefix: uniquePrefix() }));
      const [rule] = compile([{ name: 'slots', limit: 1, window: { type: 'concurrency', lease: '30s' } }]);
      const op = (key: string) => opOf(rule as CompiledRule, key, 1, Date.now());
      const keys = Array.from({ length: 40 }, (_, i) => `user-${i}`);
      const taken = await Promise.all(keys.map((key) => store.evaluate([op(key)], 'check')));
      expect(taken.every(({ results }) => results[0]?.allowed)).to.equal(true);
      const calls = async () => {
        const stats = await ownClient.info('commandstats');
        return [...stats.matchAll(/^cmdstat_(?:fcall|evalsha|eval):calls=(\d+)/gm)].reduce(
          (sum, m) => sum + Number(m[1]),
          0,
        );
      };
      const before = await calls();
      // 40 releases in one turn: two calls (32 + 8); each slot free again.
      await Promise.all(
        keys.map((key, i) =>
          store.refund([{ op: op(key), receipt: taken[i]?.results[0]?.receipt as number }]),
        ),
      );
      expect((await calls()) - before).to.equal(2);
      for (const key of keys) {
        const { results } = await store.evaluate([op(key)], 'peek');
        expect(results[0]?.allowed, key).to.equal(true);
      }
      // A release not awaited, then a decision of the same key in the same turn: the slot is free for it.
      const { results } = await store.evaluate([op('late')], 'check');
      const release = store.refund([{ op: op('late'), receipt: results[0]?.receipt as number }]);
      const again = await store.evaluate([op('late')], 'check');
      await release;
      expect(again.results[0]?.allowed).to.equal(true);
      // Releasing twice, or a slot never taken, changes nothing.
      await store.refund([{ op: op('late'), receipt: results[0]?.receipt as number }]);
      await store.refund([{ op: op('nobody'), receipt: 12345 }]);
      const held = await store.evaluate([op('late')], 'peek');
      expect(held.results[0]?.allowed, 'the slot taken again is still held').to.equal(false);
    } finally {
      await own.stop();
    }
  });

  it('close() sends the releases still waiting for the end of the turn, and resolves once they are done', async () => {
    const prefix = uniquePrefix();
    const store = new RedisStore({ client, prefix });
    const [rule] = compile([{ name: 'slots', limit: 1, window: { type: 'concurrency', lease: '30s' } }]);
    const op = opOf(rule as CompiledRule, 'closing', 1, Date.now());
    const { results } = await store.evaluate([op], 'check');
    let released = false;
    const release = store.refund([{ op, receipt: results[0]?.receipt as number }]).then(() => {
      released = true;
    });
    await store.close();
    expect(released, 'the release was done before close resolved').to.equal(true);
    await release;
    const reader = track(new RedisStore({ client, prefix }));
    expect((await reader.evaluate([op], 'peek')).results[0]?.allowed, 'the slot is free').to.equal(true);
  });

  describe('storage', () => {
    let own: RedisServer;
    let ownClient: Redis;
    before(async () => {
      own = await startRedis();
      ownClient = own.client();
    });
    after(() => own.stop());
    beforeEach(() => ownClient.flushall());

    it("lays out <prefix>:{<identity>} (the grouped rules' record), <prefix>:{<identity>}:<rule> and :l keys, each with a TTL no longer than it needs", async () => {
      const clock = { now: Date.now() };
      const store = track(new RedisStore({ client: ownClient, prefix: 'rk', clock: () => clock.now }));
      const lockout = { duration: '1m', forgetAfter: '1h' };
      const rules = compile(
        Object.entries(WINDOWS).map(([type, window]) => ({ name: type, limit: 2, window, lockout })),
      );
      const ops = (cost: number) => rules.map((rule) => opOf(rule, '1.2.3.4', cost, clock.now));
      await store.evaluate(ops(1), 'check');
      // Longest need of each count key: its window (a calendar minute ends within 60 s).
      const needs: Record<string, number> = {
        fixed: 1000,
        calendar: 60_000,
        'sliding-log': 1000,
        sliding: 1100,
        'token-bucket': 500,
        gcra: 500,
      };
      // The four string windows share the key 'ip': states in one record, which lives as long as the
      // longest of them needs.
      const grouped = ['fixed', 'calendar', 'token-bucket', 'gcra'];
      const record = (await ownClient.get('rk:{1.2.3.4}')) ?? '';
      const inRecord = record
        .split('|')
        .slice(1)
        .map((part) => part.split('=')[0]);
      expect(inRecord.sort()).to.deep.equal([...grouped].sort());
      const hashTtl = await ownClient.pttl('rk:{1.2.3.4}');
      expect(hashTtl).to.be.greaterThan(0).and.at.most(60_000);
      for (const [type, needMs] of Object.entries(needs)) {
        if (grouped.includes(type)) continue;
        const pttl = await ownClient.pttl(`rk:{1.2.3.4}:${type}`);
        expect(pttl, type).to.be.greaterThan(0).and.at.most(needMs);
      }
      // Exceed every rule: each locks (count key gone), lock kept until untilMs + forgetAfter.
      clock.now += 1;
      await store.evaluate(ops(2), 'check');
      const keys = (await ownClient.keys('rk:*')).sort();
      expect(keys).to.deep.equal(
        [
          ...Object.keys(WINDOWS).map((type) => `rk:{1.2.3.4}:${type}:l`),
          ...Object.keys(WINDOWS).map((t) => `rk:locks:{${t}}`),
        ].sort(),
      );
      for (const key of keys) {
        const pttl = await ownClient.pttl(key);
        const needMs = key.endsWith(':l') ? 60_000 + 3_600_000 : 60_000;
        expect(pttl, key)
          .to.be.greaterThan(needMs - 5000)
          .and.at.most(needMs);
      }
      const locked = await store.locked((rules[0] as CompiledRule).store, 10);
      expect(locked).to.deep.equal([
        { rule: 'fixed', key: '1.2.3.4', remainingMs: 60_000, lockedUntil: clock.now + 60_000, level: 1 },
      ]);
      expect(await store.reset((rules[0] as CompiledRule).store, '1.2.3.4')).to.equal(true);
      expect(await ownClient.exists('rk:{1.2.3.4}:fixed:l')).to.equal(0);
      expect(await store.locked((rules[0] as CompiledRule).store, 10)).to.deep.equal([]);
    });

    it('stores each window type in few bytes (MEMORY USAGE)', async () => {
      const base = Date.now();
      let now = base;
      const store = track(new RedisStore({ client: ownClient, prefix: 'rk', clock: () => now }));
      const figures: Record<string, number> = {};
      for (const [type, window] of Object.entries({
        ...WINDOWS,
        sliding: { type: 'sliding', size: '10s', buckets: 10 },
      })) {
        await ownClient.flushall();
        const [rule] = compileRules(
          [{ name: 'r', key: 'ip', limit: 100, window: window as Rule['window'] }],
          {
            ipv6Subnet: 64,
          },
        );
        // Ten hits, one per second: the sliding counter then holds 10 buckets.
        for (let i = 0; i < 10; i++) {
          now = base + i * 1000;
          await store.evaluate([opOf(rule as CompiledRule, '1.2.3.4', 1, now)], 'check');
        }
        figures[type] = Number(await ownClient.memory('USAGE', 'rk:{1.2.3.4}:r', 'SAMPLES', '0'));
      }
      console.log(
        `      bytes per key (MEMORY USAGE, key rk:{1.2.3.4}:r, 10 hits): ${JSON.stringify(figures)}`,
      );
      expect(figures.fixed).to.be.at.most(60);
      expect(figures.calendar).to.be.at.most(60);
      expect(figures.gcra).to.be.at.most(60);
      expect(figures['token-bucket']).to.be.at.most(90);
      expect(figures.sliding).to.be.at.most(250);
    });

    it("ends a concurrency key on the server's clock at its last lease end (PEXPIREAT), and one lease from an injected clock's now", async () => {
      const [rule] = compile([{ name: 'slots', limit: 2, window: { type: 'concurrency', lease: '30s' } }]);
      const server = track(new RedisStore({ client: ownClient, prefix: 'rk' }));
      const op = opOf(rule as CompiledRule, 'u', 1, Date.now());
      const count = opKeys('rk', 'slots', 'u').count;
      // The lease ends of the slots held (epoch ms, the server's clock), latest last.
      const leaseEnds = async (key: string) => {
        const flat = await ownClient.zrangebyscore(key, '-inf', '+inf', 'WITHSCORES');
        const ends: number[] = [];
        for (let i = 0; i < flat.length; i += 2) if (flat[i] !== '#') ends.push(Number(flat[i + 1]));
        return ends;
      };
      // An empty key (create), then a key holding a slot (save): each time the key ends with the
      // latest lease, to the millisecond.
      for (const held of [1, 2]) {
        expect((await server.evaluate([op], 'check')).results[0]?.allowed).to.equal(true);
        const ends = await leaseEnds(count);
        expect(ends).to.have.length(held);
        expect(await ownClient.call('PEXPIRETIME', count)).to.equal(ends[ends.length - 1]);
      }
      // An injected clock a year behind the server's: its TTL is a lease from its own now, not a time
      // already past (which would delete the key at once).
      const pastMs = Date.now() - 365 * 86_400_000;
      const injected = track(new RedisStore({ client: ownClient, prefix: 'past', clock: () => pastMs }));
      const pastOp = opOf(rule as CompiledRule, 'u', 1, pastMs);
      const pastKey = opKeys('past', 'slots', 'u').count;
      for (const held of [1, 2]) {
        expect((await injected.evaluate([pastOp], 'check')).results[0]?.allowed).to.equal(true);
        expect(await leaseEnds(pastKey)).to.have.length(held);
        const ttl = await ownClient.pttl(pastKey);
        expect(ttl).to.be.within(1, 30_000);
      }
    });
  });

  describe('identity escaping', () => {
    const nasty = [
      'a{b}c',
      '}',
      '{}',
      '{',
      '',
      'line\nbreak',
      'nul\u0000byte',
      'x'.repeat(1 << 20),
      '日本語',
      '\ud800',
      '\ufffd',
      '#hash',
      'p:{q}:r',
      'plain-id_1.2',
    ];

    it('keeps short printable identities readable and digests everything else into one slot-safe tag', () => {
      expect(escapeIdentity('1.2.3.4')).to.equal('1.2.3.4');
      expect(escapeIdentity('user 42')).to.equal('user 42');
      const tags = nasty.map(escapeIdentity);
      expect(new Set(tags).size, 'no two identities share a tag').to.equal(nasty.length);
      for (const tag of tags.slice(0, -1)) {
        expect(tag).to.match(/^#[\w-]{43}$/);
      }
      for (const identity of nasty) {
        const keys = opKeys('rk', 'r', identity);
        // The hash tag is the first {...}: exactly the escaped identity.
        expect(keys.count.slice(keys.count.indexOf('{') + 1, keys.count.indexOf('}'))).to.equal(keys.tag);
      }
    });

    it('never collides: a limit of 1 admits each distinct identity once', async () => {
      const store = track(new RedisStore({ client, prefix: uniquePrefix() }));
      const [rule] = compile([{ name: 'r', limit: 1, window: { type: 'fixed', size: '1m' } }]);
      for (const identity of nasty) {
        const op = opOf(rule as CompiledRule, identity, 1, store.now());
        expect(
          (await store.evaluate([op], 'check')).results[0]?.allowed,
          JSON.stringify(identity.slice(0, 20)),
        ).to.equal(true);
      }
    });
  });

  it('admits exactly 1000 of 4 processes x 2000 attempts at one key, for every window type', async function () {
    this.timeout(180_000);
    const windows: Record<string, Rule['window']> = {
      fixed: { type: 'fixed', size: '1d' },
      calendar: { type: 'calendar', unit: 'month' },
      'sliding-log': { type: 'sliding-log', size: '1d' },
      sliding: { type: 'sliding', size: '1d' },
      // A day for 1000 tokens: under 0.1 token refills during the run.
      'token-bucket': { type: 'token-bucket', size: '1d' },
      gcra: { type: 'gcra', size: '1d' },
    };
    // Four processes for every window type, each type a round on a rule of its own: connected first,
    // then "go" to all at once.
    const prefix = uniquePrefix();
    const workers = Array.from({ length: 4 }, () =>
      spawn(
        process.execPath,
        [
          '--import',
          'tsx',
          'test/fixtures/race-worker.ts',
          server.url,
          prefix,
          JSON.stringify(windows),
          '1000',
          '2000',
        ],
        { stdio: ['pipe', 'pipe', 'inherit'] },
      ),
    );
    const exited = workers.map((worker) => new Promise((resolve) => worker.once('close', resolve)));
    const lines = workers.map((worker) => createInterface({ input: worker.stdout })[Symbol.asyncIterator]());
    const next = async (i: number) => String((await (lines[i] as AsyncIterator<string>).next()).value);
    const admitted: Record<string, number> = {};
    try {
      expect(await Promise.all(workers.map((_, i) => next(i)))).to.deep.equal([
        'ready',
        'ready',
        'ready',
        'ready',
      ]);
      for (const type of Object.keys(windows)) {
        for (const worker of workers) worker.stdin.write(`go ${type}\n`);
        const counts = await Promise.all(
          workers.map(async (_, i) => (JSON.parse(await next(i)) as { admitted: number }).admitted),
        );
        admitted[type] = counts.reduce((a, b) => a + b, 0);
      }
    } finally {
      for (const worker of workers) worker.stdin.end();
      await Promise.all(exited);
    }
    console.log(`      admitted of 8000 attempts, limit 1000: ${JSON.stringify(admitted)}`);
    expect(admitted).to.deep.equal(Object.fromEntries(Object.keys(windows).map((type) => [type, 1000])));
  });

  describe('on a 3-master Redis Cluster', () => {
    const cluster = useCluster();

    it('computes the same slots as Redis does', async () => {
      for (const identity of ['1.2.3.4', 'user 42', 'a{b}c', '日本', 'x']) {
        const keys = opKeys('rk', 'r', identity);
        expect(tagSlot(keys.tag), identity).to.equal(
          Number(await cluster.ioredis.cluster('KEYSLOT', keys.count)),
        );
        expect(tagSlot(keys.tag), identity).to.equal(
          Number(await cluster.ioredis.cluster('KEYSLOT', keys.lock)),
        );
      }
    });

    it('announces freed slots from the release script, heard by a process waiting on another node', async () => {
      const prefix = uniquePrefix();
      const releaser = track(new RedisStore({ client: cluster.ioredis, prefix }));
      const waiter = track(new RedisStore({ client: cluster.ioredis, prefix }));
      const [rule] = compile([{ name: 'slots', limit: 1, window: { type: 'concurrency', lease: '30s' } }]);
      const heard: string[] = [];
      const all = new Set(['a', 'b', 'c', 'd', 'e', 'f']);
      let everyOne: () => void = () => {};
      const done = new Promise<void>((resolve) => {
        everyOne = resolve;
      });
      await waiter.onChange(
        (_change, ruleName, key) => {
          heard.push(`${ruleName}:${key}`);
          if ([...all].every((k) => heard.includes(`slots:${k}`))) everyOne();
        },
        { frees: true },
      );
      // Six identities in several slots: one release call per slot group, each publishing its own.
      const slots = new Set([...all].map((k) => tagSlot(opKeys(prefix, 'slots', k).tag)));
      expect(slots.size).to.be.at.least(2);
      const ops = [...all].map((k) => opOf(rule as CompiledRule, k, 1, releaser.now()));
      const taken = await Promise.all(ops.map((op) => releaser.evaluate([op], 'check')));
      await releaser.refund(ops.map((op, i) => ({ op, receipt: taken[i]?.results[0]?.receipt as number })));
      await done;
      expect([...new Set(heard)].sort()).to.deep.equal([...all].map((k) => `slots:${k}`));
    });

    it('decides rules of odd identities in one slot each, without CROSSSLOT', async () => {
      const store = track(new RedisStore({ client: cluster.ioredis, prefix: uniquePrefix() }));
      const rules = compile([
        { name: 'a', limit: 1, window: { type: 'fixed', size: '1m' } },
        { name: 'b', limit: 1, window: { type: 'sliding-log', size: '1m' }, lockout: { duration: '1m' } },
      ]);
      for (const identity of ['a{b}c', '}', '{}', 'line\nbreak', 'nul\u0000', 'x'.repeat(1 << 20), '日本']) {
        const ops = () => rules.map((rule) => opOf(rule, identity, 1, store.now()));
        await cluster.resetStats();
        expect((await store.evaluate(ops(), 'check')).results.map((r) => r.allowed)).to.deep.equal([
          true,
          true,
        ]);
        expect(await scriptCalls(cluster), 'one call per identity').to.be.at.most(2); // 2 when the script had to be loaded
        const denied = await store.evaluate(ops(), 'check');
        expect(denied.results.map((r) => r.locked)).to.deep.equal([false, true]);
      }
      const locked = await store.locked((rules[1] as CompiledRule).store, 100);
      expect(locked.map((l) => l.key).sort()).to.have.length(7);
    });

    it('refunds an earlier slot group when a later group denies, and reports it unconsumed', async () => {
      const store = track(new RedisStore({ client: cluster.ioredis, prefix: uniquePrefix() }));
      const [perUser, perIp] = compile([
        { name: 'user', limit: 5, window: { type: 'token-bucket', size: '1m' } },
        { name: 'ip', limit: 1, window: { type: 'fixed', size: '1m' } },
      ]) as [CompiledRule, CompiledRule];
      // Two identities that land on different masters.
      const ip = '10.0.0.1';
      let user = 'alice';
      for (let i = 0; tagSlot(user) === tagSlot(ip); i++) user = `alice${i}`;
      const ops = () => [opOf(perUser, user, 1, store.now()), opOf(perIp, ip, 1, store.now())];
      const first = await store.evaluate(ops(), 'check');
      expect(first.results.map((r) => [r.allowed, r.remaining])).to.deep.equal([
        [true, 4],
        [true, 0],
      ]);
      const second = await store.evaluate(ops(), 'check');
      expect(second.results.map((r) => r.allowed)).to.deep.equal([true, false]);
      // The user's token was refunded: still 4 left, as after the first request.
      expect(second.results[0]).to.include({ remaining: 4, receipt: 0 });
      const peek = await store.evaluate([opOf(perUser, user, 0, store.now())], 'peek');
      expect(peek.results[0]?.remaining).to.equal(4);
    });
  });

  it('works through Sentinel and keeps deciding after a failover (promoted replica, empty script cache)', async function () {
    this.timeout(90_000);
    const sentinel = await startSentinel();
    try {
      const store = track(new RedisStore({ client: sentinel.client(), prefix: 'rk' }));
      const [rule] = compile([{ name: 'r', limit: 100, window: { type: 'fixed', size: '1m' } }]);
      const check = async () =>
        (await store.evaluate([opOf(rule as CompiledRule, 'x', 1, store.now())], 'check')).results[0];
      expect((await check())?.remaining).to.equal(99);
      await sentinel.killMaster();
      // Replication is asynchronous: the count may or may not have survived; the store must answer.
      expect((await check())?.allowed).to.equal(true);
    } finally {
      await sentinel.stop();
    }
  });
});
