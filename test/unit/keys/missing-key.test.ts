// A rule whose key finds nothing in a request: `missing` checked at construction, 'refuse' refuses the request
// (ERR_KEY_MISSING naming the key form, nothing consumed for any rule), 'skip' left out warns once per rule.
import { expect } from 'chai';
import {
  createLimiter,
  KEY_MISSING_WARNING,
  type Limiter,
  MemoryStore,
  RateLimitConfigError,
  RateLimitRequestError,
  type RequestInfo,
  type Rule,
} from '../../../src/index.js';

const minute = { type: 'fixed', size: '1m' } as const;
const anonymous: RequestInfo = { method: 'POST', path: '/v1/complete', ip: '203.0.113.7', headers: {} };

/** The messages of `KEY_MISSING_WARNING` emitted while `run` runs (warnings arrive on the next tick). */
async function missingWarnings(run: () => Promise<void>): Promise<string[]> {
  const seen: string[] = [];
  const listener = (w: Error & { code?: string }) => {
    if (w.code === KEY_MISSING_WARNING) seen.push(w.message);
  };
  process.on('warning', listener);
  try {
    await run();
    await new Promise((resolve) => setImmediate(resolve));
  } finally {
    process.off('warning', listener);
  }
  return seen;
}

/** What `promise` rejected with; fails when it resolved. */
async function rejection(promise: Promise<unknown>): Promise<RateLimitRequestError> {
  try {
    await promise;
  } catch (error) {
    expect(error).to.be.instanceOf(RateLimitRequestError);
    return error as RateLimitRequestError;
  }
  throw new Error('expected a RateLimitRequestError');
}

