// ratekeeper/prometheus: the registry's text output after known traffic, counted exactly, on the memory store and on a
// spawned Redis (store, deny cache, insurance during a real outage, the failure policy), and its option errors.
import { randomBytes } from 'node:crypto';
import { expect } from 'chai';
import type { Redis } from 'ioredis';
import { Histogram, Registry } from 'prom-client';
import {
  createLimiter,
  type Limiter,
  type LimiterObserver,
  type LimiterOptions,
  RedisStore,
  type Rule,
} from '../../src/index.js';
import { prometheusMetrics } from '../../src/operators/prometheus.js';
import { RECOMMENDED_REDIS_OPTIONS } from '../fixtures/redis-options.js';
import { getRedis, type RedisServer, startRedis } from '../support/redis.js';
import { PATIENT } from '../support/settle.js';

const LOGIN: Rule = {
  name: 'login',
  key: 'body.user',
  limit: 2,
  window: { type: 'fixed', size: '1m' },
  lockout: { duration: '10m' },
};
const API: Rule = { name: 'api', key: 'ip', limit: 3, window: { type: 'fixed', size: '1m' } };
const SHADOW: Rule = {
  name: 'shadow',
  key: 'ip',
  limit: 1,
  window: { type: 'fixed', size: '1m' },
  mode: 'dry-run',
};

/** The sample lines of the text output (no HELP/TYPE), with their values, for the metric names starting `name`. */
async function samples(registry: Registry, name: string): Promise<string[]> {
  const text = await registry.metrics();
  return text.split('\n').filter((line) => line.startsWith(`${name}{`) || line.startsWith(`${name} `));
}

/** `{a="x",b="y"}` of the decisions counter, as the text output writes it. */
const decisions = (rule: string, result: string, source: string, value: number) =>
  `ratekeeper_decisions_total{rule="${rule}",result="${result}",source="${source}"} ${value}`;

async function ready(client: Redis): Promise<void> {
  if (client.status !== 'ready') await new Promise<void>((resolve) => client.once('ready', () => resolve()));
}

