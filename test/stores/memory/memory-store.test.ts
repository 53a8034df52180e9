// The conformance suite on the memory store, plus what only the memory store has: its bound and its timer.
import { spawnSync } from 'node:child_process';
import { expect } from 'chai';
import { createLimiter, MemoryStore } from '../../../src/index.js';
import { until } from '../../support/settle.js';
import { identitySuite } from '../conformance/identities.js';
import { overrideWindowSuite } from '../conformance/override-window.js';
import { overrideSuite } from '../conformance/overrides.js';
import { ruleLimitSuite } from '../conformance/rule-limits.js';
import { conformanceSuite } from '../conformance/suite.js';
import { windowFunctionSuite } from '../conformance/window-function.js';

conformanceSuite({ name: 'MemoryStore', makeStore: (clock) => new MemoryStore({ clock }) });
// Overrides: on RedisStore once it implements Store.override (redis helper), from redis-conformance too.
overrideSuite({ name: 'MemoryStore', makeStore: (clock) => new MemoryStore({ clock }) });
ruleLimitSuite({ name: 'MemoryStore', makeStore: (clock) => new MemoryStore({ clock }) });
windowFunctionSuite({ name: 'MemoryStore', makeStore: (clock) => new MemoryStore({ clock }) });
overrideWindowSuite({ name: 'MemoryStore', makeStore: (clock) => new MemoryStore({ clock }) });
identitySuite({ name: 'MemoryStore', makeStore: (clock) => new MemoryStore({ clock }) });

describe('MemoryStore bounds', () => {
  const rule = { name: 'r', key: 'ip', limit: 1, window: { type: 'fixed', size: '1h' } } as const;

  it('stays within maxKeys under a flood of distinct keys', async () => {
    const store = new MemoryStore({ maxKeys: 1000 });
    const limiter = createLimiter({ store, rules: [{ ...rule, limit: 2 }] });
    for (let i = 0; i < 20_000; i++) await limiter.consume('r', `k${i}`);
    expect(store.size).to.equal(1000);
    await limiter.close();
  });

  it('never evicts a locked key to make room, so a flood cannot release an attacker', async () => {
    const store = new MemoryStore({ maxKeys: 100 });
    const limiter = createLimiter({ store, rules: [{ ...rule, limit: 2, lockout: { duration: '1h' } }] });
    await limiter.consume('r', 'attacker');
    await limiter.consume('r', 'attacker');
    expect((await limiter.consume('r', 'attacker')).locked).to.equal(true);
    for (let i = 0; i < 10_000; i++) await limiter.consume('r', `flood${i}`);
    expect(store.size).to.be.at.most(100);
    const status = await limiter.status('r', 'attacker');
    expect(status.locked).to.equal(true);
    expect((await limiter.consume('r', 'attacker')).allowed).to.equal(false);
    await limiter.close();
  });

  it('evicts the least recently written idle key first, never everything', async () => {
    const store = new MemoryStore({ maxKeys: 3 });
    const limiter = createLimiter({ store, rules: [{ ...rule, limit: 5 }] });
    await limiter.consume('r', 'a');
    await limiter.consume('r', 'b');
    await limiter.consume('r', 'c');
    await limiter.consume('r', 'a');
    await limiter.consume('r', 'd');
    expect((await limiter.status('r', 'b')).count, 'b was idle longest').to.equal(0);
    expect((await limiter.status('r', 'a')).count).to.equal(2);
    expect((await limiter.status('r', 'c')).count).to.equal(1);
    expect((await limiter.status('r', 'd')).count).to.equal(1);
    await limiter.close();
  });

  it('sweeps expired keys on its timer', async () => {
    let now = 1_000_000;
    const store = new MemoryStore({ clock: () => now, sweepIntervalMs: 20 });
    const limiter = createLimiter({ store, rules: [{ ...rule, window: { type: 'fixed', size: '1s' } }] });
    for (let i = 0; i < 50; i++) await limiter.consume('r', `k${i}`);
    expect(store.size).to.equal(50);
    now += 1000;
    // Nothing but the sweep timer removes them: no decision is made meanwhile.
    await until('the sweep timer emptied the store', () => store.size === 0);
    await limiter.close();
  });

  it('starts no timer when made, only at its first call (Workers refuse timers at import)', async () => {
    const real = globalThis.setInterval;
    let started = 0;
    globalThis.setInterval = ((...args: Parameters<typeof setInterval>) => {
      started++;
      return real(...args);
    }) as typeof setInterval;
    try {
      const store = new MemoryStore();
      const limiter = createLimiter({ store, rules: [rule] });
      expect(started).to.equal(0);
      await limiter.consume('r', 'k');
      await limiter.consume('r', 'k');
      expect(started).to.equal(1);
      await limiter.close();
      await store.close();
      // Closed, it starts none again.
      store.now();
      expect(started).to.equal(1);
    } finally {
      globalThis.setInterval = real;
    }
  });

  it('keeps no timer that holds the process open', () => {
    const script = `import { createLimiter } from './src/index.ts';
      const l = createLimiter({ rules: [{ name: 'r', key: 'ip', limit: 1, window: { type: 'fixed', size: '1h' } }] });
      await l.consume('r', 'k');
      console.log('done');`;
    const child = spawnSync(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', script], {
      timeout: 15_000,
      encoding: 'utf8',
    });
    expect(child.stdout.trim()).to.equal('done');
    expect(child.status, child.stderr).to.equal(0);
  });
});
