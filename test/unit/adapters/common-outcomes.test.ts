// How every adapter turns a response status into an outcome (adapters/common.ts `report`): 3xx is unknown unless
// `isFailure` says otherwise, an app's own report wins, and a throwing `isFailure` never escapes.
import { expect } from 'chai';
import { createSetup } from '../../../adapters/common.js';
import { createLimiter, type Limiter, REDIRECT_OUTCOME_WARNING, type Rule } from '../../../src/index.js';

const rules: Rule[] = [
  {
    name: 'pair',
    key: 'ip',
    limit: 3,
    window: { type: 'fixed', size: '1m' },
    countOn: 'failure',
    resetOnSuccess: true,
  },
];
const req = { method: 'POST', path: '/login', ip: '198.51.100.1', headers: {} };

describe('Outcomes from response statuses', () => {
  let limiter: Limiter;
  const warnings: string[] = [];
  const onWarning = (w: Error & { code?: string }) => {
    if (w.code === REDIRECT_OUTCOME_WARNING) warnings.push(w.message);
  };
  beforeEach(() => {
    limiter = createLimiter({ rules });
    warnings.length = 0;
    process.on('warning', onWarning);
  });
  afterEach(async () => {
    process.off('warning', onWarning);
    await limiter.close();
  });
  const tick = () => new Promise((resolve) => setImmediate(resolve));
  const count = async () => (await limiter.status('pair', '198.51.100.1')).count;

  it('reports 2xx as success and 4xx/5xx as failure; leaves a 3xx unreported, with one warning', async () => {
    const setup = createSetup(limiter);
    for (const status of [302, 303, 301]) setup.report(await limiter.check(req), status);
    await tick();
    expect(await count(), 'redirects stay counted').to.equal(3);
    expect(warnings).to.have.length(1);
    expect(warnings[0]).to.match(/rules "pair".*redirect \(302\)/);
    await limiter.reset('pair', '198.51.100.1');
    setup.report(await limiter.check(req), 401);
    setup.report(await limiter.check(req), 500);
    await tick();
    expect(await count()).to.equal(2);
    setup.report(await limiter.check(req), 200);
    await tick();
    expect(await count(), 'a success resets').to.equal(0);
  });

  it('stays silent about a redirect the app reported itself, and lets isFailure judge 3xx', async () => {
    const setup = createSetup(limiter);
    const decision = await limiter.check(req);
    await limiter.report(decision, 'failure');
    setup.report(decision, 302);
    await tick();
    expect(warnings).to.deep.equal([]);
    const judged = createSetup(limiter, { isFailure: (status) => status !== 303 });
    judged.report(await limiter.check(req), 302);
    await tick();
    expect(await count()).to.equal(2);
    judged.report(await limiter.check(req), 303);
    await tick();
    expect(await count(), 'a 303 judged a success resets').to.equal(0);
    expect(warnings).to.deep.equal([]);
  });

  it('keeps the reservation when isFailure throws, without an uncaught exception', async () => {
    const setup = createSetup(limiter, {
      isFailure: () => {
        throw new Error('bad judge');
      },
    });
    const decision = await limiter.check(req);
    expect(() => setup.report(decision, 200)).not.to.throw();
    await tick();
    expect(limiter.awaitsReport(decision)).to.equal(true);
    expect(await count()).to.equal(1);
  });
});
