// A window chosen per request through Express: each client's RateLimit-Policy carries its own w= (a trial's
// hour, a partner's 10 s), in the standard and the draft forms, parsed by a strict RFC 9651 parser; the
// header cache of the rule does not hand one client's window to another. A key's override with a window
// likewise.
import { expect } from 'chai';
import express from 'express';
import { parseList } from 'structured-headers';
import request from 'supertest';
import { rateLimit } from '../../adapters/express.js';
import { createLimiter, type Limiter, MemoryStore, type RequestInfo } from '../../src/index.js';

const open: Limiter[] = [];
afterEach(async () => {
  await Promise.all(open.splice(0).map((l) => l.close()));
});

const planOf = (req: RequestInfo) => req.headers['x-plan'];

function app(headers: 'standard' | 'draft-7') {
  const limiter = createLimiter({
    store: new MemoryStore(),
    rules: [
      {
        name: 'api',
        key: 'header:x-user',
        limit: 100,
        window: (req) => ({
          type: 'fixed',
          size: planOf(req) === 'trial' ? '1h' : planOf(req) === 'partner' ? '10s' : '1d',
        }),
      },
    ],
  });
  open.push(limiter);
  const server = express();
  server.get('/api', rateLimit(limiter, { headers }), (_req, res) => {
    res.send('ok');
  });
  return server;
}

/** The `w` of each policy member of the response. */
function windowsOf(policy: string): unknown[] {
  return parseList(policy).map(([, params]) => params.get('w'));
}

describe('Express: a window chosen per request', () => {
  it('the standard RateLimit-Policy tells each client its own window, request after request', async () => {
    const server = app('standard');
    for (let round = 0; round < 2; round++) {
      for (const [plan, w] of [
        ['trial', 3600],
        ['partner', 10],
        ['free', 86_400],
      ] as const) {
        const res = await request(server).get('/api').set('x-user', `u-${plan}`).set('x-plan', plan);
        expect(res.status).to.equal(200);
        expect(windowsOf(res.headers['ratelimit-policy'] as string), plan).to.deep.equal([w]);
      }
    }
  });

  it("draft 7's RateLimit-Policy carries the client's own w too", async () => {
    const server = app('draft-7');
    const trial = await request(server).get('/api').set('x-user', 't').set('x-plan', 'trial');
    const partner = await request(server).get('/api').set('x-user', 'p').set('x-plan', 'partner');
    expect(trial.headers['ratelimit-policy']).to.equal('100;w=3600');
    expect(partner.headers['ratelimit-policy']).to.equal('100;w=10');
  });

  it("a window function giving a bad value is the app's error (next(error) with ERR_WINDOW, as a bad limit is); nothing counted", async () => {
    const limiter = createLimiter({
      store: new MemoryStore(),
      rules: [
        {
          name: 'api',
          key: 'header:x-user',
          limit: 1,
          window: (req) => ({ type: 'fixed', size: req.headers['x-size'] === undefined ? '1m' : 0 }),
        },
      ],
    });
    open.push(limiter);
    const server = express();
    server.get('/api', rateLimit(limiter), (_req, res) => {
      res.send('ok');
    });
    const codes: unknown[] = [];
    server.use((error: { code?: string }, _req: express.Request, res: express.Response, _next: unknown) => {
      codes.push(error.code);
      res.status(500).send('window');
    });
    const bad = await request(server).get('/api').set('x-user', 'u').set('x-size', 'zero');
    expect([bad.status, codes]).to.deep.equal([500, ['ERR_WINDOW']]);
    expect((await limiter.status('api', 'u')).count).to.equal(0);
    expect((await request(server).get('/api').set('x-user', 'u')).status).to.equal(200);
  });
});

describe("Express: a key's override with a window", () => {
  it("RateLimit-Policy tells the overridden key its window and the others the rule's, request after request", async () => {
    const limiter = createLimiter({
      store: new MemoryStore(),
      rules: [{ name: 'api', key: 'header:x-user', limit: 100, window: { type: 'fixed', size: '1m' } }],
    });
    open.push(limiter);
    await limiter.override('api', 'partner', { window: { type: 'fixed', size: '10s' } });
    const server = express();
    server.get('/api', rateLimit(limiter, { headers: 'standard' }), (_req, res) => {
      res.send('ok');
    });
    for (let round = 0; round < 2; round++) {
      for (const [user, w] of [
        ['partner', 10],
        ['other', 60],
      ] as const) {
        const res = await request(server).get('/api').set('x-user', user);
        expect(windowsOf(res.headers['ratelimit-policy'] as string), user).to.deep.equal([w]);
      }
    }
  });
});
