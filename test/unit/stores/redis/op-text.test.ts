// Numbers in the text sent to the scripts (src/stores/redis/op-text.ts): printed as Lua reads them back.
import { expect } from 'chai';
import { luaNumber } from '../../../../src/stores/redis/op-text.js';

describe('Redis op text: numbers', () => {
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
});
