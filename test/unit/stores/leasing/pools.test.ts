// A hot concurrency key's pool of slots without a server: leases over a memory store (two of them, as two
// processes sharing it) take a pool in one call, hand slots out and take them back without a call, renew the
// pool as one holding, return free slots beyond its size, when idle and when the key's limit changes, and
// never have more slots in use than the limit, nor more than maxBlock idle, in any interleaving.
import { expect } from 'chai';
import { leasable } from '../../../../src/stores/leasing/blocks.js';
import { Leases } from '../../../../src/stores/leasing/leases.js';
import type { LeasingSettings } from '../../../../src/stores/leasing/leasing-options.js';
import { heldRuns, newPool, releaseToPool, runsOf } from '../../../../src/stores/leasing/pools.js';
import { MemoryStore } from '../../../../src/stores/memory/memory-store.js';
import type { Refund } from '../../../../src/stores/store.js';
import type { OpResult, StoreOp, StoreRule } from '../../../../src/stores/store-ops.js';
import { until } from '../../../support/settle.js';

const LIMIT = 40;
const RULE: StoreRule = {
  name: 'slots',
  type: 'concurrency',
  sizeMs: 60_000,
  buckets: 0,
  burst: 0,
  lockout: undefined,
  dryRun: false,
  leasable: true,
};
const op = (limit = LIMIT): StoreOp => ({ rule: RULE, key: 'k', cost: 1, limit });
const SETTINGS: LeasingSettings = {
  hotAfter: 1,
  maxBlock: 8,
  share: 2,
  // A pool of maxBlock slots whatever the rate the test's decisions run at.
  blockMs: 60_000,
  idleMs: 60_000,
  maxKeys: 1000,
};

/** A process's leases over the shared memory store, and the store calls it made. */
function processOn(store: MemoryStore, settings: Partial<LeasingSettings> = {}) {
  const calls = { evaluate: 0, refund: 0, renew: 0 };
  const leases = new Leases(
    {
      evaluate: (ops, mode) => {
        calls.evaluate++;
        return store.evaluate(ops, mode);
      },
      refund: (refunds) => {
        calls.refund++;
        return store.refund(refunds);
      },
      renew: (slots) => {
        calls.renew++;
        return store.renew(slots);
      },
      now: () => store.now(),
    },
    { ...SETTINGS, ...settings },
    () => {},
  );
  /** One slot: the leases' answer, as the limiter takes it (from the pool in this call, else a call). */
  const take = async (limit = LIMIT): Promise<Refund | undefined> => {
    const o = op(limit);
    const r = (leases.answer([o], 'check') ?? (await leases.evaluate([o], 'check'))).results[0] as OpResult;
    return r.allowed ? { op: o, receipt: r.receipt } : undefined;
  };
  const release = async (slot: Refund) => await leases.refund([slot]);
  return { leases, calls, take, release };
}

/** Slots the store holds for the key now. */
const heldInStore = async (store: MemoryStore) =>
  ((await store.evaluate([{ ...op(), cost: 0 }], 'peek')).results[0] as OpResult).count;