describe('ratekeeper/prometheus', () => {
  const cleanups: Array<() => unknown> = [];
  afterEach(async () => {
    for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
  });
  function limiterOf(options: LimiterOptions): Limiter {
    const limiter = createLimiter(options);
    cleanups.push(() => limiter.close());
    return limiter;
  }
  const prefix = () => `prom${randomBytes(4).toString('hex')}`;

  it('memory store: decisions per rule by result (allowed, denied, locked, dry_run), lockouts, no store calls; peek not counted', async () => {
    const limiter = limiterOf({
      rules: [
        { ...LOGIN, match: 'POST /login' },
        { ...API, match: 'GET /api' },
        { ...SHADOW, match: 'GET /api' },
      ],
    });
    const registry = new Registry();
    prometheusMetrics(limiter, { registry });
    const login = { method: 'POST', path: '/login', ip: '192.0.2.1', headers: {}, body: { user: 'ann' } };
    const api = { method: 'GET', path: '/api', ip: '192.0.2.1', headers: {} };
    // login: 2 allowed, the 3rd exceeds and places the lock (locked), 2 more locked.
    for (let i = 0; i < 5; i++) await limiter.check(login);
    // api (limit 3) and shadow (dry-run, limit 1) decided together: api 3 allowed then 1 denied;
    // shadow allows the first, would deny the next 2 (dry_run), and on the 4th api's denial consumes
    // nothing, so shadow still says it would deny.
    for (let i = 0; i < 4; i++) await limiter.check(api);
    await limiter.peek(api);
    await limiter.peek(login);

    expect(await samples(registry, 'ratekeeper_decisions_total')).to.have.members([
      decisions('login', 'allowed', 'store', 2),
      decisions('login', 'denied', 'store', 0),
      decisions('login', 'locked', 'store', 3),
      decisions('api', 'allowed', 'store', 3),
      decisions('api', 'denied', 'store', 1),
      decisions('shadow', 'allowed', 'store', 1),
      decisions('shadow', 'denied', 'store', 0),
      decisions('shadow', 'dry_run', 'store', 3),
    ]);
    expect(await samples(registry, 'ratekeeper_lockouts_total')).to.deep.equal([
      'ratekeeper_lockouts_total{rule="login"} 1',
    ]);
    expect(
      await samples(registry, 'ratekeeper_store_seconds_count'),
      'the memory store is not timed',
    ).to.deep.equal([]);
    expect(await samples(registry, 'ratekeeper_store_errors_total')).to.deep.equal([]);

    // A scrape reports what was counted since, never twice.
    await limiter.consume('api', 'other');
    await limiter.record('login', 'bob', 5);
    expect(await samples(registry, 'ratekeeper_decisions_total')).to.include.members([
      decisions('api', 'allowed', 'store', 4),
      decisions('login', 'locked', 'store', 4),
    ]);
    expect(await samples(registry, 'ratekeeper_lockouts_total')).to.deep.equal([
      'ratekeeper_lockouts_total{rule="login"} 2',
    ]);

    // Rule-wide limits set and cleared through the limiter: counted per rule, from zero.
    expect(await samples(registry, 'ratekeeper_limit_changes_total')).to.include.members([
      'ratekeeper_limit_changes_total{rule="api"} 0',
    ]);
    await limiter.setLimit('api', 50, { for: '1h' });
    await limiter.setLimit('api', null);
    expect(await samples(registry, 'ratekeeper_limit_changes_total')).to.include.members([
      'ratekeeper_limit_changes_total{rule="api"} 2',
      'ratekeeper_limit_changes_total{rule="login"} 0',
    ]);
  });

  it('concurrency: slots in flight per rule (a gauge), released and lapsed slots; stop() takes its slots off the gauge', async () => {
    const EXPORTS: Rule = {
      name: 'exports',
      key: 'user',
      limit: 3,
      window: { type: 'concurrency', lease: '1m' },
    };
    const registry = new Registry();
    const limiter = limiterOf({ rules: [EXPORTS, API] });
    prometheusMetrics(limiter, { registry });
    // Series from the start, for the concurrency rule only.
    expect(await samples(registry, 'ratekeeper_slots_in_flight')).to.deep.equal([
      'ratekeeper_slots_in_flight{rule="exports"} 0',
    ]);
    expect(await samples(registry, 'ratekeeper_slots_total')).to.have.members([
      'ratekeeper_slots_total{rule="exports",change="released"} 0',
      'ratekeeper_slots_total{rule="exports",change="lapsed"} 0',
    ]);
    const a = await limiter.consume('exports', 'ann');
    const b = await limiter.consume('exports', 'ann', 2);
    expect((await limiter.consume('exports', 'ann')).allowed).to.equal(false);
    await limiter.consume('exports', 'bob');
    expect(await samples(registry, 'ratekeeper_slots_in_flight')).to.deep.equal([
      'ratekeeper_slots_in_flight{rule="exports"} 4',
    ]);
    await limiter.release(b);
    await limiter.release(b);
    expect(await samples(registry, 'ratekeeper_slots_in_flight')).to.deep.equal([
      'ratekeeper_slots_in_flight{rule="exports"} 2',
    ]);
    expect(await samples(registry, 'ratekeeper_slots_total')).to.include.members([
      'ratekeeper_slots_total{rule="exports",change="released"} 2',
    ]);
    // A second limiter on the registry adds its slots; stopped, it takes them off (they are counted no more).
    const other = limiterOf({ rules: [EXPORTS] });
    const counted = prometheusMetrics(other, { registry });
    await other.consume('exports', 'carol');
    expect(await samples(registry, 'ratekeeper_slots_in_flight')).to.deep.equal([
      'ratekeeper_slots_in_flight{rule="exports"} 3',
    ]);
    counted.stop();
    expect(await samples(registry, 'ratekeeper_slots_in_flight')).to.deep.equal([
      'ratekeeper_slots_in_flight{rule="exports"} 2',
    ]);
    // Closed while holding two slots (ann's first, bob's): they lapse in the store a lease later.
    expect(a.allowed).to.equal(true);
    await limiter.close();
    expect(await samples(registry, 'ratekeeper_slots_in_flight')).to.deep.equal([
      'ratekeeper_slots_in_flight{rule="exports"} 0',
    ]);
    expect(await samples(registry, 'ratekeeper_slots_total')).to.have.members([
      'ratekeeper_slots_total{rule="exports",change="released"} 2',
      'ratekeeper_slots_total{rule="exports",change="lapsed"} 2',
    ]);
  });

  it('prefix replaces ratekeeper_; two limiters on one registry add up, one asked twice counts once; stop() keeps the counts and counts no more', async () => {
    const registry = new Registry();
    const a = limiterOf({ rules: [API] });
    const b = limiterOf({ rules: [API, LOGIN] });
    const metricsA = prometheusMetrics(a, { registry, prefix: 'shop_rl_' });
    prometheusMetrics(b, { registry, prefix: 'shop_rl_' });
    expect(
      prometheusMetrics(a, { registry, prefix: 'shop_rl_' }),
      'asked again: the same, counted once',
    ).to.equal(metricsA);
    expect(metricsA.registry).to.equal(registry);
    await a.consume('api', 'x');
    await b.consume('api', 'x');
    await b.consume('login', 'y');
    const text = await registry.metrics();
    expect(text).not.to.include('ratekeeper_');
    expect(text).to.include('shop_rl_decisions_total{rule="api",result="allowed",source="store"} 2\n');
    expect(text).to.include('shop_rl_decisions_total{rule="login",result="allowed",source="store"} 1\n');
    expect(text).to.include('# TYPE shop_rl_store_seconds histogram');

    await a.consume('api', 'x');
    metricsA.stop();
    await a.consume('api', 'x');
    expect(await registry.metrics()).to.include(
      'shop_rl_decisions_total{rule="api",result="allowed",source="store"} 3\n',
    );

    // An empty prefix: bare names; the global registry by default.
    const bare = new Registry();
    prometheusMetrics(a, { registry: bare, prefix: '' });
    await a.consume('login', 'z').catch(() => {});
    expect(await bare.metrics()).to.include('# TYPE decisions_total counter');
  });

  it('label values are rule names and fixed words, never keys', async () => {
    const limiter = limiterOf({ rules: [API] });
    const registry = new Registry();
    prometheusMetrics(limiter, { registry });
    const hostile = '<script>"}\\n 1e9 {x="';
    for (let i = 0; i < 5; i++) await limiter.consume('api', `${hostile}${i}`);
    const text = await registry.metrics();
    expect(text).not.to.include('script');
    expect(await samples(registry, 'ratekeeper_decisions_total')).to.have.members([
      decisions('api', 'allowed', 'store', 5),
      decisions('api', 'denied', 'store', 0),
    ]);
  });

  it('refuses a bad limiter, option, prefix, bucket list, or a registry holding a metric of the same name', () => {
    const limiter = limiterOf({ rules: [API] });
    const registry = new Registry();
    expect(() => prometheusMetrics({} as Limiter)).to.throw(
      /expects a limiter \(createLimiter\(\.\.\.\)\), got/,
    );
    expect(() => prometheusMetrics(limiter, { registry, prefx: 'x' } as never)).to.throw(
      "prometheusMetrics: unknown field 'prefx' (got 'x'), did you mean 'prefix'?",
    );
    expect(() => prometheusMetrics(limiter, { registry, prefix: 'my-app' })).to.throw(
      /prefix must be letters, digits, '_' or ':' .*got 'my-app'/,
    );
    expect(() => prometheusMetrics(limiter, { registry, buckets: [0.1, 0.01] })).to.throw(
      /buckets must be increasing positive numbers of seconds/,
    );
    expect(() => prometheusMetrics(limiter, { registry: {} as Registry })).to.throw(
      /registry must be a prom-client Registry/,
    );
    const taken = new Registry();
    taken.registerMetric({ name: 'ratekeeper_lockouts_total', get: async () => ({}) } as never);
    expect(() => prometheusMetrics(limiter, { registry: taken })).to.throw(
      "prometheusMetrics: the registry already has a metric named 'ratekeeper_lockouts_total' not made by prometheusMetrics; pass another prefix or registry",
    );
    // registry.clear() drops them: they are made anew.
    prometheusMetrics(limiter, { registry });
    registry.clear();
    prometheusMetrics(limiter, { registry });
    expect(registry.getMetricsAsArray().map((m) => m.name)).to.have.lengthOf(7);
  });

  it("the store-call histogram prints as prom-client's own Histogram does for the same observations", async () => {
    // A stand-in limiter whose hooks the test calls with chosen durations.
    let hooks: LimiterObserver = {};
    const fake = {
      rules: [],
      ruleFacts: [],
      observe: (observer: LimiterObserver) => {
        hooks = observer;
        return () => {};
      },
    };
    const registry = new Registry();
    prometheusMetrics(fake as unknown as Limiter, { registry, buckets: [0.001, 0.01, 0.1] });
    const reference = new Registry();
    const histogram = new Histogram({
      name: 'ratekeeper_store_seconds',
      help: 'x',
      labelNames: ['operation'],
      buckets: [0.001, 0.01, 0.1],
      registers: [reference],
    });
    const calls: Array<[string, number]> = [
      ['check', 0.0004],
      ['check', 0.001], // on a bound: counted in it (le)
      ['check', 0.05],
      ['check', 3],
      ['report', 0.002],
    ];
    for (const [operation, seconds] of calls) {
      hooks.storeCall?.({ operation, seconds });
      histogram.observe({ operation }, seconds);
    }
    const lines = async (r: Registry) =>
      (await r.metrics()).split('\n').filter((line) => line.startsWith('ratekeeper_store_seconds_'));
    expect(await lines(registry)).to.deep.equal(await lines(reference));
    expect(await lines(registry)).to.include(
      'ratekeeper_store_seconds_bucket{le="0.01",operation="check"} 2',
    );
    const json = await registry.getMetricsAsJSON();
    expect(json.find((m) => m.name === 'ratekeeper_store_seconds')?.type).to.equal('histogram');
    registry.resetMetrics();
    expect(await lines(registry)).to.deep.equal([]);
  });

  describe('on a spawned Redis', () => {
    async function redisClient(server?: RedisServer): Promise<Redis> {
      // The recommended settings, without a commandTimeout a busy machine could reach: every count below
      // is of calls that Redis answered, or that failed at once because it was stopped.
      const client = (server ?? (await getRedis())).client({
        ...RECOMMENDED_REDIS_OPTIONS,
        commandTimeout: PATIENT.storeTimeout,
      });
      cleanups.push(() => client.disconnect());
      await ready(client);
      return client;
    }

    it('store and deny-cache decisions, one timed store call each (check, report, reset, status, locked), lockouts', async () => {
      const client = await redisClient();
      const limiter = limiterOf({
        ...PATIENT,
        rules: [LOGIN, { ...API, countOn: 'failure' }],
        store: new RedisStore({ client, prefix: prefix() }),
      });
      const registry = new Registry();
      prometheusMetrics(limiter, { registry });
      // 2 allowed, 1 placing the lock, 1 locked answered by the deny cache (on by default with Redis)
      for (let i = 0; i < 4; i++) await limiter.consume('login', 'ann');
      const admitted = await limiter.consume('api', '192.0.2.7');
      await limiter.report(admitted, 'success'); // countOn failure: the reservation goes back (a 'report' call)
      await limiter.status('login', 'ann');
      await limiter.locked('login');
      await limiter.reset('login', 'ann');
      expect((await limiter.consume('login', 'ann')).allowed).to.equal(true);

      expect(await samples(registry, 'ratekeeper_decisions_total')).to.have.members([
        decisions('login', 'allowed', 'store', 3),
        decisions('login', 'denied', 'store', 0),
        decisions('login', 'locked', 'store', 1),
        decisions('login', 'locked', 'deny_cache', 1),
        decisions('api', 'allowed', 'store', 1),
        decisions('api', 'denied', 'store', 0),
      ]);
      expect(await samples(registry, 'ratekeeper_lockouts_total')).to.deep.equal([
        'ratekeeper_lockouts_total{rule="login"} 1',
      ]);
      expect(await samples(registry, 'ratekeeper_store_seconds_count')).to.have.members([
        'ratekeeper_store_seconds_count{operation="check"} 5',
        'ratekeeper_store_seconds_count{operation="report"} 1',
        'ratekeeper_store_seconds_count{operation="status"} 1',
        'ratekeeper_store_seconds_count{operation="locked"} 1',
        'ratekeeper_store_seconds_count{operation="reset"} 1',
      ]);
      const inf = await samples(registry, 'ratekeeper_store_seconds_bucket');
      expect(inf).to.include('ratekeeper_store_seconds_bucket{le="+Inf",operation="check"} 5');
      // Error series exist from the first store call, at zero.
      const errors = await samples(registry, 'ratekeeper_store_errors_total');
      expect(errors).to.include('ratekeeper_store_errors_total{operation="check"} 0');
      expect(errors.every((line) => line.endsWith(' 0'))).to.equal(true);
    });

    it('the deny cache as a source: a known denial answered without a store call', async () => {
      const client = await redisClient();
      const limiter = limiterOf({
        ...PATIENT,
        rules: [{ ...API, limit: 1, window: { type: 'fixed', size: '10m' } }],
        store: new RedisStore({ client, prefix: prefix() }),
        denyCache: true,
      });
      const registry = new Registry();
      prometheusMetrics(limiter, { registry });
      await limiter.consume('api', 'k'); // allowed by Redis
      await limiter.consume('api', 'k'); // denied by Redis, remembered
      for (let i = 0; i < 3; i++) await limiter.consume('api', 'k'); // the deny cache
      expect(await samples(registry, 'ratekeeper_decisions_total')).to.have.members([
        decisions('api', 'allowed', 'store', 1),
        decisions('api', 'denied', 'store', 1),
        decisions('api', 'denied', 'deny_cache', 3),
      ]);
      expect(await samples(registry, 'ratekeeper_store_seconds_count')).to.deep.equal([
        'ratekeeper_store_seconds_count{operation="check"} 2',
      ]);
    });

    it('a real outage (the server stopped): store errors by operation, then the insurance store or the policy answers', async () => {
      for (const [onStoreError, source] of [
        ['insurance', 'insurance'],
        ['allow', 'policy'],
      ] as const) {
        const server = await startRedis();
        cleanups.push(() => server.stop());
        const client = await redisClient(server);
        const limiter = limiterOf({
          ...PATIENT,
          rules: [API],
          store: new RedisStore({ client, prefix: prefix() }),
          onStoreError,
          storeRetryInterval: '1h', // after the first failure decisions skip the store: exact counts
        });
        const registry = new Registry();
        prometheusMetrics(limiter, { registry });
        await limiter.consume('api', 'k');
        await server.stop();
        for (let i = 0; i < 5; i++) await limiter.consume('api', 'k');
        await limiter.status('api', 'k').catch(() => {}); // fails too: a 'status' error
        const expected =
          source === 'insurance'
            ? // the insurance store starts empty: 3 allowed, then 2 denied
              [decisions('api', 'allowed', 'insurance', 3), decisions('api', 'denied', 'insurance', 2)]
            : [decisions('api', 'allowed', 'policy', 5)];
        expect(await samples(registry, 'ratekeeper_decisions_total'), onStoreError).to.have.members([
          decisions('api', 'allowed', 'store', 1),
          decisions('api', 'denied', 'store', 0),
          ...expected,
        ]);
        const errors = await samples(registry, 'ratekeeper_store_errors_total');
        expect(errors, onStoreError).to.include.members([
          'ratekeeper_store_errors_total{operation="check"} 1',
          'ratekeeper_store_errors_total{operation="status"} 1',
          'ratekeeper_store_errors_total{operation="report"} 0',
        ]);
        expect(await samples(registry, 'ratekeeper_store_seconds_count'), onStoreError).to.have.members([
          'ratekeeper_store_seconds_count{operation="check"} 2',
          'ratekeeper_store_seconds_count{operation="status"} 1',
        ]);
      }
    });
  });
});
