// One key per identity: rules of a limiter that share their key form keep their states in the identity's
// record <prefix>:{<identity>} (StoreRule.grouped; lua/identity-record.lua), read and written together. What the layout
// must keep: exact counts per rule, a state past its window counts as empty, the record lives as long as
// its longest field and never forever, clear/reset/locks per rule, old-layout keys ignored, less memory.
import { randomBytes } from 'node:crypto';
import { expect } from 'chai';
import type { Redis } from 'ioredis';
import { type CompiledRule, compileRules } from '../../../src/rules/compile.js';
import { CheckCall, identityKey, opKeys } from '../../../src/stores/redis/check-call.js';
import { RedisStore } from '../../../src/stores/redis/redis-store.js';
import type { StoreOp, StoreRule } from '../../../src/stores/store.js';
import type { Rule } from '../../../src/types.js';
import { getRedis } from '../../support/redis.js';

function compile(rules: Rule[]): CompiledRule[] {
  return compileRules(rules, { ipv6Subnet: 64 });
}

function opOf(rule: CompiledRule | StoreRule, key: string, nowMs: number, cost = 1): StoreOp {
  const store = 'store' in rule ? rule.store : rule;
  const periods = 'store' in rule ? rule.periods?.(nowMs) : undefined;
  const limit = 'store' in rule ? (rule.limit as number) : 3;
  return {
    rule: store,
    key,
    cost,
    limit,
    ...(periods && { periodEndMs: periods.endMs, nextPeriodEndMs: periods.nextEndMs }),
  };
}

/** Three fixed windows on one user: 3 a minute, 10 an hour, 100 a day (the SMS-code shape). */
const SMS: Rule[] = [
  { name: 'minute', key: 'body.phone', limit: 3, window: { type: 'fixed', size: '1m' } },
  { name: 'hour', key: 'body.phone', limit: 10, window: { type: 'fixed', size: '1h' } },
  { name: 'day', key: 'body.phone', limit: 100, window: { type: 'fixed', size: '1d' } },
];

