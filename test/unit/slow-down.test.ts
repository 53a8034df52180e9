// slowDown's arithmetic and its wait, without a framework: how far over its limit a recorded decision is, and
// a wait that ends, with its timer, when the client goes.
import { EventEmitter } from 'node:events';
import { expect } from 'chai';
import { responseClosed } from '../../adapters/common.js';
import { overLimit, pause } from '../../adapters/slow-down.js';
import { createLimiter, type RequestInfo } from '../../src/index.js';

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
    for (let i = 0; i < 4; i++)
      overs.push(overLimit(await limiter.recordRequest(request), new Map([['g', 2]])));
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
