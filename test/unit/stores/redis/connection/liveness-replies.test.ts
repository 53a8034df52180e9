// RESP3 replies (ioredis 6 and node-redis 6 speak RESP3 by default) read in the RESP2 shapes the store expects.
import { expect } from 'chai';
import { resp2 } from '../../../../../src/stores/redis/connection/liveness.js';

describe('resp2: a reply in the shape ioredis 5 gives it over RESP2', () => {
  it('leaves RESP2 shapes as they are, the same array when nothing changes', () => {
    const reply = [1, 2, 'three', null, [4, 'five']];
    expect(resp2(reply, ['EVALSHA'])).to.equal(reply);
    expect(resp2('OK', ['SET'])).to.equal('OK');
    expect(resp2(null, ['GET'])).to.equal(null);
    expect(resp2(undefined, ['GET'])).to.equal(null);
  });

  it('reads RESP3 doubles, big numbers and booleans as RESP2 does', () => {
    expect(resp2([1.5, 7, Number.POSITIVE_INFINITY, Number.NEGATIVE_INFINITY], ['X'])).to.deep.equal([
      '1.5',
      7,
      'inf',
      '-inf',
    ]);
    expect(resp2(12345678901234567890n, ['X'])).to.equal('12345678901234567890');
    expect(resp2([true, false], ['EVAL'])).to.deep.equal([1, null]);
  });

  it('flattens maps (plain objects and Map) and reads sets and boxed strings as arrays and strings', () => {
    expect(resp2({ a: '1', b: 2 }, ['HGETALL'])).to.deep.equal(['a', '1', 'b', 2]);
    expect(resp2(new Map<string, unknown>([['a', 1.5]]), ['X'])).to.deep.equal(['a', '1.5']);
    expect(resp2(new Set(['x', 'y']), ['SMEMBERS'])).to.deep.equal(['x', 'y']);
    expect(resp2(Object('text'), ['INFO'])).to.equal('text');
    expect(resp2(Buffer.from('bytes'), ['GET'])).to.equal('bytes');
  });

  it('flattens the [member, score] pairs of a WITHSCORES reply, scores as strings', () => {
    const argv = ['ZRANGEBYSCORE', 'k', '(1', '+inf', 'WITHSCORES', 'LIMIT', '0', '10'];
    expect(
      resp2(
        [
          ['m1', 1767225600000],
          ['m2', 2.5],
        ],
        argv,
      ),
    ).to.deep.equal(['m1', '1767225600000', 'm2', '2.5']);
    expect(resp2(['m1', '1767225600000'], argv), 'RESP2: flat already').to.deep.equal([
      'm1',
      '1767225600000',
    ]);
    expect(resp2([['a', 'b']], ['LRANGE']), 'nested arrays of other commands stay').to.deep.equal([
      ['a', 'b'],
    ]);
  });
});
