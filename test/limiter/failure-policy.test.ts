// Faults on real Redis processes the tests control: killed, restarted, paused, unreachable at start-up, a Cluster
// master and a Sentinel master failed over, a reply lost. Requests stay in flight throughout; each one must settle,
// admissions are counted, the causes the failure policy reports are checked, and decisions must come from Redis
// again afterwards. How long any of it takes is measured in bench/ (see bench/RESULTS.md), not asserted here.
import { spawnSync } from 'node:child_process';
import { expect } from 'chai';
import type { Cluster, Redis, RedisOptions } from 'ioredis';
import {
  createLimiter,
  type Limiter,
  RedisStore,
  type Rule,
  type StoreErrorEvent,
  type StoreOp,
} from '../../src/index.js';
import { type CompiledRule, compileRules } from '../../src/rules/compile.js';
import { escapeIdentity } from '../../src/stores/redis/check-call.js';
import { tagSlot } from '../../src/stores/redis/keys.js';
import {
  RECOMMENDED_CLUSTER_OPTIONS,
  RECOMMENDED_REDIS_OPTIONS,
  STORE_TIMEOUT_MS,
} from '../fixtures/redis-options.js';
import { type Sample, Traffic } from '../fixtures/traffic.js';
import {
  commandCalls,
  type NodeAddress,
  refused,
  startCluster,
  startProxy,
  startRedis,
  startSentinel,
} from '../support/redis.js';
import { PATIENT } from '../support/settle.js';

type Policy = 'allow' | 'deny' | 'insurance';

const LIMIT = 5;
/** storeRetryInterval: how long decisions skip Redis after a failure. */
const RETRY_MS = 300;
/** What a call that Redis left unanswered ends with: ioredis's commandTimeout or the limiter's storeTimeout. */
const TIMED_OUT = ['Command timed out', `store did not answer within ${STORE_TIMEOUT_MS} ms`];
const RULES: Rule[] = [{ name: 'api', key: 'ip', limit: LIMIT, window: { type: 'fixed', size: '1m' } }];
/** Requests for one key sent at once during an outage, and how many each policy admits. */
const BURST = 4 * LIMIT;
const ADMITTED: Record<Policy, number> = { allow: BURST, deny: 0, insurance: LIMIT };

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

/**
 * Resolves on the client's next `event`. Not events.once: that rejects on an 'error' event, and a killed
 * server often shows up as ECONNRESET just before 'close'.
 */
function next(client: Redis | Cluster, event: 'ready' | 'close'): Promise<void> {
  return new Promise((resolve) => client.once(event, () => resolve()));
}

async function ready(client: Redis | Cluster): Promise<void> {
  if (client.status !== 'ready') await next(client, 'ready');
}

/** Script calls a server has run (FCALL, and EVALSHA + EVAL where functions are refused), from INFO commandstats. */
async function scriptCallsAt(node: NodeAddress): Promise<number> {
  const counts = await Promise.all(['fcall', 'evalsha', 'eval'].map((cmd) => commandCalls(node, cmd)));
  return counts.reduce((a, b) => a + b, 0);
}

