// RedisStore over HTTP (@upstash/redis) beyond the conformance suite: scripts by EVALSHA and their reload, the
// REST endpoint failing (HTTP 500, a wrong token, a body that is not JSON, down, silent) under the failure
// policy, exactness under hundreds of requests in flight, what replaces pub/sub, and apps on Hono and fetch.
import { randomBytes } from 'node:crypto';
import { Redis } from '@upstash/redis';
import { expect } from 'chai';
import { Hono } from 'hono';
import { withRateLimit } from '../../../../adapters/fetch.js';
import { rateLimit } from '../../../../adapters/hono.js';
import {
  createLimiter,
  type Limiter,
  type LimiterOptions,
  MemoryStore,
  RateLimitConfigError,
  RedisStore,
  type Rule,
  type StoreErrorEvent,
} from '../../../../src/index.js';
import { freePort, type RedisServer, startRedis } from '../../../support/redis.js';
import { PATIENT } from '../../../support/settle.js';
import { startUpstashRest, type UpstashRest } from '../../../support/upstash-rest.js';
import { fakeClock } from '../../conformance/suite.js';

const prefix = () => `rku${randomBytes(4).toString('hex')}`;
const hourly = (limit: number): Rule => ({
  name: 'api',
  key: 'header:x-key',
  limit,
  window: { type: 'fixed', size: '1h' },
});
const request = (key: string) => ({ method: 'GET', path: '/', headers: { 'x-key': key } });

