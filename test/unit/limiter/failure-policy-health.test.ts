// The store's health and the retry interval together: 'ok' is never said while decisions skip the store.
import { expect } from 'chai';
import { HealthState } from '../../../src/limiter/failure-policy.js';

const fault = Object.assign(new Error('terminating connection due to administrator command'), {
  code: '57P01',
});

describe('HealthState: health and the retry interval', () => {
  it('a failed decision: down, decisions skip the store, and an answer to another call does not make it ok', () => {
    const health = new HealthState();
    expect(health.snapshot().state).to.equal('ok');
    expect(health.usable).to.equal(true);
    health.skipFor(fault, 3_600_000);
    expect(health.usable).to.equal(false);
    health.succeeded();
    const snapshot = health.snapshot();
    expect({ state: snapshot.state, usable: health.usable, code: snapshot.lastError?.code }).to.deep.equal({
      state: 'down',
      usable: false,
      code: '57P01',
    });
  });

  it('a probe the store answered (recovered) ends the interval: ok, and decisions go to the store', () => {
    const health = new HealthState();
    health.skipFor(fault, 3_600_000);
    health.recovered();
    expect({ state: health.snapshot().state, usable: health.usable }).to.deep.equal({
      state: 'ok',
      usable: true,
    });
    // The last fault is kept for the operator.
    expect(health.snapshot().lastError?.message).to.equal(fault.message);
  });

  it('once the interval has passed, the next answer makes it ok', () => {
    const health = new HealthState();
    health.skipFor(fault, 0);
    expect({ state: health.snapshot().state, usable: health.usable }).to.deep.equal({
      state: 'down',
      usable: true,
    });
    health.succeeded();
    expect(health.snapshot().state).to.equal('ok');
  });

  it('a failed call other than a decision: down until one succeeds, decisions still go to the store', () => {
    const health = new HealthState();
    health.failed(fault);
    expect({ state: health.snapshot().state, usable: health.usable }).to.deep.equal({
      state: 'down',
      usable: true,
    });
    health.succeeded();
    expect(health.snapshot().state).to.equal('ok');
  });
});