describe('Reliability: Redis faults with requests in flight', function () {
  this.timeout(60_000);
  const unhandled: unknown[] = [];
  const onUnhandled = (reason: unknown) => void unhandled.push(reason);
  /** Undone after each test, last first: limiters before the servers they use. */
  const cleanups: Array<() => unknown> = [];
  let prefixes = 0;

  before(() => process.on('unhandledRejection', onUnhandled));
  after(() => process.off('unhandledRejection', onUnhandled));
  beforeEach(() => {
    unhandled.length = 0;
  });
  afterEach(async () => {
    for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
  });

  async function own<T extends { stop(): Promise<void> }>(starting: Promise<T>): Promise<T> {
    const started = await starting;
    cleanups.push(() => started.stop());
    return started;
  }

  function setup(
    client: Redis | Cluster,
    policy: Policy,
    rules: Rule[] = RULES,
    storeTimeoutMs = STORE_TIMEOUT_MS,
  ) {
    const storeErrors: StoreErrorEvent[] = [];
    const limiter = createLimiter({
      store: new RedisStore({ client, prefix: `rel${prefixes++}` }),
      rules,
      onStoreError: policy,
      storeTimeout: storeTimeoutMs,
      storeRetryInterval: RETRY_MS,
    });
    limiter.on('storeError', (event) => storeErrors.push(event));
    cleanups.push(() => limiter.close());
    return { limiter, storeErrors, traffic: new Traffic((key) => limiter.consume('api', key)) };
  }

  /**
   * Waits for the event: a decision comes from Redis again, i.e. a fresh key consumed once reads back as
   * count 1 from Redis (a decision of the policy leaves Redis untouched). The 10 s only ends a hang.
   */
  async function decidedByRedisAgain(limiter: Limiter, probeKey = (i: number) => `probe-${i}`) {
    const giveUpAt = Date.now() + 10_000;
    for (let i = 0; Date.now() < giveUpAt; i++) {
      const key = probeKey(i);
      await limiter.consume('api', key);
      const count = await limiter.status('api', key).then(
        (status) => status.count,
        () => -1,
      );
      if (count === 1) return;
      await sleep(50);
    }
    throw new Error('decisions did not come from Redis again within 10 s');
  }

  /** Three requests for a fresh key are counted by Redis, each once, and cost Redis script calls. */
  async function expectRedisDecides(limiter: Limiter, scriptCalls: () => Promise<number>, key = 'after') {
    // Called once the traffic has stopped: a request sent during the fault may still have timed out after
    // Redis came back, and the limiter then skips Redis for storeRetryInterval. Let that interval pass.
    await sleep(RETRY_MS);
    const before = await scriptCalls();
    const errors: string[] = [];
    const onError = (event: StoreErrorEvent) => errors.push(event.error.message);
    limiter.on('storeError', onError);
    for (let i = 0; i < 3; i++) expect((await limiter.consume('api', key)).allowed).to.equal(true);
    limiter.off('storeError', onError);
    const count = (await limiter.status('api', key)).count;
    expect(count, `counted by Redis (store errors meanwhile: ${JSON.stringify(errors)})`).to.equal(3);
    expect((await scriptCalls()) - before, 'script calls on the server').to.be.at.least(3);
  }

  /**
   * What every fault must leave true: every request settled (traffic.stop() waits for each one; a request
   * left hanging would hold it until the test's timeout), none rejected, the failure policy answered and
   * said so in storeError events, nothing unhandled.
   */
  function expectContained(
    what: string,
    samples: Sample[],
    storeErrors: StoreErrorEvent[],
    policy: Policy,
    extra: string,
  ) {
    console.log(
      `      ${what}: ${samples.length} requests, ${samples.filter((s) => s.allowed).length} admitted, ` +
        `${storeErrors.length} storeError events; ${extra}`,
    );
    expect(
      samples.filter((s) => s.error !== undefined).map((s) => String(s.error)),
      'rejected calls',
    ).to.deep.equal([]);
    expect(storeErrors.length, 'storeError events').to.be.greaterThan(0);
    for (const event of storeErrors) {
      expect(event.error).to.be.an.instanceOf(Error);
      expect(event).to.include({ operation: 'check', policy });
    }
    expect(unhandled, 'unhandled rejections').to.deep.equal([]);
  }

  for (const policy of ['allow', 'deny', 'insurance'] as const) {
    it(`Redis killed: '${policy}' admits ${ADMITTED[policy]} of ${BURST} for one key during the outage, then Redis decides again`, async () => {
      const server = await own(startRedis());
      const client = server.client(RECOMMENDED_REDIS_OPTIONS);
      await ready(client);
      const { limiter, storeErrors, traffic } = setup(client, policy);
      traffic.start();
      await sleep(200);
      const closed = next(client, 'close');
      process.kill(server.pid, 'SIGKILL');
      await closed;
      const downAt = performance.now();
      const outage = await traffic.burst('outage', BURST);
      await sleep(300);
      const restartAt = performance.now();
      await server.restart();
      await decidedByRedisAgain(limiter);
      await sleep(100);
      const samples = await traffic.stop();

      expect(outage.filter((s) => s.allowed).length, 'outage key admitted').to.equal(ADMITTED[policy]);
      // Fresh keys during the outage: 'deny' refuses them all, 'allow' and 'insurance' admit them all.
      const background = traffic.sentBetween(downAt, restartAt, 'bg-');
      expect(background.length).to.be.greaterThan(5);
      expect(background.filter((s) => s.allowed).length).to.equal(policy === 'deny' ? 0 : background.length);
      await expectRedisDecides(limiter, () => scriptCallsAt(server));
      expectContained(
        `kill, '${policy}'`,
        samples,
        storeErrors,
        policy,
        `outage key ${ADMITTED[policy]}/${BURST} admitted, then Redis deciding again`,
      );
    });
  }

  it('Redis restarted: the function library, gone with the process, is loaded again and each request counts once', async () => {
    const server = await own(startRedis());
    const client = server.client(RECOMMENDED_REDIS_OPTIONS);
    await ready(client);
    const { limiter, storeErrors, traffic } = setup(client, 'insurance');
    traffic.start();
    await sleep(200);
    await server.restart();
    await decidedByRedisAgain(limiter);
    await sleep(100);
    const samples = await traffic.stop();

    expect(await server.commandCount('function|load'), 'loaded on the new process').to.be.at.least(1);
    await expectRedisDecides(limiter, () => scriptCallsAt(server));
    // Again with nothing else in flight: loaded exactly once more, and the request counted once.
    const control = server.client();
    await control.call('FUNCTION', 'FLUSH');
    const loads = await server.commandCount('function|load');
    expect((await limiter.consume('api', 'flushed')).allowed).to.equal(true);
    expect(await server.commandCount('function|load')).to.equal(loads + 1);
    expect((await limiter.status('api', 'flushed')).count).to.equal(1);
    expectContained('restart', samples, storeErrors, 'insurance', 'Redis deciding again after the restart');
  });

  it(`Redis paused (SIGSTOP) for 1 s: requests are answered by the policy once their store call times out, 'insurance' admits exactly ${LIMIT} of ${BURST}`, async () => {
    const server = await own(startRedis());
    const client = server.client(RECOMMENDED_REDIS_OPTIONS);
    await ready(client);
    const { limiter, storeErrors, traffic } = setup(client, 'insurance');
    traffic.start();
    await sleep(200);
    server.pause();
    const pausedAt = performance.now();
    let resumed = false;
    try {
      const outage = await traffic.burst('outage', BURST);
      expect(outage.filter((s) => s.allowed).length, 'outage key admitted').to.equal(LIMIT);
      await sleep(1000 - (performance.now() - pausedAt));
      server.resume();
      resumed = true;
    } finally {
      if (!resumed) server.resume();
    }
    await decidedByRedisAgain(limiter);
    await sleep(100);
    const samples = await traffic.stop();
    // The burst's commands were already in the socket: Redis runs them when it wakes up.
    const lateCount = (await limiter.status('api', 'outage')).count;
    expect(lateCount).to.be.at.most(LIMIT);
    // A paused server refuses nothing and closes nothing: every call it left unanswered was ended by a
    // timeout (the client's or the limiter's, same length), and the policy answered in its place.
    expect(
      storeErrors.map((e) => e.error.message).filter((message) => !TIMED_OUT.includes(message)),
      'causes other than a timeout',
    ).to.deep.equal([]);
    await expectRedisDecides(limiter, () => scriptCallsAt(server));
    expectContained(
      'pause',
      samples,
      storeErrors,
      'insurance',
      `outage key ${LIMIT}/${BURST} admitted by insurance, ${lateCount} counted again by Redis when it woke, ` +
        'Redis deciding again after SIGCONT',
    );
  });

  it(`Redis unreachable at start-up: 'insurance' limits from the first request, then Redis takes over once it listens`, async () => {
    const server = await own(startRedis());
    process.kill(server.pid, 'SIGKILL');
    await refused(server.port);
    // A limiter built on a client to a port nothing listens on.
    const client = server.client(RECOMMENDED_REDIS_OPTIONS);
    const { limiter, storeErrors, traffic } = setup(client, 'insurance');
    traffic.start();
    const outage = await traffic.burst('outage', BURST);
    await sleep(300);
    await server.restart();
    await decidedByRedisAgain(limiter);
    await sleep(100);
    const samples = await traffic.stop();

    expect(outage.filter((s) => s.allowed).length, 'outage key admitted').to.equal(LIMIT);
    await expectRedisDecides(limiter, () => scriptCallsAt(server));
    expectContained(
      'unreachable at start-up',
      samples,
      storeErrors,
      'insurance',
      `outage key ${LIMIT}/${BURST} admitted, Redis deciding once it started`,
    );
  });

  it(`Cluster master killed, its replica promoted: 'insurance' admits exactly ${LIMIT} for a key of the lost slots, then the new master decides`, async () => {
    const cluster = await own(startCluster({ replicas: 1 }));
    const cc = cluster.client(RECOMMENDED_CLUSTER_OPTIONS);
    await ready(cc);
    const victim = cluster.nodes.filter((node) => node.role === 'master')[0];
    if (victim === undefined) throw new Error('no master');
    const ranges = (await cc.cluster('SLOTS')).filter((range) => range[2]?.[1] === victim.port);
    const inVictim = (key: string) => {
      const slot = tagSlot(escapeIdentity(key));
      return ranges.some(([first, last]) => slot >= first && slot <= last);
    };
    const victimKey = (name: string) => {
      for (let i = 0; ; i++) if (inVictim(`${name}-${i}`)) return `${name}-${i}`;
    };
    const { limiter, storeErrors, traffic } = setup(cc, 'insurance');
    traffic.start();
    await sleep(200);
    const failover = cluster.killMaster(0);
    await refused(victim.port);
    const outage = await traffic.burst(victimKey('outage'), BURST);
    await failover;
    const probes: string[] = [];
    for (let i = 0; probes.length < 200; i++) if (inVictim(`probe-${i}`)) probes.push(`probe-${i}`);
    await decidedByRedisAgain(limiter, (i) => probes[i] ?? `probe-x${i}`);
    await sleep(100);
    const samples = await traffic.stop();

    expect(outage.filter((s) => s.allowed).length, 'outage key admitted').to.equal(LIMIT);
    await expectRedisDecides(limiter, () => cluster.commandCount('fcall'), victimKey('after'));
    expectContained(
      'Cluster failover',
      samples,
      storeErrors,
      'insurance',
      `outage key ${LIMIT}/${BURST} admitted, then the promoted replica deciding`,
    );
  });

  it(`Sentinel master killed and failed over: 'insurance' admits exactly ${LIMIT} during the failover, then the promoted replica decides`, async () => {
    const sentinel = await own(startSentinel());
    const client = sentinel.client(RECOMMENDED_REDIS_OPTIONS);
    await ready(client);
    const old = await sentinel.master();
    const { limiter, storeErrors, traffic } = setup(client, 'insurance');
    traffic.start();
    await sleep(200);
    const failover = sentinel.killMaster();
    await refused(old.port);
    const outage = await traffic.burst('outage', BURST);
    await failover;
    await decidedByRedisAgain(limiter);
    await sleep(100);
    const samples = await traffic.stop();

    const promoted = await sentinel.master();
    expect(promoted.port).to.not.equal(old.port);
    expect(outage.filter((s) => s.allowed).length, 'outage key admitted').to.equal(LIMIT);
    await expectRedisDecides(limiter, () => scriptCallsAt(promoted));
    expectContained(
      'Sentinel failover',
      samples,
      storeErrors,
      'insurance',
      `outage key ${LIMIT}/${BURST} admitted, then the promoted replica deciding`,
    );
  });

  describe('the recommended ioredis settings, each against the default it replaces', () => {
    /**
     * Loses the reply of one request: the client reaches Redis through a proxy that passes the request's
     * FCALL on (Redis runs the script and counts it), drops the reply and closes the client's connection
     * (the limiter's subscriber connects through the proxy too, and is left alone).
     * `settledOnClose`: whether the call had settled by the next turn of the event loop after the client
     * saw its connection close, i.e. the close itself ended it, rather than a later resend or a timeout.
     * Returns that, the decision, and the count Redis holds afterwards.
     * The limiter's storeTimeout is one no busy machine reaches: only the client's settings end the call.
     */
    async function loseOneReply(options: RedisOptions) {
      const server = await own(startRedis());
      const proxy = await own(startProxy(server));
      const client = server.client({ ...options, port: proxy.port });
      await ready(client);
      const { limiter, storeErrors } = setup(client, 'insurance', RULES, PATIENT.storeTimeout);
      // The script is loaded, and no failure has the limiter skip Redis (a warm-up that met the client's
      // commandTimeout on a busy machine would, and the victim's request would then never reach Redis).
      await decidedByRedisAgain(limiter, (i) => `warm-up-${i}`);
      storeErrors.length = 0;
      let settled = false;
      const closed = new Promise<boolean>((resolve) =>
        client.once('close', () => {
          setImmediate(() => resolve(settled));
        }),
      );
      const lost = proxy.loseNextReply('fcall');
      const decision = await limiter.consume('api', 'victim').finally(() => {
        settled = true;
      });
      await lost;
      const settledOnClose = await closed;
      // Status is an operator call: it throws while the client reconnects. ioredis resends the unanswered
      // commands, if it does, before it tells of 'ready': the status is sent after any resend.
      await ready(client);
      const count = (await limiter.status('api', 'victim')).count;
      return { decision, settledOnClose, count, storeErrors };
    }

    it('defaults: a reply lost to a dropped connection is resent on reconnect and counted twice, silently', async () => {
      const { decision, count, settledOnClose, storeErrors } = await loseOneReply({});
      console.log(
        `      defaults: one request, count ${count} in Redis, decision remaining ${decision.remaining}`,
      );
      expect(settledOnClose, 'still waiting for the resend when the connection closed').to.equal(false);
      expect(count, 'one request, counted').to.equal(2);
      expect(decision).to.include({ allowed: true, remaining: LIMIT - 2 });
      expect(storeErrors, 'nothing reported').to.deep.equal([]);
    });

    it('recommended: the call fails at once, the policy decides, and Redis counted the request once', async () => {
      const { decision, settledOnClose, count, storeErrors } = await loseOneReply(RECOMMENDED_REDIS_OPTIONS);
      console.log(
        `      recommended: count ${count} in Redis, decided by insurance as the connection closed`,
      );
      expect(count).to.equal(1);
      expect(decision).to.include({ allowed: true, remaining: LIMIT - 1 }); // the insurance store's first unit
      expect(settledOnClose, 'decided as the connection closed, not at a timeout').to.equal(true);
      expect(storeErrors.map((e) => e.error.name)).to.deep.equal(['MaxRetriesPerRequestError']);
      expect(unhandled).to.deep.equal([]);
    });

    it('autoResendUnfulfilledCommands: false alone also counts once, but the call then ends only at commandTimeout', async () => {
      const { count, settledOnClose, storeErrors } = await loseOneReply({
        autoResendUnfulfilledCommands: false,
        commandTimeout: STORE_TIMEOUT_MS,
      });
      console.log(`      resend off alone: count ${count}, decided once a timeout ended the call`);
      expect(count).to.equal(1);
      expect(settledOnClose, 'the close left the call waiting').to.equal(false);
      // ioredis's commandTimeout and the limiter's storeTimeout have the same length here: under load
      // either timer may fire first, and both end the call the same way.
      expect(storeErrors).to.have.length(1);
      expect(storeErrors[0]?.error.message).to.be.oneOf(TIMED_OUT);
    });

    it('enableOfflineQueue: false: requests answered by the policy during an outage are not replayed into Redis later', async () => {
      const counts: Record<string, number> = {};
      for (const [name, options] of [
        ['defaults', {}],
        ['recommended', RECOMMENDED_REDIS_OPTIONS],
      ] as const) {
        const server = await own(startRedis());
        const client = server.client(options);
        await ready(client);
        const rules: Rule[] = [{ name: 'api', key: 'ip', limit: 100, window: { type: 'fixed', size: '1m' } }];
        const { limiter } = setup(client, 'insurance', rules);
        await limiter.consume('api', 'warm-up');
        const closed = next(client, 'close');
        process.kill(server.pid, 'SIGKILL');
        await closed;
        const decisions = await Promise.all(
          Array.from({ length: 10 }, () => limiter.consume('api', 'queued')),
        );
        expect(decisions.every((d) => d.allowed)).to.equal(true);
        await server.restart();
        // ioredis replays its offline queue, if it has one, before it tells of 'ready'.
        await ready(client);
        counts[name] = (await limiter.status('api', 'queued')).count;
      }
      console.log(
        `      Redis count of 10 requests answered by insurance while Redis was down: ${JSON.stringify(counts)}`,
      );
      expect(counts).to.deep.equal({ defaults: 10, recommended: 0 });
    });

    it('commandTimeout: on a paused server the store call itself fails after commandTimeout, so nothing lingers in ioredis', async () => {
      const server = await own(startRedis());
      const client = server.client(RECOMMENDED_REDIS_OPTIONS);
      await ready(client);
      const store = new RedisStore({ client, prefix: 'ct' });
      cleanups.push(() => store.close());
      const rule = compileRules(RULES, { ipv6Subnet: 64 })[0] as CompiledRule;
      const op: StoreOp = { rule: rule.store, key: 'k', cost: 1, limit: rule.limit as number };
      await store.evaluate([op], 'check');
      server.pause();
      try {
        // The store alone, with no limiter and so no storeTimeout around it: only the client's
        // commandTimeout can end this call, and it ends it with its own error.
        const error = await store.evaluate([op], 'check').then(
          () => undefined,
          (e: Error) => e,
        );
        expect(error?.message).to.equal('Command timed out');
      } finally {
        server.resume();
      }
    });

    it('retryStrategy: through a 3 s outage the client keeps reconnecting, at most 2 s apart, and Redis decides again once back', async function () {
      this.timeout(30_000);
      const server = await own(startRedis());
      const client = server.client(RECOMMENDED_REDIS_OPTIONS);
      await ready(client);
      const { limiter, storeErrors } = setup(client, 'insurance');
      // ioredis tells of each reconnect it schedules, with the delay retryStrategy gave it.
      const delays: number[] = [];
      client.on('reconnecting', (delayMs: number) => delays.push(delayMs));
      const closed = next(client, 'close');
      process.kill(server.pid, 'SIGKILL');
      await closed;
      await sleep(3000); // the outage: long enough for the backoff to grow
      await limiter.consume('api', 'down');
      const downAttempts = delays.length;
      const back = next(client, 'ready');
      await server.restart();
      // The next scheduled attempt reaches the server (the test's timeout only ends a hang).
      await back;
      await decidedByRedisAgain(limiter);
      console.log(`      reconnect delays through the outage, ms: ${delays.join(', ')}`);
      expect(downAttempts, 'reconnect attempts while Redis was down').to.be.at.least(2);
      expect(delays, 'backing off by 100 ms an attempt, capped at 2 s').to.deep.equal(
        delays.map((_, i) => Math.min((i + 1) * 100, 2000)),
      );
      expect(storeErrors.length).to.be.greaterThan(0);
    });
  });

  describe('failure policy details', () => {
    it("'allow' consumes nothing when it admits, so reporting that request later refunds nothing in Redis (regression)", async () => {
      const server = await own(startRedis());
      process.kill(server.pid, 'SIGKILL');
      await refused(server.port);
      // Redis down: the first request fails and 'allow' admits it.
      const client = server.client(RECOMMENDED_REDIS_OPTIONS);
      const rules: Rule[] = [
        { name: 'api', key: 'ip', limit: 2, window: { type: 'gcra', size: '1h' }, countOn: 'failure' },
      ];
      const { limiter, storeErrors } = setup(client, 'allow', rules);
      const admittedByPolicy = await limiter.consume('api', 'user');
      expect(admittedByPolicy.allowed).to.equal(true);
      expect(storeErrors.length).to.equal(1);
      await server.restart();
      await ready(client);
      await sleep(RETRY_MS + 50);
      for (let i = 0; i < 2; i++) {
        const decision = await limiter.consume('api', 'user');
        expect(decision.allowed).to.equal(true);
        await limiter.report(decision, 'failure');
      }
      expect((await limiter.consume('api', 'user')).allowed, 'limit reached in Redis').to.equal(false);
      // Before the fix this gave back a unit the request never took, and a third failure got through.
      await limiter.report(admittedByPolicy, 'success');
      expect((await limiter.consume('api', 'user')).allowed).to.equal(false);
      expect((await limiter.status('api', 'user')).count).to.equal(2);
    });

    it("Redis out of memory (noeviction): the script's write fails, 'deny' refuses, and Redis counted nothing", async () => {
      const server = await own(startRedis());
      const client = server.client(RECOMMENDED_REDIS_OPTIONS);
      const control = server.client();
      await Promise.all([ready(client), ready(control)]);
      const { limiter, storeErrors } = setup(client, 'deny');
      expect((await limiter.consume('api', 'k')).remaining).to.equal(LIMIT - 1);
      await control.config('SET', 'maxmemory', '1');
      const decision = await limiter.consume('api', 'k');
      await control.config('SET', 'maxmemory', '0');
      expect(decision).to.include({ allowed: false, remaining: 0 });
      expect(storeErrors.map((e) => e.error.message)).to.have.length(1);
      expect(storeErrors[0]?.error.message).to.match(/^OOM command not allowed/);
      expect((await limiter.status('api', 'k')).count, 'the failed request left no trace').to.equal(1);
    });

    it('storeError events name the operation: check, peek, record (with the policy) and report (policy none)', async () => {
      const server = await own(startRedis());
      const client = server.client(RECOMMENDED_REDIS_OPTIONS);
      await ready(client);
      const rules: Rule[] = [
        { name: 'api', key: 'ip', limit: 5, window: { type: 'fixed', size: '1m' }, countOn: 'failure' },
      ];
      const storeErrors: StoreErrorEvent[] = [];
      const limiter = createLimiter({
        store: new RedisStore({ client, prefix: 'events' }),
        rules,
        onStoreError: 'deny',
        storeRetryInterval: 1, // every call below tries Redis
      });
      cleanups.push(() => limiter.close());
      limiter.on('storeError', (event) => storeErrors.push(event));
      const admitted = await limiter.consume('api', 'k');
      expect(admitted.allowed).to.equal(true);
      client.disconnect(); // every command now fails at once
      const req = { method: 'GET', path: '/', ip: '10.0.0.1', headers: {} };
      expect((await limiter.check(req)).allowed).to.equal(false);
      await sleep(5);
      expect((await limiter.peek(req)).allowed).to.equal(false);
      await sleep(5);
      expect((await limiter.record('api', 'k')).allowed).to.equal(false);
      await limiter.report(admitted, 'success');
      expect(storeErrors.map((e) => [e.operation, e.policy])).to.deep.equal([
        ['check', 'deny'],
        ['peek', 'deny'],
        ['record', 'deny'],
        ['report', 'none'],
      ]);
      // ioredis says either, depending on how far its shutdown has come.
      const closed =
        /^(Stream isn't writeable and enableOfflineQueue options is false|Connection is closed\.)$/;
      for (const event of storeErrors) expect(event.error.message).to.match(closed);
      // Operator calls throw instead: there is no decision to fall back to.
      await limiter.status('api', 'k').then(
        () => expect.fail('status answered without Redis'),
        (error: Error) => expect(error.message).to.match(closed),
      );
    });
  });

  describe('debug log', () => {
    it('a debug function receives decisions, cached denials, policy decisions and store errors, keys quoted', async () => {
      const server = await own(startRedis());
      const client = server.client(RECOMMENDED_REDIS_OPTIONS);
      await ready(client);
      const lines: string[] = [];
      const limiter = createLimiter({
        store: new RedisStore({ client, prefix: 'debug' }),
        rules: [{ name: 'api', key: 'ip', limit: 1, window: { type: 'fixed', size: '1m' } }],
        onStoreError: 'insurance',
        debug: (line) => lines.push(line),
      });
      cleanups.push(() => limiter.close());
      const forged = 'x\nratekeeper check allowed api["admin"]=1/1';
      await limiter.consume('api', forged);
      await limiter.consume('api', forged); // denied by Redis, cached
      await limiter.consume('api', forged); // from the deny cache
      client.disconnect();
      await limiter.consume('api', 'y');
      const quoted = JSON.stringify(forged);
      expect(lines).to.have.length(5);
      expect(lines[3]).to.match(
        /^store error during check \(insurance\): (Stream isn't writeable|Connection is closed)/,
      );
      expect([...lines.slice(0, 3), ...lines.slice(4)]).to.deep.equal([
        `check allowed by the store api[${quoted}]=0/1`,
        `check denied by the store api[${quoted}]=0/1`,
        `check denied from the deny cache api[${quoted}]=0/1`,
        'check allowed by the insurance store api["y"]=0/1',
      ]);
      expect(
        lines.some((line) => line.includes('\n')),
        'no line breaks inside a line',
      ).to.equal(false);
    });

    it('RATEKEEPER_DEBUG=1 writes the same lines to stderr', () => {
      const script = `import { createLimiter } from './src/index.ts';
        const l = createLimiter({ rules: [{ name: 'api', key: 'ip', limit: 1, window: { type: 'fixed', size: '1m' } }] });
        await l.consume('api', 'k'); await l.consume('api', 'k');`;
      const child = spawnSync(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', script], {
        env: { ...process.env, RATEKEEPER_DEBUG: '1' },
        timeout: 15_000,
        encoding: 'utf8',
      });
      expect(child.status, child.stderr).to.equal(0);
      expect(child.stderr).to.include(
        'ratekeeper check allowed by the store api["k"]=0/1\nratekeeper check denied by the store api["k"]=0/1\n',
      );
    });
  });
});