describe("a rule's missing key", () => {
  const limiters: Limiter[] = [];
  const make = (rules: Rule[]) => {
    const limiter = createLimiter({ rules, store: new MemoryStore() });
    limiters.push(limiter);
    return limiter;
  };
  afterEach(() => Promise.all(limiters.splice(0).map((l) => l.close())));

  describe('the missing option at construction', () => {
    it("refuses a value other than 'skip' or 'refuse', naming the rule, the field and the value", () => {
      for (const value of ['deny', 'REFUSE', true, 0, null]) {
        const rule = {
          name: 'tokens',
          key: 'user',
          limit: 5,
          window: minute,
          missing: value,
        } as unknown as Rule;
        expect(() => make([rule]), String(value))
          .to.throw(
            RateLimitConfigError,
            /^rule "tokens": missing must be 'skip' \(.*\) or 'refuse' \(HTTP 400\), got /,
          )
          .with.property('code', 'ERR_OPTION');
      }
    });

    it("refuses a misspelled field with the name it meant: onMissing is 'missing'", () => {
      const rule = {
        name: 'tokens',
        key: 'user',
        limit: 5,
        window: minute,
        onMissing: 'refuse',
      } as unknown as Rule;
      expect(() => make([rule]))
        .to.throw(
          RateLimitConfigError,
          `rule "tokens": unknown field 'onMissing' (got 'refuse'), did you mean 'missing'?`,
        )
        .with.property('code', 'ERR_UNKNOWN_FIELD');
    });

    it("accepts 'skip' and 'refuse'", () => {
      for (const missing of ['skip', 'refuse'] as const)
        expect(
          make([{ name: 'tokens', key: 'user', limit: 5, window: minute, missing }]).ruleFacts,
        ).to.have.length(1);
    });
  });

  describe("missing: 'refuse'", () => {
    const rules: Rule[] = [
      { name: 'per-ip', key: 'ip', limit: 10, window: minute },
      { name: 'tokens-day', key: 'user', limit: 5, window: minute, missing: 'refuse' },
      { name: 'in-flight', key: 'ip', limit: 1, window: { type: 'concurrency', lease: '30s' } },
    ];

    it('rejects a request without a user with ERR_KEY_MISSING naming the key form, and consumes nothing for any rule', async () => {
      const limiter = make(rules);
      const error = await rejection(limiter.check(anonymous));
      expect(error.code).to.equal('ERR_KEY_MISSING');
      expect(error.field).to.equal('user');
      expect(error.message).to.equal(
        `rule "tokens-day": the request has no user, and the rule refuses requests without its key (missing: 'refuse'); nothing was consumed`,
      );
      expect((await limiter.status('per-ip', '203.0.113.7')).count, 'the rule before it').to.equal(0);
      expect(
        (await limiter.status('in-flight', '203.0.113.7')).count,
        'the concurrency rule after it',
      ).to.equal(0);
      // The one slot is still free: a user's request is admitted and holds it.
      const admitted = await limiter.check({ ...anonymous, user: { id: 'u1' } });
      expect(admitted.allowed).to.equal(true);
      expect(admitted.rules.map((r) => [r.rule, r.key])).to.deep.equal([
        ['per-ip', '203.0.113.7'],
        ['tokens-day', 'u1'],
        ['in-flight', '203.0.113.7'],
      ]);
      await limiter.release(admitted);
    });

    it('refuses peek and recordRequest alike', async () => {
      const limiter = make(rules);
      expect((await rejection(limiter.peek(anonymous))).code).to.equal('ERR_KEY_MISSING');
      expect((await rejection(limiter.recordRequest(anonymous))).code).to.equal('ERR_KEY_MISSING');
      expect((await limiter.status('per-ip', '203.0.113.7')).count).to.equal(0);
    });

    it('names every key form in the field: a header, a query parameter, a body field, a composite key; none for a key function', async () => {
      const cases: Array<[Rule['key'], string | undefined, RegExp]> = [
        ['header:x-api-key', 'header:x-api-key', /the request has no 'x-api-key' header/],
        ['query.org', 'query.org', /no query parameter 'org'/],
        ['param.org', 'param.org', /no route param 'org'/],
        ['body.account.id', 'body.account.id', /no body field 'account\.id'/],
        ['org:{body.org}', 'org:{body.org}', /none of the fields of the template 'org:\{body\.org\}'/],
        [
          ['user', 'header:x-org'],
          'user, header:x-org',
          /none of the parts of its composite key \(user, header:x-org\)/,
        ],
        [() => undefined, undefined, /nothing the key function returned/],
      ];
      for (const [key, field, message] of cases) {
        const limiter = make([{ name: 'keyed', key, limit: 5, window: minute, missing: 'refuse' }]);
        const error = await rejection(limiter.check({ ...anonymous, query: {}, params: {}, body: {} }));
        expect([error.code, error.field], String(field)).to.deep.equal(['ERR_KEY_MISSING', field]);
        expect(error.message, String(field)).to.match(message);
      }
    });

    it('a user given as null, an empty string or an object without an id is missing too; a value of another type is still ERR_KEY_VALUE', async () => {
      const limiter = make([{ name: 'tokens', key: 'user', limit: 5, window: minute, missing: 'refuse' }]);
      for (const user of [null, '', { name: 'no id' }])
        expect((await rejection(limiter.check({ ...anonymous, user }))).code, JSON.stringify(user)).to.equal(
          'ERR_KEY_MISSING',
        );
      expect((await rejection(limiter.check({ ...anonymous, user: { id: ['a'] } }))).code).to.equal(
        'ERR_KEY_VALUE',
      );
    });

    it('a composite key is missing only when every part is: one part present counts', async () => {
      const limiter = make([
        { name: 'pair', key: ['user', 'header:x-org'], limit: 5, window: minute, missing: 'refuse' },
      ]);
      const decision = await limiter.check({ ...anonymous, headers: { 'x-org': 'acme' } });
      expect(decision.rules.map((r) => r.key)).to.deep.equal(['|acme']);
    });

    it('applies only where the rule matches: a request its match leaves out is not refused', async () => {
      const limiter = make([
        {
          name: 'tokens',
          match: 'POST /v1/complete',
          key: 'user',
          limit: 5,
          window: minute,
          missing: 'refuse',
        },
      ]);
      const decision = await limiter.check({ ...anonymous, path: '/health', method: 'GET' });
      expect([decision.allowed, decision.rules]).to.deep.equal([true, []]);
    });
  });

  describe("missing: 'skip'", () => {
    it('left out: the request passes the rule uncounted, and one warning per rule names the rule, the key form and what to fix', async () => {
      const limiter = make([
        { name: 'tokens-day', key: 'user', limit: 5, window: minute },
        { name: 'per-org', key: 'header:x-org', limit: 5, window: minute },
      ]);
      const warnings = await missingWarnings(async () => {
        for (let i = 0; i < 3; i++) {
          const decision = await limiter.check(anonymous);
          expect([decision.allowed, decision.rules]).to.deep.equal([true, []]);
        }
      });
      expect(warnings).to.have.length(2);
      expect(warnings[0]).to.equal(
        `ratekeeper: rule "tokens-day" keys on 'user', but a request reached it with no user, so the rule did not apply and the request passed it uncounted. The user is read from req.user (Express, Nest), ctx.state.user (Koa), request.user (Fastify) or c.get('user') (Hono): put the middleware that sets it (authentication) before the rate limiter; set missing: 'refuse' on the rule to answer such requests 400 instead, or missing: 'skip' where letting them pass is meant (which also ends this warning)`,
      );
      expect(warnings[1]).to.match(
        /^ratekeeper: rule "per-org" keys on 'header:x-org', but a request reached it with no 'x-org' header/,
      );
    });

    it('left out: warns once per rule, not once per limiter or per process: a second limiter with the same rule warns again', async () => {
      const rule: Rule = { name: 'tokens-day', key: 'user', limit: 5, window: minute };
      const first = make([rule]);
      const second = make([rule]);
      const warnings = await missingWarnings(async () => {
        for (let i = 0; i < 2; i++) {
          await first.check(anonymous);
          await second.check(anonymous);
        }
      });
      expect(warnings).to.have.length(2);
    });

    it('stated: the request passes uncounted without a warning', async () => {
      const limiter = make([{ name: 'signed-in', key: 'user', limit: 5, window: minute, missing: 'skip' }]);
      const warnings = await missingWarnings(async () => {
        const decision = await limiter.check(anonymous);
        expect(decision.rules).to.deep.equal([]);
      });
      expect(warnings).to.deep.equal([]);
    });

    it('a request that has its key draws no warning', async () => {
      const limiter = make([{ name: 'tokens-day', key: 'user', limit: 5, window: minute }]);
      const warnings = await missingWarnings(async () => {
        expect((await limiter.check({ ...anonymous, user: 'u1' })).rules).to.have.length(1);
      });
      expect(warnings).to.deep.equal([]);
    });
  });
});
