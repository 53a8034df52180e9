// A denial's default body and its headers agree: `retryAfter` in `{ error, retryAfter }` is the `Retry-After`
// field's figure, for every window type (a concurrency denial's short hint, not its lease), through the real
// frameworks: every type on Express, and a concurrency denial on Koa, Fastify and Hono.
import type { RequestListener } from 'node:http';
import { getRequestListener } from '@hono/node-server';
import { expect } from 'chai';
import express from 'express';
import Fastify from 'fastify';
import { Hono } from 'hono';
import Koa from 'koa';
import request from 'supertest';
import { rateLimit as expressRateLimit } from '../../adapters/express.js';
import { rateLimit as fastifyRateLimit } from '../../adapters/fastify.js';
import { rateLimit as honoRateLimit } from '../../adapters/hono.js';
import { rateLimit as koaRateLimit } from '../../adapters/koa.js';
import type { HeadersMode } from '../../src/headers.js';
import {
  createLimiter,
  type Decision,
  type Limiter,
  MemoryStore,
  type RequestInfo,
  type Rule,
} from '../../src/index.js';

const NOW = Date.parse('2026-03-02T00:00:00.250Z');
const CLIENT = 'c1';
/** The request the limiter is filled with before the HTTP one, which carries the same key. */
const FILLING: RequestInfo = { method: 'GET', path: '/work', headers: { 'x-client': CLIENT } };

const rule = (name: string, window: Rule['window'], extra: Partial<Rule> = {}): Rule => ({
  name,
  key: 'header:x-client',
  limit: 1,
  window,
  ...extra,
});

/** Each window type, its rules, and the Retry-After (and body) seconds its denial gives at NOW. */
const CASES: Array<{ type: string; rules: Rule[]; seconds: number }> = [
  { type: 'fixed', rules: [rule('fixed', { type: 'fixed', size: '1m' })], seconds: 60 },
  // 00:00:00.250 to the next full hour.
  { type: 'calendar', rules: [rule('calendar', { type: 'calendar', unit: 'hour' })], seconds: 3600 },
  { type: 'sliding-log', rules: [rule('sliding-log', { type: 'sliding-log', size: '1m' })], seconds: 60 },
  // Ten 6 s buckets: the hit's bucket [0 s, 6 s) leaves the minute at 66 s.
  { type: 'sliding', rules: [rule('sliding', { type: 'sliding', size: '1m' })], seconds: 66 },
  { type: 'token-bucket', rules: [rule('token-bucket', { type: 'token-bucket', size: '1m' })], seconds: 60 },
  { type: 'gcra', rules: [rule('gcra', { type: 'gcra', size: '1m' })], seconds: 60 },
  // A slot frees when a request in flight ends: the short hint, not the 30 s lease that live holders renew.
  { type: 'concurrency', rules: [rule('concurrency', { type: 'concurrency', lease: '30s' })], seconds: 1 },
  {
    type: 'fixed with a lockout (locked)',
    rules: [rule('locking', { type: 'fixed', size: '1m' }, { lockout: { duration: '15m' } })],
    seconds: 900,
  },
  {
    type: 'concurrency and fixed, both denying',
    rules: [
      rule('in-flight', { type: 'concurrency', lease: '30s' }),
      rule('per-minute', { type: 'fixed', size: '1m' }),
    ],
    seconds: 60,
  },
];

const open: Limiter[] = [];
afterEach(async () => {
  await Promise.all(open.splice(0).map((l) => l.close()));
});

/** A limiter on a memory store at NOW whose rules (limit 1) are full for CLIENT: its next request is denied. */
async function filled(rules: Rule[]): Promise<Limiter> {
  const limiter = createLimiter({ rules, store: new MemoryStore({ clock: () => NOW }) });
  open.push(limiter);
  expect((await limiter.check(FILLING)).allowed, 'filling').to.equal(true);
  return limiter;
}

/** GET /work from CLIENT: its status, its Retry-After seconds and the body's retryAfter. */
async function denial(listener: RequestListener | Parameters<typeof request>[0]) {
  const res = await request(listener).get('/work').set('x-client', CLIENT);
  return {
    status: res.status,
    header: Number(res.headers['retry-after']),
    body: (res.body as { retryAfter?: unknown }).retryAfter,
    error: (res.body as { error?: unknown }).error,
  };
}

function expressApp(limiter: Limiter, headers?: HeadersMode) {
  const app = express();
  app.use(expressRateLimit(limiter, headers === undefined ? {} : { headers }));
  app.get('/work', (_req, res) => res.json({ ok: true }));
  return app;
}

describe("a denial's default body and its Retry-After field", () => {
  describe('on Express, for every window type', () => {
    for (const { type, rules, seconds } of CASES) {
      it(`${type}: the body's retryAfter is Retry-After, ${seconds} s`, async () => {
        const limiter = await filled(rules);
        // A lockout begins with the request after the limit: that one locks, the HTTP one meets the lock.
        if (type.includes('lockout')) expect((await limiter.check(FILLING)).locked, 'locks').to.equal(true);
        const got = await denial(expressApp(limiter));
        expect(got).to.deep.equal({
          status: 429,
          header: seconds,
          body: seconds,
          error: 'Too Many Requests',
        });
      });
    }

    for (const headers of ['standard', 'draft-7', false] as const) {
      it(`a concurrency denial with headers: ${headers} sends Retry-After 1 and the body 1 too`, async () => {
        const limiter = await filled([rule('concurrency', { type: 'concurrency', lease: '30s' })]);
        expect(await denial(expressApp(limiter, headers))).to.deep.equal({
          status: 429,
          header: 1,
          body: 1,
          error: 'Too Many Requests',
        });
      });
    }

    it("a custom message is the app's own: its retryAfter is left as the app wrote it", async () => {
      const limiter = await filled([rule('concurrency', { type: 'concurrency', lease: '30s' })]);
      const app = express();
      app.use(expressRateLimit(limiter, { message: (d: Decision) => ({ wait: d.retryAfterMs }) }));
      app.get('/work', (_req, res) => res.json({ ok: true }));
      const res = await request(app).get('/work').set('x-client', CLIENT);
      expect([res.status, res.headers['retry-after'], res.body]).to.deep.equal([429, '1', { wait: 30_000 }]);
    });
  });

  describe('a concurrency denial on the other frameworks', () => {
    const concurrency = [rule('concurrency', { type: 'concurrency', lease: '30s' })];
    const expected = { status: 429, header: 1, body: 1, error: 'Too Many Requests' };

    it('Koa', async () => {
      const limiter = await filled(concurrency);
      const app = new Koa();
      app.use(koaRateLimit(limiter));
      app.use((ctx) => {
        ctx.body = { ok: true };
      });
      expect(await denial(app.callback())).to.deep.equal(expected);
    });

    it('Fastify', async () => {
      const limiter = await filled(concurrency);
      const app = Fastify();
      await app.register(fastifyRateLimit, { limiter });
      app.get('/work', async () => ({ ok: true }));
      await app.ready();
      try {
        expect(await denial(app.server)).to.deep.equal(expected);
      } finally {
        await app.close();
      }
    });

    it('Hono (on @hono/node-server)', async () => {
      const limiter = await filled(concurrency);
      const app = new Hono();
      app.use(honoRateLimit(limiter));
      app.get('/work', (c) => c.json({ ok: true }));
      expect(await denial(getRequestListener(app.fetch))).to.deep.equal(expected);
    });
  });
});
