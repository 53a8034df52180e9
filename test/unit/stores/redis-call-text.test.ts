// Text sent to the scripts: numbers printed as Lua reads them back, and the announcement of freed slots.
import { expect } from 'chai';
import { compileRules } from '../../../src/rules/compile.js';
import { refundCall } from '../../../src/stores/redis/calls.js';
import { luaNumber, SERVER_TIME } from '../../../src/stores/redis/op-text.js';
import type { StoreOp } from '../../../src/stores/store.js';

describe('Redis call text', () => {
  it('prints every number as String() does, integers past 2^31 (slot ids, epoch ms) included', () => {
    const edges = [
      0,
      1,
      -1,
      0.5,
      2 ** 31 - 1,
      2 ** 31,
      2 ** 31 + 1,
      1e9,
      1e9 + 1,
      1e15,
      1e15 + 7,
      999_999_999_999,
      1_772_445_600_000,
      1_814_963_814_400_123,
      Number.MAX_SAFE_INTEGER,
      Number.MAX_SAFE_INTEGER + 1,
      2 ** 60,
      1e21,
      -(2 ** 40),
      2 ** 40 + 0.5,
    ];
    for (const value of edges) expect(luaNumber(value), String(value)).to.equal(String(value));
    for (let i = 0; i < 20_000; i++) {
      const value = Math.floor(Math.random() * Number.MAX_SAFE_INTEGER);
      expect(luaNumber(value)).to.equal(String(value));
    }
  });

  it('announces each rule and key freed once, in the order first released, and nothing for other windows', () => {
    const [slots, other, fixed] = compileRules(
      [
        { name: 'slots', key: 'user', limit: 5, window: { type: 'concurrency', lease: '30s' } },
        { name: 'other', key: 'user', limit: 5, window: { type: 'concurrency', lease: '30s' } },
        { name: 'fixed', key: 'user', limit: 5, window: { type: 'fixed', size: '1m' } },
      ],
      { ipv6Subnet: 64 },
    );
    const refund = (rule: typeof slots, key: string, receipt: number) => ({
      op: { rule: rule?.store, key, cost: 1, limit: 5 } as StoreOp,
      receipt,
    });
    const announced = (refunds: ReturnType<typeof refund>[]) => {
      const { args } = refundCall({ prefix: 'p', cluster: false }, refunds, SERVER_TIME, true);
      const last = args[args.length - 1] as string;
      return last === 'quiet' ? undefined : JSON.parse(last);
    };
    expect(announced([refund(fixed, 'a', 1)])).to.equal(undefined);
    expect(
      announced([
        refund(slots, 'a', 1),
        refund(slots, 'a', 2),
        refund(fixed, 'z', 3),
        refund(other, 'a', 4),
        refund(slots, 'b', 5),
        refund(slots, 'a', 6),
        refund(other, 'a', 7),
        refund(slots, 'b', 8),
      ]),
    ).to.deep.equal(['slots', 'a', 'other', 'a', 'slots', 'b']);
    // A key holding the separator a made-up id would use is still told apart.
    expect(announced([refund(slots, 'a\u0000b', 1), refund(slots, 'a', 2)])).to.deep.equal([
      'slots',
      'a\u0000b',
      'slots',
      'a',
    ]);
  });
});
