// Header fields of concurrency rules, read by a strict RFC 9651 parser (structured-headers): the unit is
// concurrent requests (qu="concurrent-requests", no w, no t), and a denial's Retry-After is the short
// hint CONCURRENCY_RETRY_SECONDS, not the soonest lease end (live holders keep renewing theirs).
import { expect } from 'chai';
import express from 'express';
import { type Item, parseDictionary, parseItem, parseList } from 'structured-headers';
import request from 'supertest';
import { rateLimit } from '../../adapters/express.js';
import type { HeadersMode } from '../../src/headers.js';
import {
  CONCURRENCY_RETRY_SECONDS,
  createLimiter,
  type Decision,
  formatHeaders,
  type Limiter,
  type LimiterOptions,
  MemoryStore,
  type Rule,
} from '../../src/index.js';

const NOW = Date.parse('2026-03-02T00:00:00.250Z');

const exportsRule: Rule = {
  name: 'exports',
  key: 'header:x-user',
  limit: 2,
  window: { type: 'concurrency', lease: '30s' },
};
const hourly: Rule = {
  name: 'hourly',
  key: 'header:x-user',
  limit: 10,
  window: { type: 'fixed', size: '1h' },
};
const units = { exports: 'concurrent-requests' } as const;
const windows = { hourly: 3600 };
const req = { method: 'POST', path: '/exports', headers: { 'x-user': 'u1' } };

const open: Limiter[] = [];
afterEach(async () => {
  await Promise.all(open.splice(0).map((l) => l.close()));
});

/** A limiter closed after the test (it renews the slots it holds on a timer). */
function limiterOf(options: LimiterOptions): Limiter {
  const limiter = createLimiter(options);
  open.push(limiter);
  return limiter;
}

/** Each list member: its name and parameters, each an sf-Integer or sf-String as the parser read it. */
function members(value: string): Array<{ name: unknown; params: Record<string, unknown> }> {
  return parseList(value).map(([name, params]) => ({ name, params: Object.fromEntries(params) }));
}

/** Every field parsed as its RFC 9651 type (throws on a field a strict client drops). */
function parse(fields: Array<[string, string]>): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const [name, value] of fields) {
    if (name === 'RateLimit-Policy' || (name === 'RateLimit' && value.startsWith('"')))
      out[name] = members(value);
    else if (name === 'RateLimit')
      out[name] = Object.fromEntries([...parseDictionary(value)].map(([k, [v]]) => [k, v]));
    else {
      const [v, params] = parseItem(value) as Item;
      expect(params.size, name).to.equal(0);
      out[name] = v;
    }
  }
  return out;
}

/** Two exports held by u1, then a third: denied by the concurrency rule (the hourly rule admits it). */
async function decisions(): Promise<{ admitted: Decision; denied: Decision }> {
  const limiter = limiterOf({ rules: [exportsRule, hourly], store: new MemoryStore({ clock: () => NOW }) });
  await limiter.check(req);
  const admitted = await limiter.check(req);
  const denied = await limiter.check(req);
  expect([admitted.allowed, denied.allowed]).to.deep.equal([true, false]);
  return { admitted, denied };
}