describe('RedisStore over HTTP (@upstash/redis)', () => {
  let server: RedisServer;
  let rest: UpstashRest;
  const limiters: Limiter[] = [];
  const upstash = (options: { token?: string } = {}) =>
    new Redis({ url: rest.url, token: rest.token, enableTelemetry: false, ...options });
  function limiter(
    client: Redis,
    rules: Rule[],
    options: Partial<LimiterOptions> = {},
    store: Partial<ConstructorParameters<typeof RedisStore>[0]> = {},
  ): Limiter {
    const l = createLimiter({
      store: new RedisStore({ client, prefix: store.prefix ?? prefix(), ...store }),
      rules,
      ...PATIENT,
      ...options,
    });
    limiters.push(l);
    return l;
  }

  before(async () => {
    server = await startRedis();
    rest = await startUpstashRest({ redisPort: server.port });
  });
  afterEach(async () => {
    rest.answer('redis');
    await Promise.all(limiters.splice(0).map((l) => l.close()));
  });
  after(async () => {
    await rest.close();
    await server.stop();
  });

  describe('scripts', () => {
    it('runs every script by EVALSHA, never loads a function library, and reloads by EVAL after SCRIPT FLUSH', async () => {
      const l = limiter(upstash(), [hourly(10)]);
      expect((await l.check(request('a'))).remaining).to.equal(9);
      const evals = rest.commands('EVAL');
      const shas = rest.commands('EVALSHA');
      expect((await l.check(request('a'))).remaining).to.equal(8);
      expect(rest.commands('EVALSHA')).to.equal(shas + 1);
      expect(rest.commands('EVAL')).to.equal(evals);
      await server.client().script('FLUSH');
      // NOSCRIPT, then EVAL (which caches the script again): the decision is the one it would have been.
      expect((await l.check(request('a'))).remaining).to.equal(7);
      expect(rest.commands('EVAL')).to.equal(evals + 1);
      expect((await l.check(request('a'))).remaining).to.equal(6);
      expect(rest.commands('EVAL')).to.equal(evals + 1);
      expect(rest.commands('FUNCTION')).to.equal(0);
      expect(rest.commands('FCALL')).to.equal(0);
    });

    it('decides a check in one HTTP request once the script is cached', async () => {
      const l = limiter(upstash(), [hourly(10), { ...hourly(100), name: 'day' }]);
      await l.check(request('b'));
      const before = rest.requests;
      await l.check(request('b'));
      expect(rest.requests - before).to.equal(1);
    });
  });

  describe('the REST endpoint failing, under the failure policy', () => {
    function watched(client: Redis, options: Partial<LimiterOptions>, store = {}) {
      const errors: StoreErrorEvent[] = [];
      const l = limiter(client, [hourly(5)], { storeRetryInterval: 1, ...options }, store);
      l.on('storeError', (event) => errors.push(event));
      return { l, errors };
    }

    for (const [mode, says] of [
      ['http-500', /Unable to parse response body/],
      ['malformed-json', /Unable to parse response body/],
    ] as const) {
      it(`${mode}: fails closed with 'deny', open with 'allow', and names the fault without the command`, async () => {
        rest.answer(mode);
        const closed = watched(upstash(), { onStoreError: 'deny' });
        const open = watched(upstash(), { onStoreError: 'allow' });
        expect((await closed.l.check(request('secret-key-1'))).allowed).to.equal(false);
        expect((await open.l.check(request('secret-key-1'))).allowed).to.equal(true);
        for (const { errors } of [closed, open]) {
          const error = errors.find((e) => e.operation === 'check')?.error;
          expect(error?.message).to.match(says);
          expect(error?.message).not.to.include('secret-key-1');
          expect(error?.message).not.to.include('command was');
        }
      });
    }

    it('a wrong token: every decision fails with WRONGPASS, into the insurance store', async () => {
      const own = prefix();
      const { l, errors } = watched(
        upstash({ token: 'not-the-token' }),
        { onStoreError: 'insurance' },
        { prefix: own },
      );
      for (let i = 0; i < 5; i++) expect((await l.check(request('k'))).allowed).to.equal(true);
      // The insurance store counts in this process: the sixth is denied there.
      expect((await l.check(request('k'))).allowed).to.equal(false);
      const error = errors.find((e) => e.operation === 'check')?.error as Error & { code?: string };
      expect(error.code).to.equal('WRONGPASS');
      expect(error.message).to.equal('WRONGPASS invalid or missing auth token');
      expect(await server.client().keys(`${own}*`)).to.deep.equal([]);
    });

    it('the endpoint down (connection refused, no retries): fails at once naming ECONNREFUSED', async () => {
      const port = await freePort();
      const client = new Redis({ url: `http://127.0.0.1:${port}`, token: 't', retry: false });
      const { l, errors } = watched(client, { onStoreError: 'deny' });
      expect((await l.check(request('k'))).allowed).to.equal(false);
      const error = errors.find((e) => e.operation === 'check')?.error as Error & { code?: string };
      expect(error.code).to.equal('ECONNREFUSED');
      expect(error.message).to.include('ECONNREFUSED');
    });

    it("the endpoint down with the client's retries: the request ends at requestTimeoutMs, its retries with it", async () => {
      const port = await freePort();
      const client = new Redis({ url: `http://127.0.0.1:${port}`, token: 't' });
      const { l, errors } = watched(client, { onStoreError: 'deny' }, { requestTimeoutMs: 300 });
      expect((await l.check(request('k'))).allowed).to.equal(false);
      const error = errors.find((e) => e.operation === 'check')?.error as Error & { code?: string };
      expect(error.code).to.equal('ETIMEDOUT');
    });

    it('silent: the decision fails at storeTimeout, and the request is aborted at requestTimeoutMs, never run', async () => {
      const l = limiter(upstash(), [hourly(5)], { onStoreError: 'deny' });
      // Scripts cached before the endpoint goes silent: what hangs is a decision's own request.
      await l.check(request('warm'));
      const silent = limiter(
        upstash(),
        [hourly(5)],
        { onStoreError: 'deny', storeTimeout: 100 },
        { requestTimeoutMs: 400 },
      );
      rest.answer('hang');
      const shas = rest.commands('EVALSHA');
      const sent = rest.requests;
      expect((await silent.check(request('k'))).allowed).to.equal(false);
      await rest.untilRequests(sent + 1);
      // Every request held is closed by the client: aborted, not left hanging.
      await rest.untilNoneHeld();
      expect(rest.commands('EVALSHA')).to.equal(shas);
      rest.answer('redis');
      // Answering again: the same store decides, and nothing was counted for the request given up on.
      expect((await l.check(request('k'))).remaining).to.equal(4);
    });

    it('silent with fail-open: the decision is allowed at storeTimeout', async () => {
      const l = limiter(
        upstash(),
        [hourly(5)],
        { onStoreError: 'allow', storeTimeout: 100 },
        { requestTimeoutMs: 400 },
      );
      rest.answer('hang');
      expect((await l.check(request('k'))).allowed).to.equal(true);
      await rest.untilNoneHeld();
    });
  });

  describe('exactness', () => {
    it('600 requests in flight at once through three stores admit exactly the limit', async () => {
      const shared = prefix();
      const fleet = [0, 1, 2].map(() => limiter(upstash(), [hourly(150)], {}, { prefix: shared }));
      const decisions = await Promise.all(
        Array.from({ length: 600 }, (_, i) => (fleet[i % 3] as Limiter).check(request('hot'))),
      );
      expect(decisions.filter((d) => d.allowed)).to.have.length(150);
      expect((await (fleet[0] as Limiter).status('api', 'hot')).count).to.equal(150);
    });

    it('300 concurrency slots asked for at once: exactly the limit held, and all given back', async () => {
      const rule: Rule = { name: 'jobs', key: 'header:x-key', limit: 20, window: { type: 'concurrency' } };
      const l = limiter(upstash(), [rule]);
      const decisions = await Promise.all(Array.from({ length: 300 }, () => l.check(request('w'))));
      const held = decisions.filter((d) => d.allowed);
      expect(held).to.have.length(20);
      await Promise.all(held.map((d) => l.release(d)));
      expect((await l.status('jobs', 'w')).count).to.equal(0);
    });
  });

  describe('without pub/sub', () => {
    it("another process's reset reaches this deny cache within staleAfterMs of the store's clock", async () => {
      const clock = fakeClock();
      const shared = prefix();
      const store = { prefix: shared, clock: clock.read };
      const here = limiter(upstash(), [hourly(2)], {}, store);
      const there = limiter(upstash(), [hourly(2)], {}, store);
      await here.check(request('k'));
      await here.check(request('k'));
      expect((await here.check(request('k'))).allowed).to.equal(false);
      await there.reset('api', 'k');
      const before = rest.requests;
      // Answered by the deny cache, no request: the reset was not heard.
      expect((await here.check(request('k'))).allowed).to.equal(false);
      expect(rest.requests).to.equal(before);
      clock.advance(1000);
      expect((await here.check(request('k'))).allowed).to.equal(true);
    });

    it("another process's first override of a rule is obeyed by this one's next decision", async () => {
      const shared = prefix();
      const here = limiter(upstash(), [hourly(2)], {}, { prefix: shared });
      const there = limiter(upstash(), [hourly(2)], {}, { prefix: shared });
      expect((await here.check(request('vip'))).limit).to.equal(2);
      await there.override('api', 'vip', 50);
      const next = await here.check(request('vip'));
      expect(next.limit).to.equal(50);
      expect(next.remaining).to.equal(48);
    });

    it('a call waiting for a slot freed in another process gets it by asking again, well before the lease ends', async () => {
      const shared = prefix();
      const rule: Rule = {
        name: 'jobs',
        key: 'header:x-key',
        limit: 1,
        window: { type: 'concurrency', lease: '1h' },
      };
      // The local clock injected: no TIME requests, so every request counted below is a decision.
      const store = { prefix: shared, clock: () => Date.now() };
      const here = limiter(upstash(), [rule], {}, store);
      const there = limiter(upstash(), [rule], {}, store);
      const held = await there.acquire('jobs', 'w');
      const sent = rest.requests;
      const waiting = here.acquire('jobs', 'w', { maxWait: '1m' });
      // Denied, then denied again when it starts listening for frees (none can be heard over HTTP).
      await rest.untilRequests(sent + 2);
      await held.release();
      // Only asking again (every staleAfterMs) can find the slot now: the lease ends in an hour.
      const got = await waiting;
      expect(got.allowed).to.equal(true);
      await got.release();
    });
  });

  describe('apps', () => {
    it('a Hono app limits through it: 3 pass, then 429 with Retry-After', async () => {
      const app = new Hono();
      app.use(rateLimit(limiter(upstash(), [{ ...hourly(3), name: 'hono' }])));
      app.get('/', (c) => c.text('ok'));
      const statuses: number[] = [];
      let last: Response | undefined;
      for (let i = 0; i < 4; i++) {
        last = await app.request('/', { headers: { 'x-key': 'client-1' } });
        statuses.push(last.status);
      }
      expect(statuses).to.deep.equal([200, 200, 200, 429]);
      expect(Number(last?.headers.get('retry-after'))).to.be.greaterThan(0);
      expect(last?.headers.get('x-ratelimit-limit')).to.equal('3');
    });

    it('a fetch handler (edge middleware shape) limits through it', async () => {
      const handler = withRateLimit(
        () => new Response('ok'),
        limiter(upstash(), [{ ...hourly(2), name: 'edge' }]),
      );
      const statuses: number[] = [];
      for (let i = 0; i < 3; i++)
        statuses.push((await handler(new Request('http://app/', { headers: { 'x-key': 'c' } }))).status);
      expect(statuses).to.deep.equal([200, 200, 429]);
    });
  });

  describe('configuration', () => {
    it('refuses requestTimeoutMs that is not a positive whole number of ms, and on a TCP client', () => {
      for (const bad of [0, -1, 1.5, Number.NaN, '500', null]) {
        expect(() => new RedisStore({ client: upstash(), requestTimeoutMs: bad as never }))
          .to.throw(RateLimitConfigError)
          .with.property('message')
          .that.includes('requestTimeoutMs');
      }
      const tcp = server.client({ lazyConnect: true });
      expect(() => new RedisStore({ client: tcp, requestTimeoutMs: 500 })).to.throw(
        RateLimitConfigError,
        /applies to an @upstash\/redis client/,
      );
    });

    it('refuses an object that only looks like an @upstash/redis client', () => {
      const forged = { evalsha() {}, scriptLoad() {}, client: { request: 'not a function' } };
      expect(() => new RedisStore({ client: forged })).to.throw(
        RateLimitConfigError,
        /@upstash\/redis Redis/,
      );
    });

    it("refuses a store whose staleAfterMs is not a number of ms of at least 1 (a stranger's store)", () => {
      for (const bad of [0, -5, Number.NaN, Number.POSITIVE_INFINITY, '1000']) {
        const liveness = {
          connecting: () => undefined,
          silentSinceMs: () => undefined,
          ping: async () => {},
        };
        const store = Object.assign(new MemoryStore(), {
          liveness: { ...liveness, staleAfterMs: bad as number },
        });
        expect(() => createLimiter({ store, rules: [hourly(1)] }))
          .to.throw(RateLimitConfigError)
          .with.property('message')
          .that.includes('store.liveness.staleAfterMs');
      }
    });

    it('declares staleAfterMs over HTTP only', () => {
      expect(new RedisStore({ client: upstash() }).liveness.staleAfterMs).to.equal(1000);
      expect(new RedisStore({ client: server.client({ lazyConnect: true }) }).liveness.staleAfterMs).to.equal(
        undefined,
      );
    });
  });
});
