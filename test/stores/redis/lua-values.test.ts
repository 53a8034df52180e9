// lua/protocol.lua num(): every number the scripts write goes through it, so its text must be the one
// '%.0f' (whole numbers below 2^53) or '%.17g' (the rest) prints, in the Lua redis-server runs.
import { expect } from 'chai';
import type { Redis } from 'ioredis';
import { assembleScript } from '../../../src/stores/redis/function-library.js';
import { getRedis } from '../../support/redis.js';

/** Per number in ARGV: num's text, then the reference printf's. */
const COMPARE = `local num = require('protocol').num
local out = {}
for i = 1, #ARGV do
  local x = tonumber(ARGV[i])
  local want
  if x == math.floor(x) and math.abs(x) < 9007199254740992 then want = string.format('%.0f', x)
  else want = string.format('%.17g', x) end
  out[#out + 1] = num(x)
  out[#out + 1] = want
end
return out`;

describe('Lua num (lua/protocol.lua)', () => {
  let client: Redis;
  before(async () => {
    client = (await getRedis()).client();
  });
  after(() => client.disconnect());

  it("prints every number as '%.0f' (whole, below 2^53) or '%.17g' does, -0 included", async () => {
    const edges = [
      '0',
      '-0',
      '1',
      '-1',
      '999999',
      '1000000',
      '1000001',
      '999999999999',
      '1000000000000',
      '1000000000001',
      '1767225600000',
      '1809607145385984',
      '9007199254740991',
      '-9007199254740991',
      '9007199254740992',
      '1.5',
      '-2.25',
      '0.1',
      '1e300',
      '-1e-300',
    ];
    // Whole numbers of every magnitude up to 2^53, around the pieces' edges (multiples of 10^6 and 10^12).
    let seed = 7;
    const random = () => {
      seed = (seed * 1103515245 + 12345) % 2147483648;
      return seed / 2147483648;
    };
    const drawn: string[] = [];
    for (let i = 0; i < 2000; i++) {
      const x = Math.floor(random() * 2 ** Math.floor(random() * 54));
      drawn.push(
        String(x),
        String(-x),
        String(x + 0.5),
        String(x * 1e6 - 1),
        String(Math.min(x * 1e12, 2 ** 53 - 1)),
      );
    }
    const numbers = [...edges, ...drawn].filter((t) => Number.isFinite(Number(t)));
    const reply = (await client.eval(assembleScript(COMPARE), 0, ...numbers)) as string[];
    const wrong: string[] = [];
    for (let i = 0; i < numbers.length; i++) {
      if (reply[2 * i] !== reply[2 * i + 1])
        wrong.push(`${numbers[i]}: ${reply[2 * i]} (want ${reply[2 * i + 1]})`);
    }
    expect(wrong).to.deep.equal([]);
    expect(reply.length).to.equal(2 * numbers.length);
  });
});
