// slowDown on Express, Koa, Fastify and Hono, on the memory store and on Redis: requests over a rule's limit
// wait (never refused), the wait ends with the client, and the options are checked when it is built. No
// timing is asserted: the delays are observed as requested (onDelayed, the timers set) and in their order.
import http, { type RequestListener } from 'node:http';
import type { AddressInfo } from 'node:net';
import { getRequestListener } from '@hono/node-server';
import { expect } from 'chai';
import express from 'express';
import Fastify from 'fastify';
import { Hono } from 'hono';
import Koa from 'koa';
import supertest from 'supertest';
import { slowDown as expressSlowDown } from '../../adapters/express.js';
import { slowDown as fastifySlowDown } from '../../adapters/fastify.js';
import { slowDown as honoSlowDown } from '../../adapters/hono.js';
import { slowDown as koaSlowDown } from '../../adapters/koa.js';
import type { SlowDownOptions } from '../../adapters/slow-down.js';
import {
  createLimiter,
  type Decision,
  type Limiter,
  RateLimitConfigError,
  type Rule,
} from '../../src/index.js';
import { until } from '../support/settle.js';
import { memoryStores, redisStores } from '../support/stores.js';

type Options = Omit<SlowDownOptions<unknown>, 'skip' | 'onDelayed'> & {
  onDelayed?: (delayMs: number, decision: Decision) => void;
};

interface Served {
  url: string;
  /** What ran, in order: 'handler' for each request the app served, 'timer:<ms>' for each delay that ended. */
  events: string[];
  close(): Promise<void>;
}

const listen = async (listener: RequestListener): Promise<{ url: string; close(): Promise<void> }> => {
  const server = http.createServer(listener);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
};

/** Each framework's app: slowDown in front of `GET /items`, whose handler is recorded in `events`. */
const frameworks: Array<{
  name: string;
  serve(limiter: Limiter, o: Options, events: string[]): Promise<Served>;
}> = [
  {
    name: 'Express',
    async serve(limiter, o, events) {
      const app = express();
      app.use(expressSlowDown(limiter, o));
      app.get('/items', (_req, res) => {
        events.push('handler');
        res.json({ ok: true });
      });
      app.use((error: Error, _req: express.Request, res: express.Response, _next: express.NextFunction) => {
        res.status(500).json({ error: error.message });
      });
      return { ...(await listen(app)), events };
    },
  },
  {
    name: 'Koa',
    async serve(limiter, o, events) {
      const app = new Koa();
      app.use(async (ctx, next) => {
        try {
          await next();
        } catch (error) {
          ctx.status = 500;
          ctx.body = { error: (error as Error).message };
        }
      });
      app.use(koaSlowDown(limiter, o));
      app.use((ctx) => {
        events.push('handler');
        ctx.body = { ok: true };
      });
      return { ...(await listen(app.callback())), events };
    },
  },
  {
    name: 'Fastify',
    async serve(limiter, o, events) {
      const app = Fastify();
      await app.register(fastifySlowDown(limiter, o));
      app.get('/items', async () => {
        events.push('handler');
        return { ok: true };
      });
      await app.listen({ port: 0, host: '127.0.0.1' });
      const { port } = app.server.address() as AddressInfo;
      return { url: `http://127.0.0.1:${port}`, events, close: () => app.close() };
    },
  },
  {
    name: 'Hono',
    async serve(limiter, o, events) {
      const app = new Hono();
      app.onError((error, c) => c.json({ error: error.message }, 500));
      app.use(honoSlowDown(limiter, o));
      app.get('/items', (c) => {
        events.push('handler');
        return c.json({ ok: true });
      });
      return { ...(await listen(getRequestListener(app.fetch))), events };
    },
  },
];

const minute = { type: 'fixed', size: '1m' } as const;

/**
 * Watches the timers set for the given delays: each one's end is recorded in `events` ('timer:<ms>'), and
 * `cleared(ms)` resolves once a timer of that delay is cleared. Every other timer is left alone.
 */
