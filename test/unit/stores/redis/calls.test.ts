// A release call's text (src/stores/redis/calls.ts, refundCall): the announcement of freed slots it carries.
import { expect } from 'chai';
import { compileRules } from '../../../../src/rules/compile.js';
import { refundCall } from '../../../../src/stores/redis/calls.js';
import { SERVER_TIME } from '../../../../src/stores/redis/op-text.js';
import type { StoreOp } from '../../../../src/stores/store.js';

describe('Redis release call text', () => {
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
