// formatHeaders: exact legacy, IETF and Retry-After fields for a decision; and the adapters' shared helpers.
import { expect } from 'chai';
import { createSetup, errorStatus } from '../../adapters/common.js';
import { pathOf } from '../../adapters/exchange.js';
import { appendsField } from '../../src/headers.js';
import { type Decision, formatHeaders, RateLimitConfigError, type RuleResult } from '../../src/index.js';

const NOW = Date.parse('2026-03-02T00:00:00.250Z');

function rule(over: Partial<RuleResult> = {}): RuleResult {
  return {
    rule: 'api',
    key: '1.2.3.4',
    allowed: true,
    limit: 10,
    remaining: 7,
    count: 3,
    resetMs: 41_200,
    locked: false,
    ...over,
  };
}

/** A decision as the core folds it: figures of the first denying rule, else of the tightest. */
function decision(rules: RuleResult[]): Decision {
  const denying = rules.find((r) => !r.allowed && !r.dryRun);
  const top = denying ?? [...rules].sort((a, b) => a.remaining - b.remaining)[0] ?? rule();
  const d: Decision = {
    allowed: !denying,
    limit: top.limit,
    remaining: top.remaining,
    count: top.count,
    resetMs: top.resetMs,
    rule: top.rule,
    locked: top.locked,
    rules,
  };
  if (denying?.retryAfterMs !== undefined)
    d.retryAfterMs = Math.max(...rules.map((r) => (r.dryRun ? 0 : (r.retryAfterMs ?? 0))));
  if (rules.some((r) => r.dryRun && !r.allowed)) d.dryRun = true;
  return d;
}

const toObject = (fields: Array<[string, string]>) => Object.fromEntries(fields);