function watchTimers(delays: number[], events: string[]) {
  const realSet = globalThis.setTimeout;
  const realClear = globalThis.clearTimeout;
  const watched = new Map<unknown, number>();
  const waiting = new Map<number, () => void>();
  const cleared: number[] = [];
  globalThis.setTimeout = ((fn: (...args: unknown[]) => void, ms?: number, ...args: unknown[]) => {
    if (ms === undefined || !delays.includes(ms)) return realSet(fn, ms, ...args);
    const handle = realSet(() => {
      events.push(`timer:${ms}`);
      fn(...args);
    }, ms);
    watched.set(handle, ms);
    return handle;
  }) as typeof setTimeout;
  globalThis.clearTimeout = ((handle: Parameters<typeof clearTimeout>[0]) => {
    realClear(handle);
    const ms = watched.get(handle);
    if (ms === undefined) return;
    watched.delete(handle);
    cleared.push(ms);
    waiting.get(ms)?.();
  }) as typeof clearTimeout;
  return {
    cleared,
    /** Resolves when a timer of `ms` is cleared (at once if one was). */
    whenCleared: (ms: number) =>
      new Promise<void>((resolve) => {
        if (cleared.includes(ms)) resolve();
        else waiting.set(ms, resolve);
      }),
    restore() {
      globalThis.setTimeout = realSet;
      globalThis.clearTimeout = realClear;
    },
  };
}

for (const framework of frameworks) {
  for (const stores of [memoryStores, redisStores]) {
    describe(`slowDown on ${framework.name}, ${stores.name} store`, function () {
      this.timeout(30_000);
      const cleanup: Array<() => Promise<unknown> | unknown> = [];
      afterEach(async () => {
        for (const step of cleanup.splice(0).reverse()) await step();
      });

      async function start(rules: Rule[], options: Options, watch: number[]) {
        const limiter = createLimiter({ store: await stores.makeStore(Date.now), rules });
        cleanup.push(() => limiter.close());
        const events: string[] = [];
        const timers = watchTimers(watch, events);
        cleanup.push(() => timers.restore());
        const served = await framework.serve(limiter, options, events);
        cleanup.push(() => served.close());
        return { served, timers, limiter };
      }

      it('answers a repeated query parameter where a rule reads its key with 400 naming it; the handler never runs', async () => {
        const { served, limiter } = await start(
          [{ name: 'slow-q', key: 'query.q', limit: 2, window: minute }],
          { delay: 10 },
          [],
        );
        const res = await supertest(served.url).get('/items?q=a&q=b');
        if (framework.name === 'Hono') {
          // Hono's c.req.query() gives the first value, to the rule and to the handler alike.
          expect(res.status).to.equal(200);
          return;
        }
        expect([res.status, res.body.field]).to.deep.equal([400, 'query.q']);
        expect(served.events, 'the handler never ran').to.deep.equal([]);
        expect((await limiter.status('slow-q', 'a')).count, 'nothing counted').to.equal(0);
      });

      it('delays each request over the limit by delay per request over, with the headers rateLimit sets but Retry-After', async () => {
        const delays: number[] = [];
        const { served } = await start(
          [{ name: 'slow', key: 'ip', limit: 2, window: minute }],
          { delay: 23, onDelayed: (ms) => delays.push(ms) },
          [23, 46, 69],
        );
        const answers: Array<[number, string | undefined, string | undefined, string | undefined]> = [];
        for (let i = 0; i < 5; i++) {
          const res = await supertest(served.url).get('/items');
          answers.push([
            res.status,
            res.headers['x-ratelimit-limit'],
            res.headers['x-ratelimit-remaining'],
            res.headers['retry-after'],
          ]);
        }
        expect(answers).to.deep.equal([
          [200, '2', '1', undefined],
          [200, '2', '0', undefined],
          [200, '2', '0', undefined],
          [200, '2', '0', undefined],
          [200, '2', '0', undefined],
        ]);
        expect(delays).to.deep.equal([23, 46, 69]);
        // Each delayed request's handler ran only after its timer ended.
        expect(served.events).to.deep.equal([
          'handler',
          'handler',
          'timer:23',
          'handler',
          'timer:46',
          'handler',
          'timer:69',
          'handler',
        ]);
      });

      it('gives a delay function how many requests over the limit and the decision; maxDelay caps it', async () => {
        const calls: Array<[number, string | undefined, number]> = [];
        const delays: number[] = [];
        const { served } = await start(
          [{ name: 'fn', key: 'ip', limit: 1, window: minute }],
          {
            delay: (over, decision) => {
              calls.push([over, decision.rule, decision.count]);
              return over * 17;
            },
            maxDelay: '40ms',
            onDelayed: (ms) => delays.push(ms),
          },
          [17, 34, 40],
        );
        for (let i = 0; i < 4; i++) expect((await supertest(served.url).get('/items')).status).to.equal(200);
        expect(calls).to.deep.equal([
          [1, 'fn', 2],
          [2, 'fn', 3],
          [3, 'fn', 4],
        ]);
        expect(delays).to.deep.equal([17, 34, 40]);
        expect(served.events.filter((e) => e === 'handler')).to.have.length(4);
      });

      it('ends the wait when the client goes: the handler never runs and the timer is cleared', async () => {
        // A delay of an hour, waited at most the default maxDelay of 30 s.
        const CAPPED = 30_000;
        const delays: number[] = [];
        let delayed: () => void = () => {};
        const waiting = new Promise<void>((resolve) => {
          delayed = resolve;
        });
        const { served, timers, limiter } = await start(
          [{ name: 'gone', key: () => 'all', limit: 1, window: minute }],
          {
            delay: '1h',
            onDelayed: (ms) => {
              delays.push(ms);
              delayed();
            },
          },
          [CAPPED],
        );
        expect((await supertest(served.url).get('/items')).status).to.equal(200);
        const req = http.get(`${served.url}/items`);
        req.on('error', () => {}); // the abort itself
        await waiting;
        expect(served.events).to.deep.equal(['handler']);
        expect(delays).to.deep.equal([CAPPED]);
        req.destroy();
        await timers.whenCleared(CAPPED);
        expect(timers.cleared).to.deep.equal([CAPPED]);
        expect(served.events).to.deep.equal(['handler']);
        expect((await limiter.status('gone', 'all')).count, 'the abandoned request was counted').to.equal(2);
      });
    });
  }
}

