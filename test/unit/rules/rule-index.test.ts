// The rule index finds exactly the rules a linear scan of every matcher finds, in rule order, for random rule
// sets and requests (case, trailing slashes, params, wildcards, optional groups, HEAD).
import { expect } from 'chai';
import fc from 'fast-check';
import { createLimiter, type Rule } from '../../../src/index.js';
import { createMatcher } from '../../../src/rules/match.js';
import { RuleIndex } from '../../../src/rules/rule-index.js';

const SEGMENTS = ['api', 'API', 'items', 'Login', 'v1', 'x', 'ab', '5', ''];
const PIECES = ['api', 'items', 'login', 'v1', 'a', ':id', '*rest', '{/:opt}', 'v:n', 'x{-:y}'];
const METHODS = ['GET', 'HEAD', 'POST', 'DELETE', 'get', '*'];

const pattern = fc
  .array(fc.constantFrom(...PIECES), { minLength: 0, maxLength: 3 })
  .map((pieces) => `/${pieces.join('/')}`.replace(/(.)\/\{/g, '$1{'));
const match = fc.oneof(
  fc.constant(undefined),
  fc
    .record({ method: fc.constantFrom(...METHODS), path: pattern })
    .map(({ method, path }) => `${method} ${path}`),
  fc.record(
    {
      method: fc.array(fc.constantFrom(...METHODS), { minLength: 1, maxLength: 2 }),
      path: fc.array(pattern, { minLength: 1, maxLength: 2 }),
    },
    { requiredKeys: [] },
  ),
);
const request = fc.record({
  method: fc.constantFrom('GET', 'HEAD', 'POST', 'DELETE', 'PUT'),
  path: fc
    .tuple(fc.array(fc.constantFrom(...SEGMENTS), { maxLength: 4 }), fc.boolean())
    .map(([parts, slash]) => `/${parts.join('/')}${slash ? '/' : ''}`),
});

describe('Rule index', () => {
  it('finds exactly the rules a linear scan finds, in rule order', () => {
    fc.assert(
      fc.property(
        fc.array(match, { minLength: 1, maxLength: 12 }),
        fc.array(request, { maxLength: 20 }),
        (specs, reqs) => {
          const rules = specs.map((spec, index) => ({ index, matcher: createMatcher(spec) }));
          const index = new RuleIndex(rules);
          for (const { method, path } of reqs) {
            const linear = rules.filter(
              (r) => r.matcher === undefined || r.matcher(method, path) !== undefined,
            );
            const found = index
              .candidates(method, () => path)
              .filter((r) => r.matcher === undefined || r.matcher(method, path) !== undefined);
            expect(
              found.map((r) => r.index),
              `${method} ${path} with ${JSON.stringify(specs)}`,
            ).to.deep.equal(linear.map((r) => r.index));
          }
        },
      ),
      { numRuns: 500 },
    );
  });

  it("names the rules a method and path fall under (limiter.matchingRules), HEAD with GET's", async () => {
    const window = { type: 'fixed', size: '1m' } as const;
    const rules: Rule[] = [
      { name: 'all', key: 'ip', limit: 1, window },
      { name: 'items', match: 'GET /api/items/:id', key: 'ip', limit: 1, window },
      {
        name: 'login',
        match: { method: 'POST', path: ['/login', '/rpc/login'] },
        key: 'ip',
        limit: 1,
        window,
      },
      { name: 'api', match: '/api{/*rest}', key: 'ip', limit: 1, window },
    ];
    for (let i = 0; i < 1000; i++)
      rules.push({ name: `r${i}`, match: `GET /r${i}/:x`, key: 'ip', limit: 1, window });
    const limiter = createLimiter({ rules });
    expect(limiter.matchingRules('HEAD', '/API/items/7/')).to.deep.equal(['all', 'items', 'api']);
    expect(limiter.matchingRules('post', '/rpc/login')).to.deep.equal(['all', 'login']);
    expect(limiter.matchingRules('GET', '/r500/y')).to.deep.equal(['all', 'r500']);
    expect(limiter.matchingRules('GET', '/r500')).to.deep.equal(['all']);
    await limiter.close();
  });
});
