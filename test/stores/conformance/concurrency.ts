// Conformance: the concurrency window on every store: slots held until released or lapsed, decided with the other rules.
import { expect } from 'chai';
import type { Rule, StoreOp } from '../../../src/index.js';
import { until } from '../../support/settle.js';
import { useLimiters } from './limits.js';
import type { StoreUnderTest } from './suite.js';

const req = (user = 'u1') => ({ method: 'POST', path: '/exports', headers: {}, user });

/** At most `limit` exports of a user in flight at once, slots leased for 10 s. */
const exports = (limit = 2, lease = '10s'): Rule => ({
  name: 'exports',
  key: 'user',
  limit,
  window: { type: 'concurrency', lease },
});

export function concurrencySuite(target: StoreUnderTest): void {
  describe(`conformance: concurrency window, ${target.name}`, () => {
    const { clock, limiter } = useLimiters(target);

    it('admits exactly the limit in flight, denies the next without taking a slot, and a release frees one', async () => {
      const l = await limiter([exports(2)]);
      const a = await l.check(req());
      const b = await l.check(req());
      const denied = await l.check(req());
      expect([a.allowed, b.allowed, denied.allowed]).to.deep.equal([true, true, false]);
      expect(denied).to.include({ rule: 'exports', remaining: 0, count: 2 });
      // The soonest lease end: the latest a slot frees if its holder stops renewing.
      expect(denied.retryAfterMs).to.equal(10_000);
      expect((await l.status('exports', 'u1')).count).to.equal(2);
      await l.release(a);
      expect((await l.status('exports', 'u1')).count).to.equal(1);
      const c = await l.check(req());
      expect(c).to.include({ allowed: true, remaining: 0, count: 2 });
      expect((await l.check(req())).allowed).to.equal(false);
    });

    it('a release is idempotent: twice, or of a denied decision, frees nothing more', async () => {
      const l = await limiter([exports(2)]);
      const a = await l.check(req());
      const b = await l.check(req());
      const denied = await l.check(req());
      await l.release(a);
      await l.release(a);
      await l.release(denied);
      expect((await l.status('exports', 'u1')).count).to.equal(1);
      await Promise.all([l.release(b), l.release(b)]);
      expect((await l.status('exports', 'u1')).count).to.equal(0);
    });

    it('slots taken in the same millisecond are distinct: releasing one frees that one only', async () => {
      const l = await limiter([exports(3)]);
      const held = [await l.check(req()), await l.check(req()), await l.check(req())];
      await l.release(held[1] as never);
      expect((await l.status('exports', 'u1')).count).to.equal(2);
      const again = await l.check(req());
      expect(again.allowed).to.equal(true);
      await l.release(held[1] as never);
      expect((await l.status('exports', 'u1')).count).to.equal(3);
    });

    it("is decided with the request's other rules: all take, or none does", async () => {
      const l = await limiter([
        exports(1),
        { name: 'hourly', key: 'user', limit: 2, window: { type: 'fixed', size: '1h' } },
      ]);
      const a = await l.check(req());
      expect(a.allowed).to.equal(true);
      // The concurrency rule denies: the hourly count is left alone.
      const busy = await l.check(req());
      expect(busy).to.include({ allowed: false, rule: 'exports' });
      expect((await l.status('hourly', 'u1')).count).to.equal(1);
      await l.release(a);
      expect((await l.check(req())).allowed).to.equal(true);
      await l.release((await l.check(req())) as never);
      // The hourly rule denies: no slot is taken.
      const status = await l.status('exports', 'u1');
      expect(status.count).to.equal(1);
      const tooMany = await l.check(req('u1'));
      expect(tooMany.allowed).to.equal(false);
      expect((await l.status('exports', 'u1')).count).to.equal(1);
    });

    it('a slot no one renews lapses after its lease, not before, and its late release frees nothing else', async () => {
      const l = await limiter([exports(1, '10s')]);
      const first = await l.check(req());
      clock().advance(9_999);
      expect((await l.check(req())).allowed).to.equal(false);
      clock().advance(1);
      const second = await l.check(req());
      expect(second.allowed).to.equal(true);
      await l.release(first);
      expect((await l.status('exports', 'u1')).count).to.equal(1);
      expect((await l.check(req())).allowed).to.equal(false);
      await l.release(second);
      expect((await l.check(req())).allowed).to.equal(true);
    });

    it('the store renews a held slot for another lease, and never takes back one released or lapsed', async () => {
      const store = await target.makeStore(clock().read);
      const l = await limiter([exports(3, '10s')], { store });
      const held = await l.check(req());
      const released = await l.check(req());
      const lapsing = await l.check(req());
      await l.release(released);
      const rule = {
        name: 'exports',
        type: 'concurrency',
        sizeMs: 10_000,
        buckets: 0,
        burst: 0,
        lockout: undefined,
        dryRun: false,
      } as const;
      const op: StoreOp = { rule, key: 'u1', cost: 1, limit: 3 };
      const receipts = [held, released, lapsing].map((d) => d.rules[0]?.slot as number);
      expect(new Set(receipts).size).to.equal(3);
      clock().advance(6_000);
      expect(
        await store.renew?.([
          { op, receipt: receipts[0] as number },
          { op, receipt: receipts[1] as number },
        ]),
      ).to.deep.equal([true, false]);
      clock().advance(6_000);
      // The lapsed slot is gone, the renewed one holds until 16 s, the released one stays free.
      expect(await store.renew?.([{ op, receipt: receipts[2] as number }])).to.deep.equal([false]);
      expect((await l.status('exports', 'u1')).count).to.equal(1);
      clock().advance(3_999);
      expect((await l.status('exports', 'u1')).count).to.equal(1);
      clock().advance(1);
      expect((await l.status('exports', 'u1')).count).to.equal(0);
    });

    it('a refund answers, per slot, whether it was still held: released already, lapsed or reset is false', async () => {
      const store = await target.makeStore(clock().read);
      const rule = {
        name: 'exports',
        type: 'concurrency',
        sizeMs: 10_000,
        buckets: 0,
        burst: 0,
        lockout: undefined,
        dryRun: false,
      } as const;
      const op = (key: string, cost = 1): StoreOp => ({ rule, key, cost, limit: 10 });
      const take = async (key: string, cost = 1) => {
        const { results } = await store.evaluate([op(key, cost)], 'check');
        expect(results[0]?.allowed).to.equal(true);
        return { op: op(key, cost), receipt: results[0]?.receipt as number };
      };
      const lapsing = await take('u1');
      clock().advance(6_000);
      const held = await take('u1');
      const big = await take('u1', 3);
      const released = await take('u1');
      expect(await store.refund([released])).to.deep.equal([true]);
      const reset = await take('u2');
      await store.reset(rule, 'u2');
      clock().advance(5_000);
      // In one call, in the order asked: the lapsed slot's lease ended at 10 s, the others' end at 16 s.
      expect(await store.refund([held, released, lapsing, reset, big])).to.deep.equal([
        true,
        false,
        false,
        false,
        true,
      ]);
      expect((await store.evaluate([op('u1', 0)], 'peek')).results[0]?.count).to.equal(0);
    });

    it("status lists the holders oldest first, each one's age and lease left, on the store's clock", async () => {
      const l = await limiter([exports(3, '10s')]);
      const first = await l.check(req());
      clock().advance(4_000);
      await l.check(req());
      clock().advance(1_000);
      expect((await l.status('exports', 'u1')).holders).to.deep.equal([
        { ageMs: 5_000, leaseLeftMs: 5_000 },
        { ageMs: 1_000, leaseLeftMs: 9_000 },
      ]);
      await l.release(first);
      expect((await l.status('exports', 'u1')).holders).to.deep.equal([{ ageMs: 1_000, leaseLeftMs: 9_000 }]);
      clock().advance(9_000);
      expect((await l.status('exports', 'u1')).holders).to.deep.equal([]);
      expect((await l.status('exports', 'u2')).holders).to.deep.equal([]);
    });

    it('an op of cost 3 takes 3 slots and its release frees all 3', async () => {
      const l = await limiter([{ ...exports(4), cost: 3 }]);
      const big = await l.check(req());
      expect(big).to.include({ allowed: true, remaining: 1, count: 3 });
      expect((await l.check(req())).allowed).to.equal(false);
      await l.release(big);
      expect((await l.status('exports', 'u1')).count).to.equal(0);
    });

    it('reset frees every slot of the key; a holder released after it frees nothing', async () => {
      const l = await limiter([exports(1)]);
      const old = await l.check(req());
      await l.reset('exports', 'u1');
      const fresh = await l.check(req());
      expect(fresh.allowed).to.equal(true);
      await l.release(old);
      expect((await l.check(req())).allowed).to.equal(false);
    });

    it('keys are independent, and an override sets the number in flight for one key', async () => {
      const l = await limiter([exports(1)]);
      await l.override('exports', 'u2', 2);
      expect((await l.check(req('u1'))).allowed).to.equal(true);
      expect((await l.check(req('u1'))).allowed).to.equal(false);
      expect((await l.check(req('u2'))).allowed).to.equal(true);
      expect((await l.check(req('u2'))).allowed).to.equal(true);
      expect((await l.check(req('u2'))).allowed).to.equal(false);
    });

    it('wrap holds a slot while the call runs and frees it when the call settles, returning or throwing', async () => {
      const l = await limiter([exports(1)]);
      let finish = () => {};
      const work = l.wrap(
        (fail: boolean) =>
          new Promise<string>((resolve, reject) => {
            finish = () => (fail ? reject(new Error('failed')) : resolve('done'));
          }),
        { rules: 'exports', key: 'u1' },
      );
      const running = work(false);
      await until('the call holds its slot', async () => (await l.status('exports', 'u1')).count === 1);
      let refused: unknown;
      await work(false).catch((e: unknown) => {
        refused = e;
      });
      expect(refused).to.include({ code: 'ERR_RATE_LIMITED' });
      finish();
      expect(await running).to.equal('done');
      expect((await l.status('exports', 'u1')).count).to.equal(0);
      const failing = work(true);
      await until('the call holds its slot', async () => (await l.status('exports', 'u1')).count === 1);
      finish();
      await failing.catch(() => {});
      expect((await l.status('exports', 'u1')).count).to.equal(0);
    });

    it('a peek takes no slot, and record takes one even past the limit (released like any)', async () => {
      const l = await limiter([exports(1)]);
      expect((await l.peek(req())).allowed).to.equal(true);
      expect((await l.status('exports', 'u1')).count).to.equal(0);
      const a = await l.consume('exports', 'u1');
      const over = await l.record('exports', 'u1');
      expect(over).to.include({ allowed: false, count: 2 });
      await l.release(over);
      await l.release(a);
      expect((await l.status('exports', 'u1')).count).to.equal(0);
    });
  });
}