describe('header fields of concurrency rules', () => {
  it('the newest draft\'s form: qu="concurrent-requests" and no w in the policy, no t in the state', async () => {
    const { admitted, denied } = await decisions();
    const at = (d: Decision) => parse(formatHeaders(d, { headers: 'standard', nowMs: NOW, windows, units }));
    const policy = [
      { name: 'exports', params: { q: 2, qu: 'concurrent-requests' } },
      { name: 'hourly', params: { q: 10, w: 3600 } },
    ];
    expect(at(admitted)).to.deep.equal({
      'RateLimit-Policy': policy,
      RateLimit: [
        { name: 'exports', params: { r: 0 } },
        { name: 'hourly', params: { r: 8, t: 3600 } },
      ],
    });
    // The denial: Retry-After is the hint, not the 30 s lease end the algorithm reports.
    expect(denied.retryAfterMs).to.equal(30_000);
    expect(at(denied)).to.deep.equal({
      'RateLimit-Policy': policy,
      RateLimit: [
        { name: 'exports', params: { r: 0 } },
        { name: 'hourly', params: { r: 8, t: 3600 } },
      ],
      'Retry-After': CONCURRENCY_RETRY_SECONDS,
    });
  });

  it('the single-valued forms describe a denying concurrency rule with a reset of the hint, and parse strictly', async () => {
    const { denied } = await decisions();
    const modes: HeadersMode[] = ['legacy', 'draft-6', 'draft-7', 'both'];
    for (const mode of modes) {
      const fields = parse(
        formatHeaders(denied, { headers: mode, reset: 'delta-seconds', nowMs: NOW, windows, units }),
      );
      expect(fields['Retry-After'], String(mode)).to.equal(1);
      if (mode === 'legacy' || mode === 'both') {
        expect(fields).to.include({
          'X-RateLimit-Limit': 2,
          'X-RateLimit-Remaining': 0,
          'X-RateLimit-Reset': 1,
        });
      }
      if (mode === 'draft-7') {
        expect(fields.RateLimit).to.deep.equal({ limit: 2, remaining: 0, reset: 1 });
        // Drafts 6 and 7 have no unit: the concurrency policy is its limit alone.
        expect(fields['RateLimit-Policy']).to.deep.equal([
          { name: 2, params: {} },
          { name: 10, params: { w: 3600 } },
        ]);
      }
    }
  });

  it('a window rule that denies too sets a longer Retry-After: the longest wait stands', async () => {
    const limiter = limiterOf({
      rules: [exportsRule, { ...hourly, limit: 2 }],
      store: new MemoryStore({ clock: () => NOW }),
    });
    await limiter.check(req);
    await limiter.check(req);
    const denied = await limiter.check(req);
    expect(denied.rules.map((r) => r.allowed)).to.deep.equal([false, false]);
    const fields = parse(formatHeaders(denied, { headers: 'standard', nowMs: NOW, windows, units }));
    expect(fields['Retry-After']).to.equal(3600);
  });

  it('without units (a formatter that does not know the rule) the figures are the rule results as they are', async () => {
    const { denied } = await decisions();
    const fields = parse(formatHeaders(denied, { headers: 'standard', nowMs: NOW, windows }));
    expect(fields['Retry-After']).to.equal(30);
  });

  it('the Express adapter reads the unit from the limiter: an admitted and a denied export', async () => {
    const limiter = limiterOf({ rules: [exportsRule, hourly], store: new MemoryStore() });
    const app = express();
    app.post('/exports', rateLimit(limiter, { headers: 'standard' }), (_req, res) => {
      res.send('queued');
    });
    // Two slots held outside the app (as two exports still running), then the app's request.
    await limiter.check(req);
    const first = await request(app).post('/exports').set('x-user', 'u2');
    expect(first.status).to.equal(200);
    expect(parse([['RateLimit-Policy', String(first.headers['ratelimit-policy'])]])).to.deep.equal({
      'RateLimit-Policy': [
        { name: 'exports', params: { q: 2, qu: 'concurrent-requests' } },
        { name: 'hourly', params: { q: 10, w: 3600 } },
      ],
    });
    await limiter.check(req);
    const denied = await request(app).post('/exports').set('x-user', 'u1');
    expect(denied.status).to.equal(429);
    expect(parse([['RateLimit', String(denied.headers.ratelimit)]])).to.deep.equal({
      RateLimit: [
        { name: 'exports', params: { r: 0 } },
        { name: 'hourly', params: { r: 8, t: 3600 } },
      ],
    });
    expect(denied.headers['retry-after']).to.equal(String(CONCURRENCY_RETRY_SECONDS));
  });
});