/**
 * `n` requests at once, each on a connection of its own. `answers` holds the status and headers of each one
 * answered; `abandon()` destroys the requests still waiting and resolves once each of their sockets closed.
 */
function flood(url: string, n: number) {
  const answers: Array<{ status: number; headers: http.IncomingHttpHeaders }> = [];
  const pending = new Set<http.ClientRequest>();
  const closed: Array<Promise<void>> = [];
  for (let i = 0; i < n; i++) {
    const req = http.get(`${url}/items`, { agent: false }, (res) => {
      answers.push({ status: res.statusCode ?? 0, headers: res.headers });
      pending.delete(req);
      res.resume();
    });
    req.on('error', () => {}); // the abandoned ones
    closed.push(new Promise((resolve) => req.on('close', () => resolve())));
    pending.add(req);
  }
  return {
    answers,
    async abandon() {
      const left = [...pending];
      for (const req of left) req.destroy();
      await Promise.all(closed);
      return left.length;
    },
  };
}

for (const framework of frameworks) {
  describe(`slowDown on ${framework.name}: one client opening 1500 connections`, function () {
    this.timeout(120_000);
    const cleanup: Array<() => Promise<unknown> | unknown> = [];
    afterEach(async () => {
      for (const step of cleanup.splice(0).reverse()) await step();
    });

    it('holds at most maxWaiting (100 by default) waiting, refuses the rest with 429, and frees every timer when the clients go', async () => {
      const HOUR = 3_600_000; // no wait ends during the test: every count below is exact
      const limiter = createLimiter({ rules: [{ name: 'flood', key: 'ip', limit: 10, window: minute }] });
      cleanup.push(() => limiter.close());
      const events: string[] = [];
      const timers = watchTimers([HOUR], events);
      cleanup.push(() => timers.restore());
      let delayed = 0;
      const served = await framework.serve(
        limiter,
        { delay: '1h', maxDelay: '1h', onDelayed: () => delayed++ },
        events,
      );
      cleanup.push(() => served.close());

      const first = flood(served.url, 1500);
      await until(
        '1400 answered and 100 waiting',
        () => first.answers.length === 1400 && delayed === 100,
        90_000,
      );
      const statuses = first.answers.map((a) => a.status);
      expect(
        statuses.filter((s) => s === 200),
        'within the limit',
      ).to.have.length(10);
      expect(
        statuses.filter((s) => s === 429),
        'refused, past 100 waiting',
      ).to.have.length(1390);
      const refusal = first.answers.find((a) => a.status === 429);
      expect(refusal?.headers['x-ratelimit-limit']).to.equal('10');
      expect(refusal?.headers['x-ratelimit-remaining']).to.equal('0');
      expect(Number(refusal?.headers['retry-after'])).to.be.greaterThan(0);
      expect(delayed, 'requests that waited').to.equal(100);
      expect(timers.cleared).to.have.length(0);
      expect((await limiter.status('flood', '127.0.0.1')).count, 'every request counted').to.equal(1500);

      // The client goes: every wait ends, its timer cleared, and no handler runs for it.
      expect(await first.abandon()).to.equal(100);
      await until('every timer cleared', () => timers.cleared.length === 100);
      expect(
        events.filter((e) => e === 'handler'),
        'handlers run',
      ).to.have.length(10);
      expect(
        events.filter((e) => e.startsWith('timer:')),
        'waits that ended by time',
      ).to.have.length(0);

      // The key's 100 places are free again: 100 more wait, the 101st is refused.
      const second = flood(served.url, 101);
      await until(
        '1 answered and 200 waited in all',
        () => second.answers.length === 1 && delayed === 200,
        60_000,
      );
      expect(second.answers.map((a) => a.status)).to.deep.equal([429]);
      expect(await second.abandon()).to.equal(100);
      await until('every timer cleared', () => timers.cleared.length === 200);
    });
  });
}

