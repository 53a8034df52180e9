// check, peek and recordRequest called from JavaScript with a request that lacks its method or path: a
// RateLimitRequestError naming the field, and nothing consumed (the adapters always give both).
import { expect } from 'chai';
import { createLimiter, RateLimitRequestError, type RequestInfo } from '../../../src/index.js';

async function refusal(action: () => Promise<unknown>): Promise<RateLimitRequestError> {
  try {
    await action();
  } catch (error) {
    expect(error).to.be.instanceOf(RateLimitRequestError);
    return error as RateLimitRequestError;
  }
  throw new Error('the request was decided');
}

describe('a request without a method or path', () => {
  for (const everyRequest of [true, false]) {
    it(`is refused with ERR_REQUEST naming the field, nothing consumed (${everyRequest ? 'a rule for every request' : "a rule's match"})`, async () => {
      const limiter = createLimiter({
        rules: [
          {
            name: 'api',
            key: 'ip',
            limit: 1,
            window: { type: 'fixed', size: '1m' },
            ...(everyRequest ? {} : { match: 'POST /login' }),
          },
        ],
      });
      const good: RequestInfo = { method: 'POST', path: '/login', ip: '203.0.113.7', headers: {} };
      try {
        const cases: Array<[unknown, string | undefined, RegExp]> = [
          [{ ...good, method: undefined }, 'method', /request's method must be a string.*got undefined/],
          [{ ...good, method: 7 }, 'method', /got 7/],
          [{ ...good, path: null }, 'path', /request's path must be a string.*got null/],
          [undefined, undefined, /a request must be an object.*got undefined/],
        ];
        for (const [req, field, message] of cases) {
          for (const call of ['check', 'peek', 'recordRequest'] as const) {
            const error = await refusal(() => limiter[call](req as RequestInfo));
            expect(error.code, `${call} ${field}`).to.equal('ERR_REQUEST');
            expect(error.field).to.equal(field);
            expect(error.message).to.match(message);
          }
        }
        expect((await limiter.check(good)).allowed, 'nothing was consumed').to.equal(true);
        expect((await limiter.check(good)).allowed).to.equal(false);
      } finally {
        await limiter.close();
      }
    });
  }
});