/** A strict reader for the two IETF fields: RFC 9651 List of sf-string Items with integer params. */
const MEMBER = /^"((?:[\x20-\x21\x23-\x5b\x5d-\x7e]|\\["\\])*)"((?:;[a-z*][a-z0-9_.*-]*=\d{1,15})*)$/;
function parseList(value: string): Array<{ name: string; params: Record<string, number> }> {
  return value.split(', ').map((member) => {
    const m = MEMBER.exec(member);
    if (!m) throw new Error(`not a canonical list member: ${member}`);
    const params: Record<string, number> = {};
    for (const p of (m[2] ?? '').split(';').slice(1)) {
      const [k, v] = p.split('=') as [string, string];
      params[k] = Number(v);
    }
    return { name: (m[1] ?? '').replace(/\\(["\\])/g, '$1'), params };
  });
}

describe('formatHeaders', () => {
  it('defaults to the legacy fields with X-RateLimit-Reset in epoch seconds, rounded up', () => {
    expect(formatHeaders(decision([rule()]), { nowMs: NOW })).to.deep.equal([
      ['X-RateLimit-Limit', '10'],
      ['X-RateLimit-Remaining', '7'],
      ['X-RateLimit-Reset', String(Math.ceil((NOW + 41_200) / 1000))],
    ]);
  });

  it("writes X-RateLimit-Reset as whole seconds from now with reset: 'delta-seconds'", () => {
    const fields = toObject(formatHeaders(decision([rule()]), { reset: 'delta-seconds' }));
    expect(fields['X-RateLimit-Reset']).to.equal('42');
  });

  it('writes nothing when no rule matched, and nothing but Retry-After on a denial with headers: false', () => {
    expect(formatHeaders(decision([]), { headers: 'both' })).to.deep.equal([]);
    expect(formatHeaders(decision([rule()]), { headers: false })).to.deep.equal([]);
    const denied = decision([rule({ allowed: false, remaining: 0, retryAfterMs: 1 })]);
    expect(formatHeaders(denied, { headers: false })).to.deep.equal([['Retry-After', '1']]);
  });

  it('adds Retry-After in whole seconds, rounded up, at least 1, on a denial only', () => {
    const retry = (ms: number) =>
      toObject(
        formatHeaders(decision([rule({ allowed: false, remaining: 0, resetMs: ms, retryAfterMs: ms })])),
      )['Retry-After'];
    expect(retry(1)).to.equal('1');
    expect(retry(1000)).to.equal('1');
    expect(retry(1001)).to.equal('2');
    expect(retry(900_000)).to.equal('900');
    expect(toObject(formatHeaders(decision([rule()])))['Retry-After']).to.equal(undefined);
  });

  it('never sends a negative or fractional remaining, and 0 while locked', () => {
    const neg = toObject(formatHeaders(decision([rule({ remaining: -3 })]), { headers: 'both' }));
    expect(neg['X-RateLimit-Remaining']).to.equal('0');
    expect(neg.RateLimit).to.equal('"api";r=0;t=42');
    const locked = decision([
      rule({ allowed: false, locked: true, remaining: 2, resetMs: 5000, retryAfterMs: 900_000 }),
    ]);
    const fields = toObject(formatHeaders(locked, { headers: 'both', reset: 'delta-seconds' }));
    expect(fields['X-RateLimit-Remaining']).to.equal('0');
    expect(fields.RateLimit).to.equal('"api";r=0;t=900');
    expect(fields['X-RateLimit-Reset']).to.equal('900');
    expect(fields['Retry-After']).to.equal('900');
  });

  it('writes the IETF fields in canonical RFC 9651 form, one member per rule, w only when known', () => {
    const d = decision([
      rule({ rule: 'burst', limit: 5, remaining: 4, resetMs: 60_000 }),
      rule({ rule: 'daily', limit: 100, remaining: 99, resetMs: 57_600_000 }),
    ]);
    const fields = formatHeaders(d, { headers: 'standard', windows: { burst: 60, daily: 86_400 } });
    expect(fields).to.deep.equal([
      ['RateLimit-Policy', '"burst";q=5;w=60, "daily";q=100;w=86400'],
      ['RateLimit', '"burst";r=4;t=60, "daily";r=99;t=57600'],
    ]);
    expect(
      toObject(formatHeaders(d, { headers: 'standard', windows: { burst: 0 } }))['RateLimit-Policy'],
    ).to.equal('"burst";q=5, "daily";q=100');
  });

  it('draft-6: RateLimit-Limit, -Remaining, -Reset in seconds from now, and RateLimit-Policy <limit>;w=<seconds>', () => {
    const d = decision([rule({ limit: 10, remaining: 7, resetMs: 41_200 })]);
    expect(formatHeaders(d, { headers: 'draft-6', windows: { api: 60 }, nowMs: NOW })).to.deep.equal([
      ['RateLimit-Limit', '10'],
      ['RateLimit-Remaining', '7'],
      ['RateLimit-Reset', '42'],
      ['RateLimit-Policy', '10;w=60'],
    ]);
  });

  it('draft-7: one RateLimit field limit=, remaining=, reset= and RateLimit-Policy <limit>;w=<seconds>', () => {
    const d = decision([rule({ limit: 10, remaining: 7, resetMs: 41_200 })]);
    expect(formatHeaders(d, { headers: 'draft-7', windows: { api: 60 } })).to.deep.equal([
      ['RateLimit', 'limit=10, remaining=7, reset=42'],
      ['RateLimit-Policy', '10;w=60'],
    ]);
  });

  it('drafts 6 and 7 with several rules: the fields describe the rule with the least remaining, its policy first', () => {
    const d = decision([
      rule({ rule: 'daily', limit: 100, remaining: 99, resetMs: 57_600_000 }),
      rule({ rule: 'burst', limit: 5, remaining: 2, resetMs: 30_000 }),
      rule({ rule: 'cron', limit: 50, remaining: 40, resetMs: 600_000 }),
    ]);
    const windows = { daily: 86_400, burst: 60, cron: 0 };
    expect(toObject(formatHeaders(d, { headers: 'draft-6', windows }))).to.deep.equal({
      'RateLimit-Limit': '5',
      'RateLimit-Remaining': '2',
      'RateLimit-Reset': '30',
      'RateLimit-Policy': '5;w=60, 100;w=86400, 50',
    });
    expect(toObject(formatHeaders(d, { headers: 'draft-7', windows }))).to.deep.equal({
      RateLimit: 'limit=5, remaining=2, reset=30',
      'RateLimit-Policy': '5;w=60, 100;w=86400, 50',
    });
  });

  it('drafts 6 and 7 on a denial: the denying rule, remaining 0, reset no earlier than Retry-After', () => {
    const d = decision([
      rule({ rule: 'burst', limit: 5, remaining: 0, resetMs: 10_000, allowed: false, retryAfterMs: 30_000 }),
      rule({ rule: 'daily', limit: 100, remaining: 0, resetMs: 50_000 }),
    ]);
    expect(toObject(formatHeaders(d, { headers: 'draft-6', windows: { burst: 60 } }))).to.deep.equal({
      'RateLimit-Limit': '5',
      'RateLimit-Remaining': '0',
      'RateLimit-Reset': '30',
      'RateLimit-Policy': '5;w=60, 100',
      'Retry-After': '30',
    });
    const locked = decision([
      rule({ allowed: false, remaining: 3, locked: true, resetMs: 900_000, retryAfterMs: 900_000 }),
    ]);
    expect(toObject(formatHeaders(locked, { headers: 'draft-7' })).RateLimit).to.equal(
      'limit=10, remaining=0, reset=900',
    );
    expect(formatHeaders(decision([]), { headers: 'draft-7' })).to.deep.equal([]);
  });

  it('appends RateLimit-Policy and the newest RateLimit list across limiters, replaces draft-7 RateLimit', () => {
    expect(appendsField('RateLimit-Policy', '5;w=60')).to.equal(true);
    expect(appendsField('RateLimit-Policy', '"api";q=5')).to.equal(true);
    expect(appendsField('RateLimit', '"api";r=4;t=60')).to.equal(true);
    expect(appendsField('RateLimit', 'limit=5, remaining=4, reset=60')).to.equal(false);
    expect(appendsField('RateLimit-Limit', '5')).to.equal(false);
    expect(appendsField('X-RateLimit-Remaining', '4')).to.equal(false);
  });

  it("sends both families with headers: 'both', legacy first", () => {
    const names = formatHeaders(decision([rule()]), { headers: 'both' }).map(([name]) => name);
    expect(names).to.deep.equal([
      'X-RateLimit-Limit',
      'X-RateLimit-Remaining',
      'X-RateLimit-Reset',
      'RateLimit-Policy',
      'RateLimit',
    ]);
  });

  it('escapes " and \\ in policy names and replaces non-printable characters', () => {
    const d = decision([rule({ rule: 'a"b\\c\u00e9\n' })]);
    const fields = toObject(formatHeaders(d, { headers: 'standard' }));
    expect(fields['RateLimit-Policy']).to.equal('"a\\"b\\\\c??";q=10');
    expect(parseList(fields['RateLimit-Policy'] ?? '')[0]?.name).to.equal('a"b\\c??');
  });

  it('keeps t and X-RateLimit-Reset no earlier than Retry-After for a denying rule', () => {
    const d = decision([rule({ allowed: false, remaining: 0, resetMs: 10_000, retryAfterMs: 30_000 })]);
    const fields = toObject(formatHeaders(d, { headers: 'both', reset: 'delta-seconds' }));
    expect(fields['Retry-After']).to.equal('30');
    expect(fields['X-RateLimit-Reset']).to.equal('30');
    expect(fields.RateLimit).to.equal('"api";r=0;t=30');
  });

  it('gives a dry-run denial headers but no Retry-After (the request is admitted)', () => {
    const d = decision([rule({ allowed: false, remaining: 0, retryAfterMs: 5000, dryRun: true })]);
    expect(d.allowed).to.equal(true);
    const fields = toObject(formatHeaders(d, { headers: 'both' }));
    expect(fields['X-RateLimit-Remaining']).to.equal('0');
    expect(fields['Retry-After']).to.equal(undefined);
  });

  it('produces fields a strict structured-field reader accepts: q, r, t integers >= 0, w >= 1', () => {
    const rules = [
      rule({ rule: 'x.y-z~_1', limit: 3, remaining: 0, resetMs: 0 }),
      rule({ rule: 'b', limit: 1, remaining: 1, resetMs: 999 }),
    ];
    const fields = toObject(
      formatHeaders(decision(rules), { headers: 'standard', windows: { 'x.y-z~_1': 1, b: 3600 } }),
    );
    const policy = parseList(fields['RateLimit-Policy'] ?? '');
    const state = parseList(fields.RateLimit ?? '');
    expect(policy).to.deep.equal([
      { name: 'x.y-z~_1', params: { q: 3, w: 1 } },
      { name: 'b', params: { q: 1, w: 3600 } },
    ]);
    expect(state).to.deep.equal([
      { name: 'x.y-z~_1', params: { r: 0, t: 0 } },
      { name: 'b', params: { r: 1, t: 1 } },
    ]);
  });
});

describe('adapter helpers', () => {
  it('takes the path of a request target without query or fragment, including absolute-form', () => {
    expect(pathOf('/login?next=/x')).to.equal('/login');
    expect(pathOf('/a#b')).to.equal('/a');
    expect(pathOf('http://example.com/users/1/like?x=1')).to.equal('/users/1/like');
    expect(pathOf('*')).to.equal('*');
  });

  it("judges a thrown error by its status, else 500, like Koa's error handling", () => {
    expect(errorStatus({ status: 401 })).to.equal(401);
    expect(errorStatus({ statusCode: 503 })).to.equal(503);
    expect(errorStatus({ status: 200 })).to.equal(500);
    expect(errorStatus(new Error('x'))).to.equal(500);
    expect(errorStatus(null)).to.equal(500);
  });

  it('refuses bad adapter options at construction with RateLimitConfigError', () => {
    const rules = [{ name: 'a', key: 'ip', limit: 1, window: { type: 'fixed', size: '1s' } } as const];
    expect(() => createSetup([...rules], { statusCode: 200 })).to.throw(
      RateLimitConfigError,
      'statusCode must be an integer from 400 to 599, got 200',
    );
    expect(() => createSetup([...rules], { headers: 'draft-8' as never })).to.throw(
      RateLimitConfigError,
      "headers must be 'legacy', 'draft-6', 'draft-7', 'standard', 'both' or false, got 'draft-8'",
    );
    expect(() => createSetup([...rules], { reset: 'ms' as never })).to.throw(
      RateLimitConfigError,
      "reset must be 'epoch-seconds'",
    );
  });
});
