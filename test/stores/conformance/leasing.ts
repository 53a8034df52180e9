// Conformance with leasing at its lowest thresholds: exact counts across blocks, windows ended on the store's
// clock, resets and limit changes reaching blocks, and units given back reaching another process's deny cache.
import { expect } from 'chai';
import { createLimiter, type Limiter, type Rule, type Store } from '../../../src/index.js';
import { PATIENT, until } from '../../support/settle.js';
import { useLimiters } from './limits.js';
import { fakeClock, type StoreUnderTest, WINDOWS } from './suite.js';

export interface LeasedStoreUnderTest extends StoreUnderTest {
  /** Two leasing stores on one space (prefix, schema): two processes' views of the same keys. */
  makeShared(clock: () => number): Promise<[Store, Store]>;
}

const req = { method: 'GET', path: '/', ip: '10.0.0.9', headers: {} };

/** Checks until the first denial: the `remaining` of each admission. */
async function drain(l: Limiter): Promise<number[]> {
  const remaining: number[] = [];
  for (;;) {
    const d = await l.check(req);
    if (!d.allowed) return remaining;
    remaining.push(d.remaining);
  }
}

const countdown = (from: number) => Array.from({ length: from }, (_, i) => from - 1 - i);

export function leasingSuite(target: LeasedStoreUnderTest): void {
  describe(`leasing: ${target.name}`, () => {
    const { limiter, clock } = useLimiters(target);

    for (const type of ['fixed', 'calendar'] as const) {
      const rule: Rule = { name: 'hot', key: 'ip', limit: 100, window: WINDOWS[type] };

      it(`${type}: admits exactly the limit through blocks and top-ups, remaining counting down by one`, async () => {
        const l = await limiter([rule]);
        expect(await drain(l)).to.deep.equal(countdown(100));
        expect((await l.status('hot', '10.0.0.9')).count).to.equal(100);
      });

      it(`${type}: a block ends with its window on the store's clock: no unit of one window is admitted in the next`, async () => {
        const l = await limiter([rule]);
        for (let i = 0; i < 50; i++) await l.check(req);
        clock().advance(60_000);
        expect(await drain(l)).to.deep.equal(countdown(100));
      });
    }

    for (const type of ['token-bucket', 'gcra'] as const) {
      it(`${type}: never admits over the limit through blocks, each holding its refill back`, async () => {
        const l = await limiter([{ name: 'hot', key: 'ip', limit: 100, window: WINDOWS[type] }]);
        const remaining = await drain(l);
        // The lower bound (limit − blocks × their reserved refill) is asserted where blocks are counted:
        // test/processes/leasing-processes.test.ts.
        expect(remaining.length).to.be.at.most(100).and.at.least(50);
      });
    }

    it("a reset reaches the key's block: no unit counted before it is admitted after it", async () => {
      const l = await limiter([{ name: 'hot', key: 'ip', limit: 100, window: WINDOWS.fixed }]);
      for (let i = 0; i < 60; i++) await l.check(req);
      await l.reset('hot', '10.0.0.9');
      // The reset's announcement comes back to this process too, and drops a take in flight when it
      // lands (docs/exactness.md, "Faults and announcements"): at most that one block, half of what the
      // store had left, is lost; never a unit over the limit.
      const remaining = await drain(l);
      expect(remaining.length).to.be.within(50, 100);
      expect(remaining.at(-1)).to.equal(0);
    });

    it("an override and a rule-wide limit reach the key's block, whose unused units go back: exactly the new limit", async () => {
      const l = await limiter([{ name: 'hot', key: 'ip', limit: 100, window: WINDOWS.fixed }]);
      for (let i = 0; i < 30; i++) await l.check(req);
      await l.override('hot', '10.0.0.9', 150);
      expect((await drain(l)).length, 'override').to.equal(120);
      const other = { ...req, ip: '10.0.0.8' };
      for (let i = 0; i < 30; i++) await l.check(other);
      await l.setLimit('hot', 60);
      let admitted = 0;
      while ((await l.check(other)).allowed) admitted++;
      expect(admitted, 'rule-wide').to.equal(30);
    });

    it('a multi-rule request passes on one leased rule and one that is not: neither rule loses units', async () => {
      const l = await limiter([
        { name: 'hot', key: 'ip', limit: 100, window: WINDOWS.fixed },
        { name: 'cold', key: 'ip', limit: 1000, window: WINDOWS.sliding },
      ]);
      const remaining = await drain(l);
      expect(remaining).to.deep.equal(countdown(100));
      expect((await l.status('cold', '10.0.0.9')).count).to.equal(100);
    });

    it("units given back by an idle block reach another process's deny cache: it admits them", async () => {
      const time = fakeClock();
      const [mine, theirs] = await target.makeShared(time.read);
      const rules: Rule[] = [{ name: 'hot', key: 'ip', limit: 100, window: WINDOWS.fixed }];
      const holder = createLimiter({ store: mine, rules, ...PATIENT });
      const denied = createLimiter({ store: theirs, rules, ...PATIENT });
      const fromCache: boolean[] = [];
      denied.on('limited', (e) => fromCache.push(e.cached));
      try {
        // The holder takes blocks; the other process takes what the store has left, and is denied.
        for (let i = 0; i < 40; i++) await holder.check(req);
        expect((await denied.status('hot', '10.0.0.9')).count, 'the holder holds units').to.be.above(40);
        await drain(denied);
        expect((await denied.check(req)).allowed).to.equal(false);
        expect(fromCache.at(-1), 'the denial is the deny cache’s').to.equal(true);
        // The holder goes quiet: its block goes back after idleMs, and is announced.
        await until('the other process admits a unit of the block given back', async () => {
          return (await denied.check(req)).allowed;
        });
      } finally {
        await Promise.all([holder.close(), denied.close()]);
      }
    });
  });
}
