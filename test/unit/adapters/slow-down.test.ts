// slowDown's arithmetic and its wait, without a framework: how far over its limit a recorded decision is, a
// wait that ends, with its timer, when the client goes, and the waits one key may hold at once.
import { EventEmitter } from 'node:events';
import { expect } from 'chai';
import { responseClosed } from '../../../adapters/common.js';
import { createPacing, overLimit, pause } from '../../../adapters/slow-down.js';
import { createLimiter, type Decision, type RequestInfo } from '../../../src/index.js';

const request: RequestInfo = { method: 'GET', path: '/', ip: '203.0.113.7', headers: {} };

describe('slowDown: requests over the limit', () => {
  it('counts the most exceeded enforced rule; a dry-run rule never delays', async () => {
    const limiter = createLimiter({
      rules: [
        { name: 'two', key: 'ip', limit: 2, window: { type: 'fixed', size: '1m' } },
        { name: 'one', key: 'ip', limit: 1, window: { type: 'sliding-log', size: '1m' } },
        { name: 'shadow', key: 'ip', limit: 1, window: { type: 'fixed', size: '1m' }, mode: 'dry-run' },
      ],
    });
    const overs: number[] = [];
    for (let i = 0; i < 4; i++) overs.push(overLimit(await limiter.recordRequest(request), new Map()));
    expect(overs).to.deep.equal([0, 1, 2, 3]);
    const dryOnly = createLimiter({
      rules: [
        { name: 'shadow', key: 'ip', limit: 1, window: { type: 'fixed', size: '1m' }, mode: 'dry-run' },
      ],
    });
    for (let i = 0; i < 3; i++)
      expect(overLimit(await dryOnly.recordRequest(request), new Map())).to.equal(0);
    await Promise.all([limiter.close(), dryOnly.close()]);
  });

  it('counts a GCRA rule over its burst', async () => {
    const limiter = createLimiter({
      rules: [{ name: 'g', key: 'ip', limit: 1, window: { type: 'gcra', size: '1h', burst: 2 } }],
    });
    const overs: number[] = [];
    const facts = new Map(limiter.ruleFacts.map((rule) => [rule.name, rule]));
    for (let i = 0; i < 4; i++) overs.push(overLimit(await limiter.recordRequest(request), facts));
    expect(overs).to.deep.equal([0, 0, 1, 2]);
    await limiter.close();
  });
});

describe('slowDown: the wait', () => {
  it('resolves true when the time passed, and stops listening for the client', async () => {
    const res = Object.assign(new EventEmitter(), { destroyed: false });
    expect(await pause(1, (cancel) => responseClosed(res, cancel))).to.equal(true);
    expect(res.listenerCount('close')).to.equal(0);
  });

  it('resolves false as soon as the client goes, its timer cleared and its listener gone', async () => {
    const res = Object.assign(new EventEmitter(), { destroyed: false });
    const realClear = globalThis.clearTimeout;
    const cleared: unknown[] = [];
    globalThis.clearTimeout = ((handle: Parameters<typeof clearTimeout>[0]) => {
      cleared.push(handle);
      realClear(handle);
    }) as typeof clearTimeout;
    try {
      const waited = pause(3_600_000, (cancel) => responseClosed(res, cancel));
      res.emit('close');
      expect(await waited).to.equal(false);
      expect(cleared).to.have.length(1);
      expect(res.listenerCount('close')).to.equal(0);
    } finally {
      globalThis.clearTimeout = realClear;
    }
  });

  it('never starts a timer for a client gone already', async () => {
    const res = Object.assign(new EventEmitter(), { destroyed: true });
    const realSet = globalThis.setTimeout;
    let started = 0;
    globalThis.setTimeout = ((...args: Parameters<typeof setTimeout>) => {
      started++;
      return realSet(...args);
    }) as typeof setTimeout;
    try {
      expect(await pause(3_600_000, (cancel) => responseClosed(res, cancel))).to.equal(false);
    } finally {
      globalThis.setTimeout = realSet;
    }
    expect(started).to.equal(0);
    expect(res.listenerCount('close')).to.equal(0);
  });
});

describe('slowDown: the waits one key may hold', () => {
  /** A decision over the limit of rule `over` for `key`, and within a dry-run rule's. */
  const over = (key: string): Decision => ({
    allowed: false,
    limit: 1,
    remaining: 0,
    count: 2,
    resetMs: 60_000,
    locked: false,
    rules: [
      { rule: 'api', key, allowed: false, limit: 1, remaining: 0, count: 2, resetMs: 60_000, locked: false },
      {
        rule: 'shadow',
        key,
        allowed: false,
        limit: 1,
        remaining: 0,
        count: 2,
        resetMs: 60_000,
        locked: false,
        dryRun: true,
      },
    ],
  });
  /** A client that goes when `go()` is called. */
  const client = () => {
    let leave: () => void = () => {};
    return {
      whenGone: (cancel: () => void) => {
        leave = cancel;
        return () => {
          leave = () => {};
        };
      },
      go: () => leave(),
    };
  };

  it('plans a wait until the key holds maxWaiting, then none (refused); other keys wait on', async () => {
    const delayed: number[] = [];
    const pacing = createPacing<string>(
      () => 3_600_000,
      2,
      (ms) => delayed.push(ms),
    );
    const clients = [client(), client(), client()];
    const waits: Array<Promise<boolean>> = [];
    for (const c of clients.slice(0, 2)) {
      expect(pacing.plan(over('alice'))).to.equal(3_600_000);
      waits.push(pacing.wait(3_600_000, over('alice'), 'req', c.whenGone));
    }
    expect(pacing.plan(over('alice')), "alice's third").to.equal(undefined);
    expect(pacing.plan(over('bob')), "bob's first").to.equal(3_600_000);
    waits.push(
      pacing.wait(3_600_000, over('bob'), 'req', (clients[2] as ReturnType<typeof client>).whenGone),
    );
    expect([
      pacing.waiting,
      pacing.waitingFor('api', 'alice'),
      pacing.waitingFor('api', 'bob'),
    ]).to.deep.equal([3, 2, 1]);
    // A dry-run rule never holds a place.
    expect(pacing.waitingFor('shadow', 'alice')).to.equal(0);
    for (const c of clients) c.go();
    expect(await Promise.all(waits)).to.deep.equal([false, false, false]);
    expect([
      pacing.waiting,
      pacing.waitingFor('api', 'alice'),
      pacing.waitingFor('api', 'bob'),
    ]).to.deep.equal([0, 0, 0]);
    expect(pacing.plan(over('alice')), 'places freed').to.equal(3_600_000);
    expect(delayed).to.deep.equal([3_600_000, 3_600_000, 3_600_000]);
  });

  it('plans no wait for a decision that earns none', () => {
    const pacing = createPacing<string>(() => 0, 1, undefined);
    expect(pacing.plan(over('alice'))).to.equal(0);
  });
});
