// src/rules/window-choice.ts: a window chosen per request, as compiled: the rule's type and its direct-call window come from the function's
// answer to DIRECT_REQUEST; grouped rules keep their choice on the grouped store rule; such a rule is never leased.
import { expect } from 'chai';
import { describeWindow } from '../../../src/operators/rule-summary.js';
import { compileRules } from '../../../src/rules/compile.js';
import { DIRECT_REQUEST } from '../../../src/rules/rule-index.js';
import { requestWindow } from '../../../src/rules/window-choice.js';
import type { RequestInfo, Rule } from '../../../src/types.js';

const plan = (size: string): RequestInfo => ({
  method: 'GET',
  path: '/',
  headers: {},
  user: { id: 'u', size },
});
const bySize = (req: RequestInfo) => (req.user as { size?: string } | undefined)?.size ?? '1m';

describe('window functions, compiled', () => {
  it("takes the rule's type and direct-call window from the function's answer to DIRECT_REQUEST", () => {
    const seen: RequestInfo[] = [];
    const [rule] = compileRules(
      [
        {
          name: 'api',
          key: 'user',
          limit: 5,
          window: (req: RequestInfo) => {
            seen.push(req);
            return { type: 'leaky-bucket', size: bySize(req) };
          },
        },
      ],
      { ipv6Subnet: 56 },
    );
    expect(seen).to.deep.equal([DIRECT_REQUEST]);
    expect(rule?.store).to.include({ type: 'gcra', sizeMs: 60_000, leasable: false });
    expect(rule?.windowSeconds).to.equal(60);
  });

  it('gives each size one store rule (the same object for the direct-call size), the rest of it the rule’s', () => {
    const [rule] = compileRules(
      [
        {
          name: 'api',
          key: 'user',
          limit: 5,
          window: (req: RequestInfo) => ({ type: 'fixed', size: bySize(req) }),
        },
      ],
      { ipv6Subnet: 56 },
    );
    const chosen = rule?.chosen;
    if (chosen === undefined) throw new Error('no chosen window');
    expect(requestWindow(chosen, plan('1m')).store).to.equal(rule?.store);
    const hour = requestWindow(chosen, plan('1h'));
    expect(hour).to.deep.equal({
      store: { ...rule?.store, sizeMs: 3_600_000 },
      periods: undefined,
      windowSeconds: 3600,
    });
    expect(requestWindow(chosen, plan('1h'))).to.equal(hour);
  });

  it('grouped rules (one key form) keep their choice on the grouped store rule', () => {
    const rules: Rule[] = [
      { name: 'a', key: 'user', limit: 5, window: (req) => ({ type: 'fixed', size: bySize(req) }) },
      { name: 'b', key: 'user', limit: 5, window: { type: 'gcra', size: '1m' } },
    ];
    const [a] = compileRules(rules, { ipv6Subnet: 56 });
    expect(a?.store.grouped).to.equal(true);
    expect(a?.chosen?.store).to.equal(a?.store);
    const chosen = a?.chosen;
    if (chosen === undefined) throw new Error('no chosen window');
    expect(requestWindow(chosen, plan('1h')).store).to.include({ grouped: true, sizeMs: 3_600_000 });
  });

  it("gives a calendar rule's choices periods of their own on the rule's store rule, one per unit, cron and zone", () => {
    const [rule] = compileRules(
      [
        {
          name: 'api',
          key: 'user',
          limit: 5,
          window: (req: RequestInfo) =>
            (req.user as { size?: string } | undefined)?.size === 'cron'
              ? { type: 'calendar', cron: '0 */6 * * *' }
              : { type: 'calendar', unit: 'day', timezone: 'Asia/Tokyo' },
        },
      ],
      { ipv6Subnet: 56 },
    );
    const chosen = rule?.chosen;
    if (chosen === undefined) throw new Error('no chosen window');
    const cron = requestWindow(chosen, plan('cron'));
    const day = requestWindow(chosen, plan('day'));
    expect([cron.store, day.store]).to.deep.equal([rule?.store, rule?.store]);
    expect([cron.windowSeconds, day.windowSeconds, rule?.windowSeconds]).to.deep.equal([0, 86400, 86400]);
    const at = Date.parse('2026-01-05T10:05:00Z');
    expect(cron.periods?.(at).endMs).to.equal(Date.parse('2026-01-05T12:00:00Z'));
    expect(day.periods?.(at).endMs).to.equal(Date.parse('2026-01-05T15:00:00Z'));
    expect(requestWindow(chosen, plan('cron'))).to.equal(cron);
  });

  it('is described to operators as chosen per request', () => {
    expect(describeWindow(() => ({ type: 'fixed', size: '1m' }))).to.equal('per window chosen per request');
  });
});

describe('window functions, attacked', () => {
  const [rule] = compileRules(
    [
      {
        name: 'api',
        key: 'user',
        limit: 5,
        window: (req: RequestInfo) => ({ type: 'fixed', size: bySize(req) }),
      },
    ],
    { ipv6Subnet: 56 },
  );
  const chosen = rule?.chosen;
  if (chosen === undefined) throw new Error('no chosen window');
  const answering = (value: unknown) => ({ ...chosen, choose: () => value as never });

  it('an answer whose fields throw as they are read (a getter, a proxy) is ERR_WINDOW naming the rule', () => {
    const getter = Object.defineProperty({}, 'type', {
      enumerable: true,
      get() {
        throw new Error('gotcha');
      },
    });
    const proxy = new Proxy(
      {},
      {
        ownKeys() {
          throw new Error('no keys');
        },
        get: (_t, name) => (name === 'type' ? 'fixed' : undefined),
      },
    );
    for (const value of [getter, proxy]) {
      expect(() => requestWindow(answering(value), plan('1m')))
        .to.throw(/rule "api": window function threw/)
        .with.property('code', 'ERR_WINDOW');
    }
  });

  it('an answer with a hostile size (Infinity, a huge string, an object) is ERR_WINDOW', () => {
    for (const size of [Number.POSITIVE_INFINITY, '9'.repeat(400), { valueOf: () => 60_000 }, '11y', 1e300]) {
      expect(() => requestWindow(answering({ type: 'fixed', size }), plan('1m')), String(size))
        .to.throw(/rule "api": window function must give a size/)
        .with.property('code', 'ERR_WINDOW');
    }
  });
});
