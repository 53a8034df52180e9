// The check script's reply leaves out the figures the client derives exactly (remaining from the limit and
// the count, a window's receipt from the request's time and resetMs): fewer integers for the client to read
// per op, and the decoded results the same as with every figure sent.
import { randomBytes } from 'node:crypto';
import { expect } from 'chai';
import type { Redis } from 'ioredis';
import type { Rule } from '../../../src/index.js';
import { type CompiledRule, compileRules } from '../../../src/rules/compile.js';
import { MemoryStore } from '../../../src/stores/memory/memory-store.js';
import {
  CheckCall,
  type KeySpace,
  OverrideReads,
  ruleLimitsKey,
} from '../../../src/stores/redis/check-call.js';
import { connectionOf } from '../../../src/stores/redis/client.js';
import { loadScripts } from '../../../src/stores/redis/function-library.js';
import { escapeRuleName } from '../../../src/stores/redis/op-text.js';
import { decodeCheckReply, Flag, FRESH, LEVEL_UNIT, runScript } from '../../../src/stores/redis/replies.js';
import type { OpResult, StoreOp } from '../../../src/stores/store.js';
import { getRedis } from '../../support/redis.js';
import { WINDOWS } from '../conformance/suite.js';

const NOW = Date.parse('2026-03-02T10:00:00Z');

