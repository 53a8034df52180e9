// The local deny cache on a real Redis: a denied hot key costs no Redis command until it could pass, the cache
// holds at most maxKeys entries, policy answers never enter it, and a reset clears it in every process (pub/sub).
import { type ChildProcess, spawn } from 'node:child_process';
import { once } from 'node:events';
import { createInterface } from 'node:readline';
import { expect } from 'chai';
import type { Redis } from 'ioredis';
import { createLimiter, type LimiterOptions, RedisStore, type Rule } from '../../src/index.js';
import { DenyCache } from '../../src/limiter/decider.js';
import { opKeys } from '../../src/stores/redis/check-call.js';
import { resetChannel } from '../../src/stores/redis/keys.js';
import { LOGIN_RULE } from '../fixtures/deny-cache-rules.js';
import { RECOMMENDED_REDIS_OPTIONS } from '../fixtures/redis-options.js';
import { type RedisServer, startRedis } from '../support/redis.js';
import { PATIENT, until } from '../support/settle.js';

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

async function ready(client: Redis): Promise<void> {
  // Not events.once, which would reject on an 'error' event.
  if (client.status !== 'ready') await new Promise<void>((resolve) => client.once('ready', () => resolve()));
}
const fixed = (limit: number, size = '1m'): Rule => ({
  name: 'api',
  key: 'ip',
  limit,
  window: { type: 'fixed', size },
});

