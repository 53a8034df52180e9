// The memory store's eviction order under a flood of new keys: what denies stays (locks, escalation levels,
// exhausted counts), the least consequential goes first, and the store says so when it must grow.
import { expect } from 'chai';
import {
  createLimiter,
  type Limiter,
  MEMORY_STORE_FULL_WARNING,
  MemoryStore,
  type Rule,
} from '../../../../src/index.js';

const HOUR = 3_600_000;

describe('MemoryStore eviction under a flood of new keys', () => {
  let now = 1_000_000;
  const clock = () => now;
  let limiter: Limiter;
  afterEach(() => limiter.close());

  function setup(maxKeys: number, rules: Rule[]): MemoryStore {
    const store = new MemoryStore({ maxKeys, clock });
    limiter = createLimiter({ store, rules });
    return store;
  }
  const flood = async (rule: string, count: number) => {
    for (let i = 0; i < count; i++) await limiter.consume(rule, `junk-${i}`);
  };

  it('never evicts an exhausted count, a lock or an escalation level: each holds through 10,000 new keys', async () => {
    const store = setup(100, [
      { name: 'spent', key: 'ip', limit: 3, window: { type: 'gcra', size: '1h' } },
      {
        name: 'pair',
        key: 'ip',
        limit: 2,
        window: { type: 'fixed', size: '1h' },
        lockout: { duration: '1m', escalate: 4, forgetAfter: '1d' },
      },
      { name: 'junk', key: 'ip', limit: 5, window: { type: 'fixed', size: '1h' } },
    ]);
    for (let i = 0; i < 3; i++) expect((await limiter.consume('spent', 'alice')).allowed).to.equal(true);
    for (let i = 0; i < 3; i++) await limiter.consume('pair', 'carol');
    now += 2 * 60_000; // carol's lock is over; her level (1) is remembered for a day
    for (let i = 0; i < 3; i++) await limiter.consume('pair', 'bob'); // locked for a minute
    await flood('junk', 10_000);
    expect(store.size).to.be.at.most(100);

    const spent = await limiter.consume('spent', 'alice');
    expect([spent.allowed, spent.remaining]).to.deep.equal([false, 0]);
    expect(await limiter.status('pair', 'bob')).to.include({ locked: true, level: 1 });
    for (let i = 0; i < 3; i++) await limiter.consume('pair', 'carol');
    const carol = await limiter.status('pair', 'carol');
    expect([carol.level, carol.lockRemainingMs], 'escalated: 4 minutes').to.deep.equal([2, 4 * 60_000]);
  });

  it('evicts the keys that counted the fewest units first, so a flood of single hits goes before any count of 2 or more', async () => {
    const store = setup(50, [
      { name: 'cap', key: 'ip', limit: 100, window: { type: 'fixed', size: '30d' } },
      { name: 'pair', key: 'ip', limit: 5, window: { type: 'fixed', size: '15m' } },
    ]);
    for (let i = 0; i < 60; i++) await limiter.consume('cap', 'alice');
    for (let i = 0; i < 4; i++) await limiter.consume('pair', 'alice|10.0.0.1');
    await flood('cap', 5_000);
    await flood('pair', 5_000);
    expect(store.size).to.equal(50);
    expect((await limiter.status('cap', 'alice')).count).to.equal(60);
    expect((await limiter.status('pair', 'alice|10.0.0.1')).count).to.equal(4);
  });

  it('grows past maxKeys with one warning while every key denies, and evicts back down once they no longer do', async () => {
    const warnings: string[] = [];
    const onWarning = (warning: Error & { code?: string }) => {
      if (warning.code === MEMORY_STORE_FULL_WARNING) warnings.push(warning.message);
    };
    process.on('warning', onWarning);
    try {
      const store = setup(10, [{ name: 'once', key: 'ip', limit: 1, window: { type: 'fixed', size: '1h' } }]);
      await flood('once', 25);
      expect(store.size, 'every exhausted count kept').to.equal(25);
      for (let i = 0; i < 25; i++)
        expect((await limiter.consume('once', `junk-${i}`)).allowed).to.equal(false);
      await new Promise((resolve) => setImmediate(resolve));
      expect(warnings).to.have.length(1);
      expect(warnings[0]).to.match(/more than maxKeys \(10\).*Raise maxKeys, or use a RedisStore/);

      now += HOUR; // the windows end: nothing denies any more
      await limiter.consume('once', 'fresh');
      expect(store.size).to.be.at.most(10);
      await new Promise((resolve) => setImmediate(resolve));
      expect(warnings).to.have.length(1);
    } finally {
      process.off('warning', onWarning);
    }
  });
});