describe('slowDown options and rules, checked when it is built', () => {
  const rules: Rule[] = [{ name: 'api', key: 'ip', limit: 5, window: minute }];
  const build = (r: Rule[], options: unknown) => () => expressSlowDown(r, options as never);

  it('requires a delay, and refuses one that is not ms, a duration or a function', () => {
    expect(build(rules, {}))
      .to.throw(RateLimitConfigError, /slowDown: delay is required: ms per request over the limit/)
      .with.property('code', 'ERR_OPTION');
    expect(build(rules, { delay: '1 dya' })).to.throw(
      RateLimitConfigError,
      /slowDown: delay must be ms per request over the limit \(500, '500ms'\) or \(over, decision\) => ms, got '1 dya'/,
    );
    expect(build(rules, { delay: -1 })).to.throw(RateLimitConfigError, /got -1/);
    for (const maxDelay of ['soon', 0, -5, '30d', Number.POSITIVE_INFINITY])
      expect(build(rules, { delay: 10, maxDelay }), String(maxDelay))
        .to.throw(
          RateLimitConfigError,
          /slowDown: maxDelay must be a duration such as '10s' or 10000, at most 2147483647 ms \(about 24\.8 days\), got /,
        )
        .with.property('code', 'ERR_OPTION');
  });

  it('refuses a maxWaiting that is not a whole number of requests, 1 or more', () => {
    for (const maxWaiting of [0, -1, 2.5, '100', Number.POSITIVE_INFINITY, null])
      expect(build(rules, { delay: 10, maxWaiting }), String(maxWaiting))
        .to.throw(
          RateLimitConfigError,
          /slowDown: maxWaiting must be a whole number of requests waiting at once per key, 1 or more, such as 100, got /,
        )
        .with.property('code', 'ERR_OPTION');
    expect(build(rules, { delay: 10, maxWaiting: 1, maxDelay: '1m' })).not.to.throw();
  });

  it("refuses a misspelt option with a did-you-mean, and rateLimit's own options", () => {
    expect(build(rules, { delay: 10, maxdelay: 100 }))
      .to.throw(
        RateLimitConfigError,
        /slowDown: unknown field 'maxdelay' \(got 100\), did you mean 'maxDelay'\?/,
      )
      .with.property('code', 'ERR_UNKNOWN_FIELD');
    expect(build(rules, { delay: 10, maxWaitng: 5 }))
      .to.throw(
        RateLimitConfigError,
        /slowDown: unknown field 'maxWaitng' \(got 5\), did you mean 'maxWaiting'\?/,
      )
      .with.property('code', 'ERR_UNKNOWN_FIELD');
    expect(build(rules, { delay: 10, statusCode: 429 })).to.throw(
      RateLimitConfigError,
      /unknown field 'statusCode'/,
    );
  });

  it('refuses rules with a lockout or counting outcomes: slowDown counts every request and never locks a key', () => {
    expect(build([{ ...(rules[0] as Rule), lockout: { duration: '15m' } }], { delay: 10 })).to.throw(
      RateLimitConfigError,
      /slowDown: rule "api" has a lockout, which refuses requests; slowDown only delays them/,
    );
    expect(build([{ ...(rules[0] as Rule), countOn: 'failure' }], { delay: 10 })).to.throw(
      RateLimitConfigError,
      /slowDown: rule "api" counts outcomes/,
    );
    for (const rule of [
      { ...(rules[0] as Rule), window: { type: 'concurrency' } },
      { ...(rules[0] as Rule), settle: true },
    ] as Rule[])
      expect(build([rule], { delay: 10 })).to.throw(
        RateLimitConfigError,
        /slowDown: rule "api" holds slots or settles its cost; slowDown counts requests as they arrive/,
      );
    expect(build(rules.slice(0, 0), { delay: 10 })).to.throw(RateLimitConfigError);
  });

  it('keeps the decision where the app reads it, and refuses past a maxWaiting it is given, with Retry-After', async () => {
    let delayed: () => void = () => {};
    const waiting = new Promise<void>((resolve) => {
      delayed = resolve;
    });
    const app = express();
    app.use(
      expressSlowDown([{ name: 'one', key: 'ip', limit: 1, window: minute }], {
        delay: '1h',
        maxDelay: '1h',
        maxWaiting: 1,
        onDelayed: () => delayed(),
      }),
    );
    app.get('/items', (req, res) => void res.json({ remaining: req.rateLimit?.remaining }));
    const served = await listen(app);
    try {
      expect((await supertest(served.url).get('/items').expect(200)).body).to.deep.equal({ remaining: 0 });
      const held = http.get(`${served.url}/items`);
      held.on('error', () => {}); // destroyed below
      await waiting;
      const refused = await supertest(served.url).get('/items').expect(429);
      expect(refused.headers['x-ratelimit-remaining']).to.equal('0');
      expect(Number(refused.headers['retry-after'])).to.be.greaterThan(0);
      expect(refused.body).to.have.property('error', 'Too Many Requests');
      held.destroy();
    } finally {
      await served.close();
    }
  });

  it('counts a token bucket over its burst, not its limit', async () => {
    const delays: number[] = [];
    const app = express();
    app.use(
      expressSlowDown(
        [{ name: 'tb', key: 'ip', limit: 1, window: { type: 'token-bucket', size: '1h', burst: 3 } }],
        {
          delay: 1,
          onDelayed: (ms) => delays.push(ms),
        },
      ),
    );
    app.get('/items', (_req, res) => void res.json({}));
    for (let i = 0; i < 5; i++) await supertest(app).get('/items').expect(200);
    expect(delays).to.deep.equal([1, 2]);
  });

  it("sends a delay function's bad answer to the framework's error handling, and the handler never runs", async () => {
    let served = 0;
    const app = express();
    app.use(
      expressSlowDown([{ name: 'bad', key: 'ip', limit: 1, window: minute }], { delay: () => Number.NaN }),
    );
    app.get('/items', (_req, res) => {
      served++;
      res.json({});
    });
    app.use(
      (
        error: Error & { code?: string },
        _req: express.Request,
        res: express.Response,
        _next: express.NextFunction,
      ) => res.status(500).json({ error: error.message, code: error.code }),
    );
    await supertest(app).get('/items').expect(200);
    const res = await supertest(app).get('/items').expect(500);
    expect(res.body).to.deep.equal({
      error: 'slowDown: the delay function must return a number of ms, 0 or more, got NaN',
      code: 'ERR_DELAY',
    });
    expect(served).to.equal(1);
  });
});
