// A 'user' rule meeting a request without a user, on Express, Koa, Fastify, Hono and NestJS (both platforms), each
// app authenticating the framework's own way: missing: 'refuse' answers 400 naming the key form, runs no handler
// and counts nothing for the request's other rules; left out, the request passes the rule uncounted and one
// warning per rule says so.
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
import { createLimiter, KEY_MISSING_WARNING, type Limiter, MemoryStore, type Rule } from '../../src/index.js';
import { NEST_MAJOR } from '../support/nest-decorators.js';

/** An app: POST /v1/complete behind an authentication step (user `{ id }` from `x-user`) and the limiter. */
interface App {
  listener: RequestListener;
  /** How many times the handler ran. */
  handled(): number;
  close(): Promise<void>;
}

const EXPRESS = (limiter: Limiter): App => {
  let handled = 0;
  const app = express();
  app.use((req, _res, next) => {
    const id = req.headers['x-user'];
    if (typeof id === 'string') (req as { user?: unknown }).user = { id };
    next();
  });
  app.use(expressRateLimit(limiter));
  app.post('/v1/complete', (_req, res) => {
    handled++;
    res.json({ ok: true });
  });
  return { listener: app, handled: () => handled, close: async () => {} };
};

const KOA = (limiter: Limiter): App => {
  let handled = 0;
  const app = new Koa();
  app.use(async (ctx, next) => {
    const id = ctx.get('x-user');
    if (id !== '') ctx.state.user = { id };
    await next();
  });
  app.use(koaRateLimit(limiter));
  app.use((ctx) => {
    handled++;
    ctx.body = { ok: true };
  });
  return { listener: app.callback(), handled: () => handled, close: async () => {} };
};

const FASTIFY = (limiter: Limiter): App => {
  let handled = 0;
  const app = Fastify();
  app.addHook('onRequest', async (req) => {
    const id = req.headers['x-user'];
    if (typeof id === 'string') (req as { user?: unknown }).user = { id };
  });
  void app.register(fastifyRateLimit, { limiter });
  app.post('/v1/complete', async () => {
    handled++;
    return { ok: true };
  });
  const ready = app.ready();
  return {
    listener: (req, res) => void ready.then(() => app.routing(req, res)),
    handled: () => handled,
    close: () => app.close(),
  };
};

const HONO = (limiter: Limiter): App => {
  let handled = 0;
  const app = new Hono();
  app.use(async (c, next) => {
    const id = c.req.header('x-user');
    if (id !== undefined) c.set('user' as never, { id } as never);
    await next();
  });
  app.use(honoRateLimit(limiter));
  app.post('/v1/complete', (c) => {
    handled++;
    return c.json({ ok: true });
  });
  return { listener: getRequestListener(app.fetch), handled: () => handled, close: async () => {} };
};

// After the decorator hooks are registered (importing NEST_MAJOR did), the Nest file compiles with legacy
// decorators; its specifier is computed so that this project's type check leaves it to tsconfig.nest.json's.
void NEST_MAJOR;
const nestModule: string = './suites/nest-missing-key.js';
const { nestCompletionApp } = (await import(nestModule)) as {
  nestCompletionApp: (platform: 'express' | 'fastify', limiter: Limiter) => App;
};

const FRAMEWORKS: Array<[string, (limiter: Limiter) => App]> = [
  ['Express', EXPRESS],
  ['Koa', KOA],
  ['Fastify', FASTIFY],
  ['Hono', HONO],
  ['Nest (express)', (limiter) => nestCompletionApp('express', limiter)],
  ['Nest (fastify)', (limiter) => nestCompletionApp('fastify', limiter)],
];

const day = { type: 'fixed', size: '1d' } as const;
/** A per-IP limit, then the LLM token budget per user. */
const rules = (missing: Rule['missing']): Rule[] => [
  { name: 'per-ip', key: 'ip', limit: 100, window: { type: 'fixed', size: '1m' } },
  {
    name: 'tokens-day',
    match: 'POST /v1/complete',
    key: 'user',
    limit: 1000,
    window: day,
    ...(missing === undefined ? {} : { missing }),
  },
];
/** The client address supertest's requests come from, as the 'ip' key form reads it. */
const CLIENT = '127.0.0.1';

/** The messages of `KEY_MISSING_WARNING` emitted while `run` runs (warnings arrive on the next tick). */
async function missingWarnings(run: () => Promise<void>): Promise<string[]> {
  const seen: string[] = [];
  const listener = (w: Error & { code?: string }) => {
    if (w.code === KEY_MISSING_WARNING) seen.push(w.message);
  };
  process.on('warning', listener);
  try {
    await run();
    await new Promise((resolve) => setImmediate(resolve));
  } finally {
    process.off('warning', listener);
  }
  return seen;
}

for (const [name, build] of FRAMEWORKS) {
  describe(`${name}: a 'user' rule and a request without a user`, function () {
    this.timeout(30_000);
    const cleanup: Array<() => Promise<void>> = [];
    afterEach(async () => {
      for (const step of cleanup.splice(0).reverse()) await step();
    });

    function appWith(missing: Rule['missing']): { app: App; limiter: Limiter } {
      const limiter = createLimiter({ rules: rules(missing), store: new MemoryStore() });
      const app = build(limiter);
      cleanup.push(
        () => limiter.close(),
        () => app.close(),
      );
      return { app, limiter };
    }

    it("missing: 'refuse' answers 400 naming the key form, runs no handler and counts nothing; a signed-in request is counted", async () => {
      const { app, limiter } = appWith('refuse');
      const refused = await request(app.listener).post('/v1/complete').send({ prompt: 'hi' });
      expect([refused.status, refused.body]).to.deep.equal([
        400,
        {
          statusCode: 400,
          error: 'Bad Request',
          message: 'user is required: the rate limiter keys on it',
          field: 'user',
        },
      ]);
      expect(app.handled(), 'handler runs').to.equal(0);
      expect((await limiter.status('per-ip', CLIENT)).count, 'per-ip after the refusal').to.equal(0);

      const admitted = await request(app.listener)
        .post('/v1/complete')
        .set('x-user', 'u1')
        .send({ prompt: 'hi' });
      expect(admitted.status).to.equal(200);
      expect(app.handled()).to.equal(1);
      expect((await limiter.status('per-ip', CLIENT)).count, 'per-ip').to.equal(1);
      expect((await limiter.status('tokens-day', 'u1')).count, 'tokens-day').to.equal(1);
    });

    it('left out: requests without a user pass the rule uncounted, and one warning names the rule and where the user is read', async () => {
      const { app, limiter } = appWith(undefined);
      const warnings = await missingWarnings(async () => {
        for (let i = 0; i < 3; i++)
          expect((await request(app.listener).post('/v1/complete')).status).to.equal(200);
      });
      expect(app.handled()).to.equal(3);
      expect((await limiter.status('per-ip', CLIENT)).count, 'per-ip still counts them').to.equal(3);
      expect(warnings).to.have.length(1);
      expect(warnings[0]).to.match(
        /^ratekeeper: rule "tokens-day" keys on 'user', but a request reached it with no user, so the rule did not apply/,
      );
      expect(warnings[0]).to.include("set missing: 'refuse' on the rule");
    });

    it("missing: 'skip' stated: requests without a user pass the rule, with no warning", async () => {
      const { app } = appWith('skip');
      const warnings = await missingWarnings(async () => {
        expect((await request(app.listener).post('/v1/complete')).status).to.equal(200);
      });
      expect([app.handled(), warnings]).to.deep.equal([1, []]);
    });
  });
}