describe('Deny cache', function () {
  this.timeout(30_000);
  let server: RedisServer;
  let client: Redis;
  let control: Redis;
  let prefixes = 0;
  const cleanups: Array<() => unknown> = [];

  before(async () => {
    server = await startRedis();
    // Every call counted below is one Redis answered: no commandTimeout a busy machine could reach.
    client = server.client({ ...RECOMMENDED_REDIS_OPTIONS, commandTimeout: PATIENT.storeTimeout });
    control = server.client();
    await Promise.all([client, control].map(ready));
  });
  after(() => server.stop());
  afterEach(async () => {
    for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
  });

  const scriptCalls = async () =>
    (await server.commandCount('fcall')) +
    (await server.commandCount('evalsha')) +
    (await server.commandCount('eval'));

  function limiterOn(rules: Rule[], options: Partial<LimiterOptions> & { prefix?: string; on?: Redis } = {}) {
    const { prefix = `dc${prefixes++}`, on = client, ...rest } = options;
    const limiter = createLimiter({
      ...PATIENT,
      store: new RedisStore({ client: on, prefix }),
      rules,
      ...rest,
    });
    cleanups.push(() => limiter.close());
    let cachedAnswers = 0;
    limiter.on('limited', (event) => {
      if (event.cached) cachedAnswers++;
    });
    return { limiter, prefix, cachedAnswers: () => cachedAnswers };
  }

  /** Subscribers on a prefix's reset channel, as Redis counts them. */
  async function subscribers(prefix: string): Promise<number> {
    const [, count] = (await control.pubsub('NUMSUB', resetChannel(prefix))) as [string, number];
    return Number(count);
  }

  async function waitForSubscribers(prefix: string, expected: number): Promise<void> {
    const deadline = Date.now() + 5000;
    while ((await subscribers(prefix)) !== expected) {
      if (Date.now() > deadline) throw new Error(`${prefix}: never reached ${expected} subscribers`);
      await sleep(20);
    }
  }

  it('answers 1000 requests of a denied hot key with 0 Redis commands; the denial that fills it costs exactly 1', async () => {
    const { limiter, prefix, cachedAnswers } = limiterOn([fixed(3)]);
    for (let i = 0; i < 3; i++) expect((await limiter.consume('api', 'attacker')).allowed).to.equal(true);
    const before = await scriptCalls();
    expect((await limiter.consume('api', 'attacker')).allowed).to.equal(false);
    const afterDenial = await scriptCalls();
    let admitted = 0;
    for (let i = 0; i < 1000; i++) if ((await limiter.consume('api', 'attacker')).allowed) admitted++;
    const afterFlood = await scriptCalls();

    // The same key through a limiter without the cache: every request is a script call.
    const uncached = limiterOn([fixed(3)], { prefix, denyCache: false }).limiter;
    for (let i = 0; i < 1000; i++) await uncached.consume('api', 'attacker');
    const withoutCache = (await scriptCalls()) - afterFlood;
    console.log(
      `      EVALSHA+EVAL: first denial ${afterDenial - before}, next 1000 requests ${afterFlood - afterDenial} (without the cache: ${withoutCache})`,
    );
    expect(afterDenial - before).to.equal(1);
    expect(afterFlood - afterDenial).to.equal(0);
    expect(admitted).to.equal(0);
    expect(cachedAnswers()).to.equal(1000);
    expect(withoutCache).to.equal(1000);
  });

  it('answers a locked key locally until the lock ends, then asks Redis again', async () => {
    let now = Date.now();
    const store = new RedisStore({ client, prefix: `dc${prefixes++}`, clock: () => now });
    const limiter = createLimiter({
      ...PATIENT,
      store,
      rules: [{ ...fixed(2), lockout: { duration: '1m' } }],
    });
    cleanups.push(() => limiter.close());
    await limiter.consume('api', 'k');
    await limiter.consume('api', 'k');
    expect((await limiter.consume('api', 'k')).locked, 'the third attempt locks').to.equal(true);
    const before = await scriptCalls();
    for (let i = 0; i < 100; i++) {
      now += 500;
      const decision = await limiter.consume('api', 'k');
      expect(decision).to.include({ allowed: false, locked: true });
      expect(decision.retryAfterMs).to.equal(60_000 - (i + 1) * 500);
    }
    expect(await scriptCalls(), 'while locked').to.equal(before);
    now += 10_000; // 60.000 s after the lock
    expect((await limiter.consume('api', 'k')).allowed, 'the lock is over').to.equal(true);
    expect(await scriptCalls()).to.equal(before + 1);
  });

  it('holds at most maxKeys entries: of 300 denied keys only the latest 100 are answered locally', async () => {
    const { limiter } = limiterOn([fixed(1)], { denyCache: { maxKeys: 100 } });
    for (let i = 0; i < 300; i++) {
      await limiter.consume('api', `k${i}`);
      expect((await limiter.consume('api', `k${i}`)).allowed).to.equal(false);
    }
    const before = await scriptCalls();
    for (let i = 200; i < 300; i++) await limiter.consume('api', `k${i}`);
    const latest = (await scriptCalls()) - before;
    for (let i = 0; i < 200; i++) await limiter.consume('api', `k${i}`);
    const older = (await scriptCalls()) - before - latest;
    expect({ latest, older }).to.deep.equal({ latest: 0, older: 200 });

    const cache = new DenyCache(3);
    const denial = (key: string) => ({
      rule: 'r',
      key,
      allowed: false,
      limit: 1,
      remaining: 0,
      count: 1,
      resetMs: 9,
    });
    const now = Date.now();
    for (let i = 0; i < 10; i++) cache.set({ ...denial(`k${i}`), locked: false }, now, now + 60_000, 1, 1);
    expect(cache.size).to.equal(3);
    expect(cache.get('r', 'k9', Date.now(), 1, 1)).to.not.equal(undefined);
    expect(cache.get('r', 'k6', Date.now(), 1, 1)).to.equal(undefined);
  });

  it('caches no rule whose count an outcome report can lower (countOn, resetOnSuccess)', async () => {
    const rules: Rule[] = [
      { ...fixed(1), countOn: 'failure' },
      { ...fixed(1), name: 'reset', resetOnSuccess: true },
    ];
    const { limiter } = limiterOn(rules);
    await limiter.consume('api', 'k');
    await limiter.consume('reset', 'k');
    const before = await scriptCalls();
    for (let i = 0; i < 10; i++) {
      expect((await limiter.consume('api', 'k')).allowed).to.equal(false);
      expect((await limiter.consume('reset', 'k')).allowed).to.equal(false);
    }
    expect((await scriptCalls()) - before).to.equal(20);
  });

  it('never caches an answer of the failure policy: a real denial stays cached through an outage (regression)', async () => {
    // The recommended settings: on the paused server a call ends at commandTimeout.
    const recommended = server.client(RECOMMENDED_REDIS_OPTIONS);
    await ready(recommended);
    const { limiter } = limiterOn([fixed(1)], {
      on: recommended,
      onStoreError: 'deny',
      storeRetryInterval: 1,
      denyCache: { maxKeys: 1 },
    });
    await limiter.consume('api', 'attacker');
    expect((await limiter.consume('api', 'attacker')).allowed).to.equal(false); // cached
    server.pause();
    try {
      // Refused by the policy after commandTimeout: a cached policy denial would take the attacker's place.
      expect((await limiter.consume('api', 'someone')).allowed).to.equal(false);
    } finally {
      server.resume();
    }
    // Answered after the paused call on the same connection: that call has run and is counted before.
    await recommended.ping();
    const before = await scriptCalls();
    expect((await limiter.consume('api', 'attacker')).allowed).to.equal(false);
    expect(await scriptCalls(), 'answered from the cache').to.equal(before);
  });

  describe('across processes', () => {
    let child: ChildProcess | undefined;
    let lines: AsyncIterator<string> | undefined;

    afterEach(async () => {
      if (child !== undefined && child.exitCode === null) {
        const exited = once(child, 'exit');
        child.stdin?.end('quit\n');
        const timer = setTimeout(() => child?.kill('SIGKILL'), 5000);
        await exited;
        clearTimeout(timer);
      }
      child = undefined;
    });

    async function startChild(prefix: string): Promise<void> {
      child = spawn(
        process.execPath,
        ['--import', 'tsx', 'test/fixtures/deny-cache-worker.ts', server.url, prefix],
        {
          stdio: ['pipe', 'pipe', 'inherit'],
        },
      );
      lines = createInterface({ input: child.stdout as NodeJS.ReadableStream })[Symbol.asyncIterator]();
      expect(await nextLine()).to.equal('ready');
    }

    async function nextLine(): Promise<string> {
      const { value, done } = await (lines as AsyncIterator<string>).next();
      if (done) throw new Error('the child process ended');
      return String(value);
    }

    async function childConsume(
      key: string,
    ): Promise<{ allowed: boolean; locked: boolean; cached: boolean }> {
      child?.stdin?.write(`consume ${key}\n`);
      return JSON.parse(await nextLine());
    }

    it('a reset in this process lets another process admit the key as soon as it hears of it (pub/sub, also with enableOfflineQueue: false), and only the reset does', async () => {
      const prefix = `dc${prefixes++}`;
      const { limiter } = limiterOn([LOGIN_RULE], { prefix });
      const unlocks: string[] = [];
      limiter.on('unlock', (event) => unlocks.push(event.key));
      await startChild(prefix);
      await waitForSubscribers(prefix, 2);

      const attempts = [];
      for (let i = 0; i < 4; i++) attempts.push(await childConsume('mallory'));
      expect(attempts).to.deep.equal([
        { allowed: true, locked: false, cached: false },
        { allowed: true, locked: false, cached: false },
        { allowed: false, locked: true, cached: false },
        { allowed: false, locked: true, cached: true },
      ]);
      const before = await scriptCalls();
      expect(await childConsume('mallory')).to.include({ allowed: false, cached: true });
      expect(await scriptCalls(), 'the other process asked Redis nothing').to.equal(before);

      await limiter.reset('login', 'mallory');
      expect(unlocks).to.deep.equal(['mallory']);
      // Redis writes the announcement to the other process before its reply to this one; the other process
      // may still read its stdin first, so it is asked to say it has heard the reset (an event, not a wait).
      child?.stdin?.write('heard mallory\n');
      expect(await nextLine()).to.equal('heard');
      expect(await childConsume('mallory'), 'once the other process heard the reset').to.deep.equal({
        allowed: true,
        locked: false,
        cached: false,
      });

      // Control: the same unlock done behind the limiters' backs (no announcement) leaves the cache as it is.
      for (let i = 0; i < 3; i++) await childConsume('eve');
      const keys = opKeys(prefix, 'login', 'eve');
      expect(await control.del(keys.count, keys.lock)).to.equal(1);
      expect((await limiter.status('login', 'eve')).locked, 'unlocked in Redis').to.equal(false);
      expect(await childConsume('eve')).to.include({ allowed: false, cached: true });
    });

    it('forgets everything once its subscriber reconnects, so a reset missed meanwhile cannot keep a key locked (regression)', async () => {
      const prefix = `dc${prefixes++}`;
      const { limiter } = limiterOn([LOGIN_RULE], { prefix });
      await startChild(prefix);
      await waitForSubscribers(prefix, 2);
      for (let i = 0; i < 3; i++) await childConsume('mallory');
      expect(await childConsume('mallory')).to.include({ cached: true });

      await control.call('CLIENT', 'KILL', 'TYPE', 'pubsub');
      expect(await subscribers(prefix)).to.equal(0);
      await limiter.reset('login', 'mallory'); // announced to nobody
      expect(await childConsume('mallory'), 'missed it').to.include({ allowed: false, cached: true });
      await waitForSubscribers(prefix, 2);
      // The child forgets its cache once its subscriber is back; a cached denial counts nothing meanwhile.
      let answer: Record<string, unknown> = {};
      await until('the child asks Redis again', async () => {
        answer = await childConsume('mallory');
        return answer.allowed === true;
      });
      expect(answer).to.deep.equal({ allowed: true, locked: false, cached: false });
    });
  });
});