describe('leasing: a pool of concurrency slots', () => {
  it('leases concurrency slots one at a time, where the store renews them', () => {
    expect(leasable(op(), true)).to.equal(true);
    expect(leasable(op(), false)).to.equal(false);
    expect(leasable({ ...op(), cost: 2 }, true)).to.equal(false);
  });

  it('keeps its ids as runs of consecutive ids, and sends back a slot released beyond its size', () => {
    const r = { allowed: true, remaining: 30, limit: LIMIT, overridden: false, receipt: 1000 } as OpResult;
    const pool = newPool(op(), r, 4, 0, 0);
    // The decision's own slot (1000) in use, 1001-1004 free.
    expect(heldRuns(pool).map((run) => [run.receipt, run.op.cost])).to.deep.equal([[1000, 5]]);
    expect(runsOf(op(), [7, 3, 4, 9, 8]).map((run) => [run.receipt, run.op.cost])).to.deep.equal([
      [3, 2],
      [7, 3],
    ]);
    expect(releaseToPool(pool, 1000), 'four free already: back to the store').to.equal('back');
    expect(releaseToPool(pool, 1000), 'not in use').to.equal(undefined);
    expect(heldRuns(pool).map((run) => [run.receipt, run.op.cost])).to.deep.equal([[1001, 4]]);
  });

  it('takes a pool in one call, counted in the store, then hands out and takes back slots without a call', async () => {
    const store = new MemoryStore();
    const p = processOn(store);
    // The first decision learns what the store has left; the second takes its own slot and a pool of
    // min(maxBlock 8, (39 - 1) / share 2) slots, in one call.
    await p.take();
    const second = await p.take();
    expect({ calls: p.calls.evaluate, held: await heldInStore(store) }).to.deep.equal({ calls: 2, held: 10 });
    const slots: Refund[] = [];
    for (let i = 0; i < 3; i++) slots.push((await p.take()) as Refund);
    for (const slot of slots) expect(await p.release(slot)).to.deep.equal([true]);
    expect({ calls: p.calls.evaluate + p.calls.refund, held: await heldInStore(store) }).to.deep.equal({
      calls: 2,
      held: 10,
    });
    // The pool is renewed as one holding: the limiter's renewals of its slots are answered here.
    expect(await p.leases.renew([second as Refund])).to.deep.equal([true]);
    expect(p.calls.renew).to.equal(0);
    await p.leases.close();
    // Closed: the free slots went back; the two still in use stay held until released or lapsed.
    expect(await heldInStore(store)).to.equal(2);
  });

  it('two processes sharing the store never have more slots in use than the limit, in any interleaving', async () => {
    const store = new MemoryStore();
    const processes = [processOn(store), processOn(store)];
    const inUse: Array<{ p: (typeof processes)[number]; slot: Refund }> = [];
    let most = 0;
    let seed = 7;
    const random = () => {
      seed = (seed * 1103515245 + 12345) % 2 ** 31;
      return seed / 2 ** 31;
    };
    for (let step = 0; step < 2000; step++) {
      const p = processes[random() < 0.5 ? 0 : 1] as (typeof processes)[number];
      if (inUse.length > 0 && random() < 0.45) {
        const [held] = inUse.splice(Math.floor(random() * inUse.length), 1);
        if (held !== undefined) expect(await held.p.release(held.slot)).to.deep.equal([true]);
        continue;
      }
      const slot = await p.take();
      if (slot !== undefined) inUse.push({ p, slot });
      most = Math.max(most, inUse.length);
      expect(inUse.length).to.be.at.most(LIMIT);
      // The under-admission bound: each process holds at most maxBlock slots idle.
      for (const q of processes) expect(q.leases.held()).to.be.at.most(SETTINGS.maxBlock);
    }
    // Demand reached the limit, and most decisions were answered from pools.
    expect(most).to.equal(LIMIT);
    const calls = processes.reduce((sum, p) => sum + p.calls.evaluate, 0);
    expect(calls).to.be.below(1000);
    // No slot handed out twice.
    expect(new Set(inUse.map((h) => h.slot.receipt)).size).to.equal(inUse.length);
  });

  it("a changed limit ends the key's pool at once: its free slots go back, those in use go on being held", async () => {
    const store = new MemoryStore();
    const p = processOn(store);
    const slots = [(await p.take()) as Refund, (await p.take()) as Refund];
    expect(await heldInStore(store)).to.equal(10);
    p.leases.forget('slots', 'k');
    expect(await heldInStore(store)).to.equal(2);
    // Released from now on in the store itself, each a call.
    for (const slot of slots) expect(await p.release(slot)).to.deep.equal([true]);
    expect(p.calls.refund).to.equal(3);
    expect(await heldInStore(store)).to.equal(0);
    await p.leases.close();
  });

  it('a pool not used for idleMs goes back to the store; a slot still in use stays held', async () => {
    const store = new MemoryStore();
    const p = processOn(store, { idleMs: 20 });
    const slots = [(await p.take()) as Refund, (await p.take()) as Refund];
    expect(p.leases.held()).to.equal(8);
    await until('the idle pool is back', async () => (await heldInStore(store)) === 2, 10_000);
    expect(p.leases.held()).to.equal(0);
    expect(await p.leases.refund(slots)).to.deep.equal([true, true]);
    expect(await heldInStore(store)).to.equal(0);
    await p.leases.close();
  });

  it('renews its slots in the store as one holding, a third of a lease after the take', async () => {
    const store = new MemoryStore();
    const rule = { ...RULE, sizeMs: 90 };
    const p = processOn(store);
    const o = { ...op(), rule };
    const slots: Refund[] = [];
    for (let i = 0; i < 2; i++) {
      const r = (await p.leases.evaluate([o], 'check')).results[0] as OpResult;
      slots.push({ op: o, receipt: r.receipt });
    }
    // Both back in the pool (the second beyond its 8 free: to the store), 8 free slots held.
    expect(await p.leases.refund(slots)).to.deep.equal([true, true]);
    await until('the pool renewed', async () => p.calls.renew > 0, 10_000);
    // Still held past its lease's end (90 ms): renewed, not lapsed.
    await until('four renewals', async () => p.calls.renew >= 4, 10_000);
    expect(((await store.evaluate([{ ...o, cost: 0 }], 'peek')).results[0] as OpResult).count).to.equal(8);
    await p.leases.close();
  });
});
