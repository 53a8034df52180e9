// Every header form ratekeeper sends, read by a strict RFC 9651 parser (structured-headers) at the extremes: a
// limit of Number.MAX_SAFE_INTEGER, zeros, 30-day windows and waits. No field may be one a strict client drops.
import { expect } from 'chai';
import { type Item, type List, parseDictionary, parseItem, parseList } from 'structured-headers';
import { type HeadersMode, MAX_HEADER_INTEGER } from '../../src/headers.js';
import { type Decision, formatHeaders, type RuleResult } from '../../src/index.js';

const NOW = Date.parse('2026-03-02T00:00:00.250Z');
const DAYS_30_MS = 30 * 86_400_000;
const DAYS_30 = 30 * 86_400;
const MODES: HeadersMode[] = ['legacy', 'draft-6', 'draft-7', 'standard', 'both'];

function result(over: Partial<RuleResult>): RuleResult {
  return {
    rule: 'plan',
    key: 'k',
    allowed: true,
    limit: 5,
    remaining: 4,
    count: 1,
    resetMs: 1000,
    locked: false,
    ...over,
  };
}

function decisionOf(r: RuleResult, others: RuleResult[] = []): Decision {
  const d: Decision = { ...r, rules: [r, ...others] };
  return d;
}

/** Extremes: an "unlimited" plan, everything zero on a denial, 30-day windows and waits. */
const CASES: Record<string, { decision: Decision; windows: Record<string, number> }> = {
  'a limit of Number.MAX_SAFE_INTEGER': {
    decision: decisionOf(
      result({ limit: Number.MAX_SAFE_INTEGER, remaining: Number.MAX_SAFE_INTEGER - 1, resetMs: DAYS_30_MS }),
      [result({ rule: 'day', limit: 5, remaining: 0, resetMs: 86_400_000 })],
    ),
    windows: { plan: DAYS_30, day: 86_400 },
  },
  'zeros: nothing remaining, no reset, denied with the shortest wait': {
    decision: decisionOf(result({ allowed: false, limit: 1, remaining: 0, resetMs: 0, retryAfterMs: 0 })),
    windows: {},
  },
  'a denial locked for 30 days on a 30-day window': {
    decision: decisionOf(
      result({ allowed: false, locked: true, remaining: 3, resetMs: DAYS_30_MS, retryAfterMs: DAYS_30_MS }),
    ),
    windows: { plan: DAYS_30 },
  },
  'a limit past 15 digits on a window past 15 digits of seconds': {
    decision: decisionOf(result({ limit: 2 ** 52, remaining: 2 ** 52, resetMs: 1e18 })),
    windows: { plan: 2 ** 52 },
  },
};

/** An Integer of 15 digits at most, never negative: what an RFC 9651 Integer field must hold here. */
function integer(value: unknown): number {
  expect(value).to.be.a('number');
  expect(Number.isInteger(value), String(value)).to.equal(true);
  expect(value as number).to.be.within(0, MAX_HEADER_INTEGER);
  return value as number;
}

function itemInteger(field: string): number {
  const [value, params] = parseItem(field) as Item;
  expect(params.size).to.equal(0);
  return integer(value);
}

/** Each list member's name and integer parameters. */
function members(list: List): Array<{ name: unknown; params: Record<string, number> }> {
  return list.map(([value, params]) => ({
    name: value,
    params: Object.fromEntries([...params].map(([k, v]) => [k, integer(v)])),
  }));
}

/** Every field parsed as its RFC 9651 type; throws (the test fails) on any field a strict parser drops. */
function parseFields(fields: Array<[string, string]>): Record<string, unknown> {
  const parsed: Record<string, unknown> = {};
  for (const [name, value] of fields) {
    if (name === 'RateLimit-Policy') parsed[name] = members(parseList(value));
    else if (name === 'RateLimit' && value.startsWith('"')) parsed[name] = members(parseList(value));
    else if (name === 'RateLimit') {
      parsed[name] = Object.fromEntries([...parseDictionary(value)].map(([k, [v]]) => [k, integer(v)]));
    } else parsed[name] = itemInteger(value);
  }
  return parsed;
}

describe('header fields under a strict RFC 9651 parser', () => {
  for (const [label, { decision, windows }] of Object.entries(CASES)) {
    for (const mode of MODES) {
      it(`'${mode}' parses with ${label}`, () => {
        for (const reset of ['epoch-seconds', 'delta-seconds'] as const) {
          const fields = formatHeaders(decision, { headers: mode, reset, nowMs: NOW, windows });
          expect(fields.length).to.be.greaterThan(0);
          parseFields(fields);
        }
      });
    }
  }

  it('sends a limit of Number.MAX_SAFE_INTEGER as 999999999999999 in every form, and 30 days as 2592000', () => {
    const { decision, windows } = CASES['a limit of Number.MAX_SAFE_INTEGER'] as (typeof CASES)[string];
    const at = (mode: HeadersMode) =>
      parseFields(formatHeaders(decision, { headers: mode, reset: 'delta-seconds', nowMs: NOW, windows }));
    const max = MAX_HEADER_INTEGER;
    expect(max).to.equal(999_999_999_999_999);
    // The folded decision's figures are the plan's (as given): legacy and drafts 6 and 7 describe it.
    expect(at('legacy')).to.deep.equal({
      'X-RateLimit-Limit': max,
      'X-RateLimit-Remaining': max,
      'X-RateLimit-Reset': DAYS_30,
    });
    const policy = [
      { name: max, params: { w: DAYS_30 } },
      { name: 5, params: { w: 86_400 } },
    ];
    expect(at('draft-6')).to.deep.equal({
      'RateLimit-Limit': max,
      'RateLimit-Remaining': max,
      'RateLimit-Reset': DAYS_30,
      'RateLimit-Policy': policy,
    });
    expect(at('draft-7')).to.deep.equal({
      RateLimit: { limit: max, remaining: max, reset: DAYS_30 },
      'RateLimit-Policy': policy,
    });
    expect(at('standard')).to.deep.equal({
      'RateLimit-Policy': [
        { name: 'plan', params: { q: max, w: DAYS_30 } },
        { name: 'day', params: { q: 5, w: 86_400 } },
      ],
      RateLimit: [
        { name: 'plan', params: { r: max, t: DAYS_30 } },
        { name: 'day', params: { r: 0, t: 86_400 } },
      ],
    });
  });

  it('sends zeros as 0 and a denial for 30 days as Retry-After 2592000', () => {
    const zero = CASES[
      'zeros: nothing remaining, no reset, denied with the shortest wait'
    ] as (typeof CASES)[string];
    expect(parseFields(formatHeaders(zero.decision, { headers: 'standard' }))).to.deep.equal({
      'RateLimit-Policy': [{ name: 'plan', params: { q: 1 } }],
      RateLimit: [{ name: 'plan', params: { r: 0, t: 0 } }],
      'Retry-After': 1,
    });
    const locked = CASES['a denial locked for 30 days on a 30-day window'] as (typeof CASES)[string];
    const fields = parseFields(
      formatHeaders(locked.decision, { headers: 'draft-7', windows: locked.windows }),
    );
    expect(fields).to.deep.equal({
      RateLimit: { limit: 5, remaining: 0, reset: DAYS_30 },
      'RateLimit-Policy': [{ name: 5, params: { w: DAYS_30 } }],
      'Retry-After': DAYS_30,
    });
  });
});
