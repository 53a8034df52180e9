// What a window type says of itself (src/algorithms/<type>.ts) and the facts a compiled rule carries,
// as the limiter lists them for the adapters, the deny cache and slowDown.
import { expect } from 'chai';
import { algorithms, WINDOW_NAMES, windowKind, windowTypeOf } from '../../../src/algorithms/index.js';
import { createLimiter, type Rule } from '../../../src/index.js';
import { describeWindow } from '../../../src/operators/rule-summary.js';

const rules: Rule[] = [
  { name: 'ip', key: 'ip', limit: 100, window: { type: 'fixed', size: '1m' } },
  { name: 'sms', key: 'sms:{body.phone}', limit: 3, window: { type: 'calendar', unit: 'day' } },
  {
    name: 'login',
    key: ['ip', 'body.username'],
    limit: 5,
    window: { type: 'sliding', size: '15m' },
    countOn: 'failure',
    lockout: { duration: '15m' },
  },
  { name: 'api', key: 'user', limit: 10, window: { type: 'token-bucket', size: '1s', burst: 40 } },
  { name: 'meter', key: 'header:x-key', limit: 10, window: { type: 'leaky-bucket', size: '1s' } },
  {
    name: 'reset',
    key: () => 'k',
    limit: 2,
    window: { type: 'sliding-log', size: '1h' },
    resetOnSuccess: true,
  },
];

describe('window types', () => {
  it('name every type and alias a rule may give, and resolve an alias to its type', () => {
    expect(WINDOW_NAMES).to.deep.equal([
      'fixed',
      'calendar',
      'sliding-log',
      'sliding',
      'token-bucket',
      'gcra',
      'concurrency',
      'leaky-bucket',
    ]);
    expect(windowTypeOf('leaky-bucket')).to.equal('gcra');
    expect(windowTypeOf('tokenbucket')).to.equal(undefined);
    expect(windowTypeOf(7)).to.equal(undefined);
  });

  it('give a bucket its burst as capacity (the limit when none), every other window its limit', () => {
    for (const [type, algorithm] of Object.entries(algorithms)) {
      const bucket = algorithm.kind.fields.includes('burst');
      expect(algorithm.kind.capacity(10, 0), type).to.equal(10);
      expect(algorithm.kind.capacity(10, 40), type).to.equal(bucket ? 40 : 10);
      expect(algorithm.kind.maxLimit === undefined, type).to.equal(!bucket);
    }
  });

  it('bound a bucket where max(limit, burst) × size in µs passes 2^53 (GCRA: 2^52, its TAT adds the epoch), exactly', () => {
    const most = windowKind('token-bucket').maxLimit?.(3) as number;
    expect(most * 3000).to.be.at.most(Number.MAX_SAFE_INTEGER);
    expect((most + 1) * 3000).to.be.greaterThan(Number.MAX_SAFE_INTEGER);
    const gcraMost = windowKind('gcra').maxLimit?.(3) as number;
    expect(gcraMost * 3000).to.be.at.most(2 ** 52);
    expect((gcraMost + 1) * 3000).to.be.greaterThan(2 ** 52);
  });

  it('describe themselves in plain words for the operators', () => {
    expect(describeWindow({ type: 'leaky-bucket', size: '1s', burst: 5 })).to.equal('per 1s (GCRA, burst 5)');
    expect(describeWindow({ type: 'calendar', unit: 'day', timezone: 'Asia/Shanghai' })).to.equal(
      'per day (calendar, Asia/Shanghai)',
    );
    expect(describeWindow({ type: 'sliding-log', size: '15m' })).to.equal('per 15m (sliding log)');
    expect(describeWindow({ type: 'concurrency', lease: '30s' })).to.equal(
      'in flight at once (concurrency, lease 30s)',
    );
  });
});

describe('rule facts', () => {
  const limiter = createLimiter({ rules });
  after(() => limiter.close());
  const facts = Object.fromEntries(limiter.ruleFacts.map((f) => [f.name, f]));

  it('lists every rule in order', () => {
    expect(limiter.ruleFacts.map((f) => f.name)).to.deep.equal(rules.map((r) => r.name));
  });

  it('say whose key reads the client address and whose reads the body (a function claims neither)', () => {
    const reads = limiter.ruleFacts.map((f) => [f.name, f.keysOnIp, f.readsBody]);
    expect(reads).to.deep.equal([
      ['ip', true, false],
      ['sms', false, true],
      ['login', true, true],
      ['api', false, false],
      ['meter', false, false],
      ['reset', false, false],
    ]);
  });

  it('say which rules count outcomes and which have a lockout', () => {
    expect(limiter.ruleFacts.filter((f) => f.countsOutcomes).map((f) => f.name)).to.deep.equal([
      'login',
      'reset',
    ]);
    expect(limiter.ruleFacts.filter((f) => f.hasLockout).map((f) => f.name)).to.deep.equal(['login']);
    expect(limiter.needsOutcomes).to.equal(true);
  });

  it('say which rules hold slots until released and which settle their cost', () => {
    const more = createLimiter({
      rules: [
        { name: 'exports', key: 'user', limit: 2, window: { type: 'concurrency' } },
        { name: 'tokens', key: 'user', limit: 1000, window: { type: 'fixed', size: '1d' }, settle: true },
      ],
    });
    expect(more.ruleFacts.map((f) => [f.name, f.holdsSlots, f.settles])).to.deep.equal([
      ['exports', true, false],
      ['tokens', false, true],
    ]);
    expect(facts.api).to.include({ holdsSlots: false, settles: false });
    return more.close();
  });

  it('say whose match names a path (a method alone, or no match, does not)', () => {
    const more = createLimiter({
      rules: [
        { name: 'all', key: 'ip', limit: 5, window: { type: 'fixed', size: '1m' } },
        {
          name: 'posts',
          match: { method: 'POST' },
          key: 'ip',
          limit: 5,
          window: { type: 'fixed', size: '1m' },
        },
        {
          name: 'methods',
          match: { method: ['GET', 'PUT'] },
          key: 'ip',
          limit: 5,
          window: { type: 'fixed', size: '1m' },
        },
        { name: 'login', match: 'POST /login', key: 'ip', limit: 5, window: { type: 'fixed', size: '1m' } },
        {
          name: 'items',
          match: { path: ['/items/:id', '/things'] },
          key: 'ip',
          limit: 5,
          window: { type: 'fixed', size: '1m' },
        },
      ],
    });
    expect(more.ruleFacts.map((f) => [f.name, f.matchesPath])).to.deep.equal([
      ['all', false],
      ['posts', false],
      ['methods', false],
      ['login', true],
      ['items', true],
    ]);
    return more.close();
  });

  it("give each window's type (an alias resolved), its name and its capacity at a limit", () => {
    expect(facts.meter).to.include({ type: 'gcra', windowTitle: 'GCRA', bucket: true });
    expect(facts.meter?.capacity(25)).to.equal(25);
    expect(facts.api).to.include({ type: 'token-bucket', windowTitle: 'token bucket', bucket: true });
    expect(facts.api?.capacity(25)).to.equal(40);
    expect(facts.sms).to.include({ type: 'calendar', bucket: false });
    expect(facts.sms?.capacity(25)).to.equal(25);
  });
});
