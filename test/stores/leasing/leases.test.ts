// Leasing on RedisStore, in one process on a real Redis: blocks counted in the store, units returned when
// a key goes quiet, memory bounded when keys are made hot one after another, honest `remaining`, resets
// reaching blocks, rules that are never leased, and bad options refused.
import { expect } from 'chai';
import type { Redis } from 'ioredis';
import {
  createLimiter,
  type LeasingOptions,
  type Limiter,
  RedisStore,
  type Rule,
} from '../../../src/index.js';
import { type RedisServer, startRedis } from '../../support/redis.js';
import { until } from '../../support/settle.js';

const LIMIT = 10_000;
const rule = (extra: Partial<Rule> = {}): Rule => ({
  name: 'hot',
  key: 'ip',
  limit: LIMIT,
  window: { type: 'fixed', size: '1h' },
  ...extra,
});

describe('RedisStore leasing', function () {
  this.timeout(60_000);
  let redis: RedisServer;
  let client: Redis;
  let n = 0;
  const opened: Limiter[] = [];

  before(async () => {
    redis = await startRedis();
    client = redis.client();
  });
  after(async () => {
    client?.disconnect();
    await redis?.stop();
  });
  afterEach(async () => {
    for (const limiter of opened.splice(0)) await limiter.close();
  });

  function limiters(leasing: boolean | LeasingOptions, rules: Rule[] = [rule()]) {
    const prefix = `l${n++}`;
    const leased = createLimiter({ store: new RedisStore({ client, prefix, leasing }), rules });
    // The store's own view, without leasing.
    const plain = createLimiter({ store: new RedisStore({ client, prefix }), rules });
    opened.push(leased, plain);
    return { leased, plain };
  }

  it('a block is counted in the store when taken: the store has less left than was admitted', async () => {
    const { leased, plain } = limiters({ hotAfter: 1, idleMs: 60_000 });
    for (let i = 0; i < 200; i++) expect((await leased.consume('hot', 'k')).allowed).to.equal(true);
    const store = await plain.status('hot', 'k');
    expect(store.remaining).to.be.below(LIMIT - 200);
  });

  it('a client that makes a key hot and then stops: its unused units come back after idleMs', async () => {
    const { leased, plain } = limiters({ hotAfter: 1, idleMs: 50 });
    for (let i = 0; i < 300; i++) await leased.consume('hot', 'k');
    await until(
      'the unused units of the block are back',
      async () => (await plain.status('hot', 'k')).remaining === LIMIT - 300,
      20_000,
    );
  });

  it('keys made hot one after another: at most maxKeys keys hold blocks, the others gave theirs back', async () => {
    const { leased, plain } = limiters({ hotAfter: 1, maxKeys: 5, idleMs: 60_000 });
    for (let k = 0; k < 40; k++) for (let i = 0; i < 50; i++) await leased.consume('hot', `key${k}`);
    let holding = 0;
    for (let k = 0; k < 40; k++)
      if ((await plain.status('hot', `key${k}`)).remaining !== LIMIT - 50) holding++;
    expect(holding).to.be.at.most(5);
  });

  it("remaining from a block is never more than the store's remainder when the block was taken", async () => {
    const { leased, plain } = limiters({ hotAfter: 1, idleMs: 60_000 });
    for (let i = 0; i < 500; i++) {
      const decision = await leased.consume('hot', 'k');
      expect(decision.remaining).to.be.at.most(LIMIT - (i + 1));
    }
    // The store counts the block as used: what the process reports is at least the store's figure.
    expect((await leased.consume('hot', 'k')).remaining).to.be.at.least(
      (await plain.status('hot', 'k')).remaining,
    );
  });

  it("a reset ends the key's block: the next decisions count from the reset", async () => {
    const { leased, plain } = limiters({ hotAfter: 1, idleMs: 60_000 });
    for (let i = 0; i < 300; i++) await leased.consume('hot', 'k');
    await plain.reset('hot', 'k');
    await until(
      'the block is forgotten',
      async () => (await leased.consume('hot', 'k')).remaining >= LIMIT - 1000,
      20_000,
    );
    // After the reset, admissions come from blocks taken on the new count, never from the old one.
    const store = await plain.status('hot', 'k');
    expect(store.remaining).to.be.at.least(LIMIT - 1000);
  });

  it("a rule-wide limit set in another process ends every key's block: no unit of the old limit is admitted", async () => {
    const { leased, plain } = limiters({ hotAfter: 1, idleMs: 60_000 });
    for (let i = 0; i < 300; i++) {
      await leased.consume('hot', 'a');
      await leased.consume('hot', 'b');
    }
    await plain.setLimit('hot', 100);
    // Every decision after the announcement is the store's at the new limit, or from a block taken at it.
    await until(
      'both keys decided at the rule-wide limit',
      async () =>
        (await leased.consume('hot', 'a')).limit === 100 && (await leased.consume('hot', 'b')).limit === 100,
      20_000,
    );
    for (const key of ['a', 'b']) {
      const decision = await leased.consume('hot', key);
      expect(decision.limit, key).to.equal(100);
      // Over the new limit already (300 counted at the old one): denied, not admitted from an old block.
      expect(decision.allowed, key).to.equal(false);
    }
  });

  it('rules with a lockout or outcome counting are never leased: one call per decision', async () => {
    const rules = [
      rule({ name: 'locks', lockout: { duration: '1m' } }),
      rule({ name: 'outcomes', countOn: 'failure' }),
    ];
    const { leased, plain } = limiters({ hotAfter: 1, idleMs: 60_000 }, rules);
    for (let i = 0; i < 200; i++) {
      await leased.consume('locks', 'k');
      await leased.consume('outcomes', 'k');
    }
    // Each decision was its own call: the store counted exactly what was decided, no block beyond it.
    expect((await plain.status('locks', 'k')).remaining).to.equal(LIMIT - 200);
    expect((await plain.status('outcomes', 'k')).remaining).to.equal(LIMIT - 200);
  });

  it('refuses bad leasing options, naming the field', () => {
    for (const [leasing, message] of [
      [{ hotAfter: 0 }, /leasing\.hotAfter must be an integer from 1/],
      [{ maxBlock: 1 }, /leasing\.maxBlock must be an integer from 2/],
      [{ share: 1.5 }, /leasing\.share/],
      [{ idleMs: -1 }, /leasing\.idleMs/],
      ['yes', /leasing must be a boolean or an object/],
      [{ hotafter: 5 }, /hotafter/],
    ] as const)
      expect(() => new RedisStore({ client, leasing: leasing as never }), String(leasing)).to.throw(message);
  });
});