describe('Redis check script: the reply leaves out derived figures', () => {
  let client: Redis;
  before(async () => {
    client = (await getRedis()).client();
  });
  after(() => client.disconnect());

  const rules = compileRules(
    [
      { name: 'fixed', key: 'user', limit: 3, window: { type: 'fixed', size: '1m' } },
      { name: 'log', key: 'user', limit: 3, window: { type: 'sliding-log', size: '1m' } },
      { name: 'slots', key: 'user', limit: 3, window: { type: 'concurrency', lease: '1m' } },
    ],
    { ipv6Subnet: 64 },
  ) as [CompiledRule, CompiledRule, CompiledRule];
  const op = (rule: CompiledRule, key: string): StoreOp => ({
    rule: rule.store,
    key,
    cost: 1,
    limit: rule.limit as number,
  });

  /** One call of the script for one op at `nowMs`: the raw reply and its decoded result. */
  async function call(
    prefix: string,
    o: StoreOp,
    nowMs: number,
    space: KeySpace = { prefix, cluster: false },
  ): Promise<{ reply: number[]; result: OpResult }> {
    const check = new CheckCall();
    check.add(space, [o], 'check', false, nowMs);
    const reply = (await runScript(
      connectionOf(client),
      loadScripts().check,
      check.allKeys(),
      check.args(),
    )) as number[];
    let result: OpResult | Error | undefined;
    decodeCheckReply(
      reply,
      1,
      () => [o],
      () => nowMs,
      (_r, results) => {
        result = results instanceof Error ? results : results[0];
      },
    );
    if (!result || result instanceof Error) throw result ?? new Error('no result');
    return { reply, result };
  }

  it('sends head, resetMs and count for a fixed window, and the client derives the same remaining and receipt as the memory store', async () => {
    const prefix = `rkr${randomBytes(4).toString('hex')}`;
    let nowMs = NOW;
    const memory = new MemoryStore({ clock: () => nowMs });
    const o = op(rules[0], 'alice');
    for (let i = 0; i < 5; i++) {
      nowMs = NOW + i;
      const { reply, result } = await call(prefix, o, nowMs);
      const expected = memory.evaluateSync([o], 'check').results[0] as OpResult;
      if (i === 0) {
        // The first call finds the key empty and counts at the op's own limit: FRESH alone, the result
        // computed by the client from the op.
        expect(reply).to.deep.equal([0, FRESH]);
      } else {
        // Every other call leaves derived figures out.
        const head = reply[1] as number;
        expect(head & Flag.REMAINING_DERIVED, 'remaining derived').to.not.equal(0);
        // A denial took nothing: its receipt is 0, sent, and its retryAfterMs follows.
        expect(head & Flag.RECEIPT_DERIVED, 'receipt derived').to.equal(
          result.allowed ? Flag.RECEIPT_DERIVED : 0,
        );
        // head, resetMs, count.
        expect(reply.length).to.equal(1 + 3 + (result.allowed ? 0 : 2));
      }
      const { allowed, remaining, count, resetMs, retryAfterMs, receipt } = expected;
      expect(result).to.deep.include({ allowed, remaining, count, resetMs, retryAfterMs, receipt });
    }
    await memory.close();
  });

  it("answers a fresh key FRESH alone and the client computes its result from the op's own window (a chosen size) for every type", async () => {
    const prefix = `rkr${randomBytes(4).toString('hex')}`;
    for (const rule of rules) {
      // A window chosen per request travels as the op's own rule (src/rules/window-choice.ts).
      const o: StoreOp = { ...op(rule, 'erin'), rule: { ...rule.store, sizeMs: 7_001 } };
      const memory = new MemoryStore({ clock: () => NOW });
      const { reply, result } = await call(prefix, o, NOW);
      expect(reply, rule.name).to.deep.equal([0, FRESH]);
      expect(result, rule.name).to.deep.equal(memory.evaluateSync([o], 'check').results[0]);
      await memory.close();
    }
  });

  it('answers a fresh key at a rule-wide limit FRESH less that limit, and the client computes the result at it for every type', async () => {
    const prefix = `rkr${randomBytes(4).toString('hex')}`;
    const typed = compileRules(
      [
        ...Object.entries(WINDOWS).map(([type, window]) => ({ name: type, key: 'user', limit: 3, window })),
        { name: 'gcra-burst', key: 'user', limit: 3, window: { type: 'gcra', size: '10s', burst: 2 } },
        { name: 'concurrency', key: 'user', limit: 3, window: { type: 'concurrency', lease: '1m' } },
      ] as Rule[],
      { ipv6Subnet: 64 },
    );
    // Every rule reads its rule-wide limit, as a store that learned of one does (OverrideReads).
    const reads = new OverrideReads(() => undefined);
    reads.known = true;
    for (const rule of typed) reads.limited.add(escapeRuleName(rule.name));
    const space: KeySpace = { prefix, cluster: false, overrides: reads };
    const memory = new MemoryStore({ clock: () => NOW });
    for (const rule of typed) {
      // The rule-limits field as setLimit writes it on a standalone server: "<limit>:<untilMs>" (0: until cleared).
      await client.hset(ruleLimitsKey(prefix, undefined), rule.name, '7:0');
      await memory.override(rule.store, null, 7);
      const o = op(rule, 'frank');
      const { reply, result } = await call(prefix, o, NOW, space);
      expect(reply, rule.name).to.deep.equal([0, FRESH - 7]);
      const expected = memory.evaluateSync([o], 'check').results[0] as OpResult;
      expect([expected.limit, expected.overridden], rule.name).to.deep.equal([7, true]);
      expect(result, rule.name).to.deep.equal(expected);
    }
    await memory.close();
  });

  it('sends the receipt where it is no window end (a sliding log entry, a concurrency slot id) and still derives remaining', async () => {
    const prefix = `rkr${randomBytes(4).toString('hex')}`;
    for (const rule of [rules[1], rules[2]]) {
      const o = op(rule, 'bob');
      await call(prefix, o, NOW);
      const { reply, result } = await call(prefix, o, NOW + 10);
      const head = reply[1] as number;
      expect((head % LEVEL_UNIT) & Flag.REMAINING_DERIVED, rule.name).to.not.equal(0);
      expect(head & Flag.RECEIPT_DERIVED, rule.name).to.equal(0);
      expect(reply.length, rule.name).to.equal(1 + 4);
      expect(result.remaining, rule.name).to.equal(1);
      expect(result.count, rule.name).to.equal(2);
      expect(result.receipt, rule.name).to.be.greaterThan(0);
    }
  });

  it("sends a concurrency slot id as its distance from the request's first id, decoded back to the id", async () => {
    const prefix = `rkr${randomBytes(4).toString('hex')}`;
    const o = op(rules[2], 'carol');
    const first = await call(prefix, o, NOW);
    // A fresh key: nothing sent but the flag; the id is the first of its ms.
    expect(first.result.receipt).to.equal(NOW * 1024 + 1);
    // Two more in the same ms: ids 2 and 3 of that ms, sent as 2 and 3.
    const second = await call(prefix, o, NOW);
    const third = await call(prefix, o, NOW);
    expect([second.reply[4], third.reply[4]]).to.deep.equal([2, 3]);
    expect([second.result.receipt, third.result.receipt]).to.deep.equal([NOW * 1024 + 2, NOW * 1024 + 3]);
    // Denied at the limit: no slot, a receipt of 0.
    const denied = await call(prefix, o, NOW + 5);
    expect(denied.result.allowed).to.equal(false);
    expect(denied.result.receipt).to.equal(0);
    // An id handed out ahead of the clock (the clock went back): its distance is still exact.
    const other = op(rules[2], 'dave');
    await call(prefix, other, NOW + 1000);
    const behind = await call(prefix, other, NOW);
    expect(behind.reply[4]).to.equal(1000 * 1024 + 2);
    expect(behind.result.receipt).to.equal((NOW + 1000) * 1024 + 2);
  });
});