describe('RedisStore: one key per identity (grouped rules)', () => {
  let client: Redis;
  /** The rules with a state in a record, sorted (its value: "<endMs>|<rule>=<state>|..."). */
  const rulesIn = async (key: string) =>
    ((await client.get(key)) ?? '')
      .split('|')
      .slice(1)
      .map((part) => part.split('=')[0])
      .sort();
  const stores: RedisStore[] = [];
  before(async () => {
    client = (await getRedis()).client();
  });
  after(async () => {
    for (const store of stores) await store.close();
    client.disconnect();
  });
  const setup = () => {
    const prefix = `rkh${randomBytes(4).toString('hex')}`;
    const clock = { now: Date.parse('2026-01-05T00:00:00Z') };
    const store = new RedisStore({ client, prefix, clock: () => clock.now });
    stores.push(store);
    return { prefix, clock, store };
  };

  it('groups the string windows that share a key form; a rule alone on its key, and other types, keep their own', () => {
    const same = () => 'x';
    const rules = compile([
      { name: 'a', key: 'user', limit: 1, window: { type: 'fixed', size: '1m' } },
      { name: 'b', key: 'user', limit: 1, window: { type: 'gcra', size: '1m' } },
      { name: 'c', key: 'user', limit: 1, window: { type: 'sliding', size: '1m', buckets: 4 } },
      { name: 'd', key: 'ip', limit: 1, window: { type: 'fixed', size: '1m' } },
      { name: 'e', key: same, limit: 1, window: { type: 'token-bucket', size: '1m' } },
      { name: 'f', key: same, limit: 1, window: { type: 'calendar', unit: 'day' } },
      { name: 'g', key: ['ip', 'user'], limit: 1, window: { type: 'fixed', size: '1m' } },
      { name: 'h', key: () => 'x', limit: 1, window: { type: 'fixed', size: '1m' } },
    ]);
    const grouped = Object.fromEntries(rules.map((r) => [r.name, r.store.grouped === true]));
    expect(grouped).to.deep.equal({
      a: true,
      b: true,
      c: false,
      d: false,
      e: true,
      f: true,
      g: false,
      h: false,
    });
  });

  it('keeps 3 rules of one identity in one record, alive as long as the longest window', async () => {
    const { prefix, clock, store } = setup();
    const rules = compile(SMS);
    const ops = () => rules.map((rule) => opOf(rule, '+15550100', clock.now));
    for (let i = 0; i < 3; i++) {
      const { results } = await store.evaluate(ops(), 'check');
      expect(results.map((r) => r.remaining)).to.deep.equal([2 - i, 9 - i, 99 - i]);
    }
    expect((await store.evaluate(ops(), 'check')).results.map((r) => r.allowed)).to.deep.equal([
      false,
      true,
      true,
    ]);
    const record = identityKey(prefix, '+15550100');
    expect(await client.keys(`${prefix}:*`)).to.deep.equal([record]);
    expect(await rulesIn(record)).to.deep.equal(['day', 'hour', 'minute']);
    const ttl = await client.pttl(record);
    expect(ttl)
      .to.be.greaterThan(86_400_000 - 60_000)
      .and.at.most(86_400_000);
    // Past the minute window the minute field counts as empty; the hour and day fields count on.
    clock.now += 60_000;
    const after = await store.evaluate(ops(), 'check');
    expect(after.results.map((r) => r.remaining)).to.deep.equal([2, 6, 96]);
    // Written again: its TTL still reaches the day window's end (store clock), not the minute's.
    expect(await client.pttl(record), 'never shortened').to.be.greaterThan(86_400_000 - 120_000);
  });

  it('extends the record to a longer window, never shortens it, and writes nothing when a rule denies', async () => {
    const { prefix, clock, store } = setup();
    const [minute, hour, day] = compile(SMS) as [CompiledRule, CompiledRule, CompiledRule];
    const record = identityKey(prefix, 'u');
    await store.evaluate([opOf(minute, 'u', clock.now)], 'check');
    expect(await client.pttl(record))
      .to.be.greaterThan(0)
      .and.at.most(60_000);
    await store.evaluate([opOf(day, 'u', clock.now)], 'check');
    expect(await client.pttl(record))
      .to.be.greaterThan(3_600_000)
      .and.at.most(86_400_000);
    await store.evaluate([opOf(minute, 'u', clock.now), opOf(hour, 'u', clock.now)], 'check');
    expect(await client.pttl(record)).to.be.greaterThan(3_600_000);
    const before = await client.get(record);
    // The minute rule has 1 left: a cost of 2 denies, and the hour field is not written either.
    const denied = await store.evaluate(
      [opOf(minute, 'u', clock.now, 2), opOf(hour, 'u', clock.now, 2)],
      'check',
    );
    expect(denied.results.map((r) => r.allowed)).to.deep.equal([false, true]);
    expect(await client.get(record)).to.equal(before);
  });

  it("clear and reset take one rule's field (and its lock) and leave the identity's other rules", async () => {
    const { prefix, clock, store } = setup();
    const rules = compile(SMS.map((rule) => ({ ...rule, lockout: { duration: '1m' } })));
    const [minute, hour] = rules as [CompiledRule, CompiledRule];
    const ops = () => rules.map((rule) => opOf(rule, 'u', clock.now));
    for (let i = 0; i < 4; i++) await store.evaluate(ops(), 'check');
    const record = identityKey(prefix, 'u');
    // The minute rule was exceeded: it locked (its field gone), and is listed.
    expect(await rulesIn(record)).to.deep.equal(['day', 'hour']);
    expect((await store.locked(minute.store, 10)).map((l) => l.key)).to.deep.equal(['u']);
    expect(await store.reset(hour.store, 'u', { keepLock: true })).to.equal(false);
    expect(await rulesIn(record)).to.deep.equal(['day']);
    expect(await store.reset(minute.store, 'u')).to.equal(true);
    expect(await client.exists(opKeys(prefix, 'minute', 'u').lock)).to.equal(0);
    expect(await store.locked(minute.store, 10)).to.deep.equal([]);
    expect(await rulesIn(record)).to.deep.equal(['day']);
    const { results } = await store.evaluate(ops(), 'check');
    expect(results.map((r) => r.remaining)).to.deep.equal([2, 9, 96]);
  });

  it('ignores the keys of the old layout (<prefix>:{<identity>}:<rule>): counters start afresh once', async () => {
    const { prefix, clock, store } = setup();
    const rules = compile(SMS);
    // A full minute window in the old layout's packed form: window end (ms since 2020) x 10^7 + count.
    const endRel = clock.now + 30_000 - 1_577_836_800_000;
    await client.set(opKeys(prefix, 'minute', 'u').count, `${endRel}0000003`, 'PX', 30_000);
    const { results } = await store.evaluate(
      rules.map((rule) => opOf(rule, 'u', clock.now)),
      'check',
    );
    expect(results.map((r) => r.remaining)).to.deep.equal([2, 9, 99]);
  });

  it('sends a record key once for the grouped rules of one identity in a row, and decides interleaved identities apart', async () => {
    const { prefix, clock, store } = setup();
    const [minute, hour, day] = compile(SMS) as [CompiledRule, CompiledRule, CompiledRule];
    const call = new CheckCall();
    const space = { prefix, cluster: false };
    call.add(
      space,
      [minute, hour, day].map((rule) => opOf(rule, 'a', clock.now)),
      'check',
      false,
      clock.now,
    );
    expect(call.keys).to.deep.equal([identityKey(prefix, 'a')]);
    const mixed = [opOf(minute, 'a', clock.now), opOf(hour, 'b', clock.now), opOf(day, 'a', clock.now)];
    const other = new CheckCall();
    other.add(space, mixed, 'check', false, clock.now);
    expect(other.keys).to.deep.equal(['a', 'b', 'a'].map((id) => identityKey(prefix, id)));
    await store.evaluate(mixed, 'check');
    const { results } = await store.evaluate(mixed, 'check');
    expect(results.map((r) => r.remaining)).to.deep.equal([1, 8, 98]);
    expect(await rulesIn(identityKey(prefix, 'a'))).to.deep.equal(['day', 'minute']);
    expect(await rulesIn(identityKey(prefix, 'b'))).to.deep.equal(['hour']);
  });

  it('keeps a hand-made grouped rule whose name could not label a state (| = ,) in a key of its own', async () => {
    const { prefix, clock, store } = setup();
    const odd: StoreRule = {
      name: 'a|b=c,d',
      type: 'fixed',
      sizeMs: 60_000,
      buckets: 0,
      burst: 0,
      lockout: undefined,
      dryRun: false,
      grouped: true,
    };
    const [minute] = compile(SMS) as [CompiledRule];
    const ops = () => [opOf(odd, 'u', clock.now), opOf(minute, 'u', clock.now)];
    await store.evaluate(ops(), 'check');
    const { results } = await store.evaluate(ops(), 'check');
    expect(results.map((r) => r.remaining)).to.deep.equal([1, 1]);
    expect(await rulesIn(identityKey(prefix, 'u'))).to.deep.equal(['minute']);
    expect(await client.exists(opKeys(prefix, odd.name, 'u').count)).to.equal(1);
  });

  it('refunds a grouped rule in its record', async () => {
    const { clock, store } = setup();
    const rules = compile(SMS);
    const ops = () => rules.map((rule) => opOf(rule, 'u', clock.now));
    const { results } = await store.evaluate(ops(), 'check');
    await store.refund(ops().map((op, i) => ({ op, receipt: (results[i] as { receipt: number }).receipt })));
    const peek = await store.evaluate(ops(), 'peek');
    expect(peek.results.map((r) => r.remaining)).to.deep.equal([2, 9, 99]);
  });

  it('takes less memory for 3 rules of one identity than 3 keys (MEMORY USAGE)', async () => {
    const { prefix, clock, store } = setup();
    const rules = compile(SMS);
    const apart = rules.map((rule) => ({ ...rule, store: { ...rule.store, grouped: false } }));
    for (let i = 0; i < 5; i++) {
      await store.evaluate(
        rules.map((rule) => opOf(rule, 'g', clock.now)),
        'check',
      );
      await store.evaluate(
        apart.map((rule) => opOf(rule, 's', clock.now)),
        'check',
      );
    }
    const usage = async (key: string) => Number(await client.memory('USAGE', key, 'SAMPLES', '0'));
    const grouped = await usage(identityKey(prefix, 'g'));
    let separate = 0;
    for (const rule of SMS) separate += await usage(opKeys(prefix, rule.name, 's').count);
    console.log(
      `      bytes per identity with 3 fixed rules: ${separate} in 3 keys, ${grouped} in one record`,
    );
    expect(grouped).to.be.below(separate);
  });
});
