// One leased block without a store: which ops lease, a key's rate, a block's size against the bound of
// docs/exactness.md, what a block admits, and what goes back when it ends (never into another window).
import { expect } from 'chai';
import {
  admitFrom,
  type Block,
  blockSize,
  ending,
  leasable,
  newEntry,
  rateOf,
  usable,
} from '../../../../src/stores/leasing/blocks.js';
import type { LeasingSettings } from '../../../../src/stores/leasing/leasing-options.js';
import type { StoreOp, StoreRule, WindowType } from '../../../../src/stores/store-ops.js';

const SETTINGS: LeasingSettings = {
  hotAfter: 100,
  maxBlock: 500,
  share: 16,
  blockMs: 250,
  idleMs: 250,
  maxKeys: 1000,
};

function op(type: WindowType, extra: Partial<StoreRule> = {}, limit = 100_000, cost = 1): StoreOp {
  const rule: StoreRule = {
    name: 'hot',
    type,
    sizeMs: 60_000,
    buckets: 0,
    burst: 0,
    lockout: undefined,
    dryRun: false,
    leasable: true,
    ...extra,
  };
  return { rule, key: 'k', cost, limit };
}

function block(o: StoreOp, left: number, surcharge = 0): Block {
  return {
    op: { ...o, cost: 0 },
    receipt: 7,
    left,
    size: left,
    untilLocal: 1000,
    sentLocal: 0,
    // The store's clock (epoch ms) is far from this process's monotonic one: each is compared with its own.
    untilMs: 5_000_001_000,
    sentMs: 5_000_000_000,
    lastUsedLocal: 0,
    seen: 5000,
    limit: o.limit,
    overridden: false,
    resetMs: 1000,
    surcharge,
  };
}

describe('leasing: one block', () => {
  it('leases counted and bucket windows of leasable rules only, never a cost of 0', () => {
    for (const type of ['fixed', 'calendar', 'token-bucket', 'gcra'] as const)
      expect(leasable(op(type)), type).to.equal(true);
    for (const type of ['sliding', 'sliding-log', 'concurrency'] as const)
      expect(leasable(op(type)), type).to.equal(false);
    expect(leasable(op('fixed', { leasable: false }))).to.equal(false);
    expect(leasable(op('fixed', {}, 100, 0))).to.equal(false);
  });

  it("reads a key's rate over this second so far (at least 100 ms of it) or the second before", () => {
    const entry = newEntry(0);
    entry.hits = 10;
    expect(rateOf(entry, 5)).to.equal(100);
    expect(rateOf(entry, 500)).to.equal(20);
    entry.prevHits = 300;
    expect(rateOf(entry, 500)).to.equal(300);
  });

  it('sizes a block at most maxBlock and 1/share of what the store has left, nothing under 2 units or for a cold key', () => {
    const entry = newEntry(performance.now());
    entry.prevHits = 100_000;
    entry.seen = 100_000;
    expect(blockSize(entry, op('fixed'), 1, SETTINGS)).to.deep.equal([500, 0]);
    entry.seen = 1601;
    expect(blockSize(entry, op('fixed'), 1, SETTINGS)).to.deep.equal([100, 0]);
    entry.seen = 32;
    expect(blockSize(entry, op('fixed'), 1, SETTINGS)).to.deep.equal([0, 0]);
    entry.prevHits = 50;
    entry.seen = 100_000;
    expect(blockSize(entry, op('fixed'), 1, SETTINGS)).to.deep.equal([0, 0]);
  });

  it("reserves a bucket block's refill over blockMs, rounded up: ceil(limit × blockMs / size) units", () => {
    const entry = newEntry(performance.now());
    entry.prevHits = 100_000;
    entry.seen = 100_000;
    // 100,000 a minute: 416.7 units refill in 250 ms, reserved as 417.
    const [take, surcharge] = blockSize(entry, op('gcra'), 1, SETTINGS);
    expect(surcharge).to.equal(417);
    expect(take).to.equal(500);
    // 5,000 a day: 0.014 units in 250 ms, reserved as one.
    expect(blockSize(entry, op('token-bucket', { sizeMs: 86_400_000 }, 5000), 1, SETTINGS)[1]).to.equal(1);
  });

  it("admits from a block while it has units, its window lasts and the op's limit and period are the block's", () => {
    const o = op('fixed');
    const b = block(o, 3);
    const storeMs = 5_000_000_010;
    expect(usable(b, o, 10, storeMs)).to.equal(true);
    expect(usable(b, o, 1000, storeMs), 'window over').to.equal(false);
    expect(usable(b, o, 10, 5_000_001_000), "window over on the store's clock").to.equal(false);
    expect(usable(b, { ...o, limit: 50 }, 10, storeMs), 'another limit').to.equal(false);
    expect(usable(b, { ...o, cost: 4 }, 10, storeMs), 'not units enough').to.equal(false);
    const r = admitFrom(b, o, 10);
    expect({ left: b.left, remaining: r.remaining, allowed: r.allowed, receipt: r.receipt }).to.deep.equal({
      left: 2,
      remaining: 5002,
      allowed: true,
      receipt: 7,
    });
  });

  it("gives a counted block's units back only within its window, a bucket's with the refill of the life not lived", () => {
    const counted = block(op('fixed'), 40);
    const at = (ms: number) => 5_000_000_000 + ms;
    expect(ending(counted, 999, at(999))?.op.cost).to.equal(40);
    expect(ending(counted, 999, at(999))?.receipt).to.equal(7);
    expect(ending(counted, 1000, at(999)), 'a unit never moves into another window').to.equal(undefined);
    expect(ending(counted, 999, at(1000)), "nor past the window on the store's clock").to.equal(undefined);
    const bucket = block(op('gcra'), 40, 10);
    // A quarter of its life lived: 40 units and floor(10 × 3/4) of its refill.
    expect(ending(bucket, 250, at(250))?.op.cost).to.equal(47);
    // Half lived on the store's clock: the life lived on either clock is what counts.
    expect(ending(bucket, 250, at(500))?.op.cost).to.equal(45);
    expect(ending(bucket, 1000, at(1000))?.op.cost).to.equal(40);
  });
});
