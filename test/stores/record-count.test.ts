// record() is counting: its decisions carry each rule's windowed count, past the limit too, on every store.
import { expect } from 'chai';
import { createLimiter, type Limiter, type Rule, type WindowSpec } from '../../src/index.js';
import { PATIENT } from '../support/settle.js';
import { memoryStores, redisStores, type StoreFactory } from '../support/stores.js';

const START = Date.parse('2026-05-04T10:00:00.000Z');

for (const factory of [memoryStores, redisStores] satisfies StoreFactory[]) {
  describe(`record() counts (${factory.name} store)`, () => {
    let now = START;
    const clock = () => now;
    const limiters: Limiter[] = [];
    afterEach(async () => {
      for (const limiter of limiters.splice(0)) await limiter.close();
    });
    async function limiterFor(rules: Rule[]): Promise<Limiter> {
      now = START;
      const limiter = createLimiter({ ...PATIENT, store: await factory.makeStore(clock), rules });
      limiters.push(limiter);
      return limiter;
    }

    it('reports the windowed total on each rule and at the top, allowed turning false past the limit', async () => {
      const limiter = await limiterFor([
        { name: 'points', key: 'ip', limit: 3, window: { type: 'fixed', size: '1m' } },
      ]);
      const seen: Array<[boolean, number, number]> = [];
      for (const amount of [1, 1, 1, 1, 2]) {
        const d = await limiter.record('points', 'player', amount);
        expect(d.count, 'top-level count is the rule count').to.equal(d.rules[0]?.count);
        seen.push([d.allowed, d.count, d.remaining]);
      }
      expect(seen).to.deep.equal([
        [true, 1, 2],
        [true, 2, 1],
        [true, 3, 0],
        [false, 4, 0],
        [false, 6, 0],
      ]);
      const denied = await limiter.consume('points', 'player');
      expect([denied.allowed, denied.count], 'a denied consume adds nothing').to.deep.equal([false, 6]);
      expect((await limiter.status('points', 'player')).count).to.equal(6);
    });

    it('counts the same total in every window type (1000 points within 3 s: a critical hit)', async () => {
      const windows: WindowSpec[] = [
        { type: 'fixed', size: '3s' },
        { type: 'calendar', unit: 'minute' },
        { type: 'sliding-log', size: '3s' },
        { type: 'sliding', size: '3s', buckets: 3 },
        { type: 'token-bucket', size: '3s' },
        { type: 'gcra', size: '3s' },
      ];
      const limiter = await limiterFor(
        windows.map((window, i) => ({ name: `w${i}`, key: 'ip', limit: 1000, window })),
      );
      for (let i = 0; i < windows.length; i++) {
        const counts: number[] = [];
        for (const amount of [400, 500, 300])
          counts.push((await limiter.record(`w${i}`, 'hero', amount)).count);
        expect(counts, windows[i]?.type).to.deep.equal([400, 900, 1200]);
      }
    });

    it('a token bucket a record took into debt refills at its rate until admitted (regression: frozen after size ms)', async () => {
      // 2 tokens per second, burst 2: one token every 500 ms.
      const limiter = await limiterFor([
        { name: 'tb', key: 'ip', limit: 2, window: { type: 'token-bucket', size: '1s' } },
      ]);
      expect((await limiter.record('tb', 'k', 6)).count).to.equal(6); // 4 tokens of debt
      const first = await limiter.consume('tb', 'k');
      expect([first.allowed, first.retryAfterMs]).to.deep.equal([false, 2500]);
      now += 1500;
      const later = await limiter.consume('tb', 'k');
      expect([later.allowed, later.retryAfterMs, later.count]).to.deep.equal([false, 1000, 3]);
      now += 999;
      expect((await limiter.consume('tb', 'k')).retryAfterMs).to.equal(1);
      now += 1;
      expect((await limiter.consume('tb', 'k')).allowed).to.equal(true);
    });
  });
}
