// The ioredis connection's script calls (redis-connection-ioredis.ts): made into Commands by the connection,
// not copied argument by argument by `call`, with the same replies and errors as through `call`, on every
// ioredis-family client and a Cluster; and sent through `call` where it does more (a key prefix,
// auto-pipelining). Real servers.
import { expect } from 'chai';
import type { Redis as Ioredis5 } from 'ioredis5';
import type { RedisConnection } from '../../src/stores/redis/connection/connection.js';
import { ioredisConnection } from '../../src/stores/redis/connection/ioredis.js';
import { IOREDIS_5, IOREDIS_6, IOVALKEY } from '../support/clients.js';
import { getRedis, type RedisServer, useCluster } from '../support/redis.js';

/** A script that answers its KEYS and ARGV as it got them. */
const ECHO =
  'local out = {} for _, k in ipairs(KEYS) do out[#out + 1] = k end ' +
  'for _, a in ipairs(ARGV) do out[#out + 1] = a end return out';

/**
 * Runs `action` counting the arrays of more than one element that `Array.prototype.flat` was asked to
 * flatten one level into (`call` hands a command's arguments to its Command that way).
 */
async function countingFlattened<T>(action: () => Promise<T>): Promise<{ result: T; flattened: number }> {
  const flat = Array.prototype.flat;
  let flattened = 0;
  Array.prototype.flat = function (this: unknown[], ...rest: unknown[]) {
    for (const item of this) if (Array.isArray(item) && item.length > 1) flattened++;
    return flat.apply(this, rest as []);
  } as typeof flat;
  try {
    return { result: await action(), flattened };
  } finally {
    Array.prototype.flat = flat;
  }
}

/** The connection over an ioredis-family client. */
function connectionOf(client: unknown): RedisConnection {
  const connection = ioredisConnection(client);
  if (connection === undefined) throw new Error('not an ioredis-family client');
  return connection;
}

/** Arguments many enough to tell a copy apart: a key, then 40 values, some of them alike. */
const ARGS = Array.from({ length: 40 }, (_, i) => `v${i % 7}:${i}`);

describe('ioredis connection: script calls', () => {
  let server: RedisServer;
  before(async () => {
    server = await getRedis();
  });

  for (const kind of [IOREDIS_6, IOREDIS_5, IOVALKEY]) {
    describe(kind.name, () => {
      it('sends EVAL and EVALSHA as Commands of its own: the reply is the one `call` gets, nothing is copied', async () => {
        const client = (await kind.standalone(server)) as Ioredis5;
        try {
          const connection = connectionOf(client);
          const { result, flattened } = await countingFlattened(() =>
            connection.send('EVAL', [ECHO, '1', 'rk-echo-key', ...ARGS], 'rk-echo-key'),
          );
          expect(result).to.deep.equal(['rk-echo-key', ...ARGS]);
          expect(flattened, 'no argument copied by call').to.equal(0);
          expect(await client.call('EVAL', ECHO, '1', 'rk-echo-key', ...ARGS)).to.deep.equal(result);

          const sha = String(await client.script('LOAD', ECHO));
          const bySha = await countingFlattened(() =>
            connection.send('EVALSHA', [sha, '0', 'only', 'args'], undefined),
          );
          expect(bySha.result).to.deep.equal(['only', 'args']);
          expect(bySha.flattened).to.equal(0);
        } finally {
          await kind.close(client);
        }
      });

      it('fails as `call` fails: an unknown script is NOSCRIPT, an error in it names the error', async () => {
        const client = (await kind.standalone(server)) as Ioredis5;
        try {
          const connection = connectionOf(client);
          const missing = await connection.send('EVALSHA', ['0'.repeat(40), '0']).then(
            () => undefined,
            (error: unknown) => error as Error,
          );
          expect(missing?.message).to.match(/^NOSCRIPT/);
          const failing = await connection.send('EVAL', ["return redis.error_reply('RK broken')", '0']).then(
            () => undefined,
            (error: unknown) => error as Error,
          );
          expect(failing?.message).to.equal('RK broken');
        } finally {
          await kind.close(client);
        }
      });

      it('keeps `call` for a client with a key prefix or auto-pipelining: the reply is the one `call` gets', async () => {
        for (const [options, throughCall] of [
          [{ keyPrefix: 'rk-prefixed:' }, true],
          [{ enableAutoPipelining: true }, true],
          [{ showFriendlyErrorStack: true }, false],
        ] as const) {
          const client = (await kind.standalone(server)) as Ioredis5;
          // The options as a client made with them holds them (the kind makes its clients with its own).
          Object.assign(client.options, options);
          try {
            const connection = connectionOf(client);
            const viaCall = await client.call('EVAL', ECHO, '1', 'k', 'a');
            const { result, flattened } = await countingFlattened(() =>
              connection.send('EVAL', [ECHO, '1', 'k', 'a'], 'k'),
            );
            expect(result, JSON.stringify(options)).to.deep.equal(viaCall);
            expect(flattened > 0, `${JSON.stringify(options)}: through call`).to.equal(throughCall);
          } finally {
            await kind.close(client);
          }
        }
      });
    });
  }

  describe('on a Cluster (ioredis 6)', () => {
    const cluster = useCluster();
    it('routes the Commands it makes by their keys: each reply from the node serving the key', async () => {
      const connection = connectionOf(cluster.ioredis);
      for (const tag of ['a', 'b', 'c', 'd']) {
        const key = `rk-echo:{${tag}}`;
        const { result, flattened } = await countingFlattened(() =>
          connection.send('EVAL', [ECHO, '1', key, ...ARGS], key),
        );
        expect(result).to.deep.equal([key, ...ARGS]);
        expect(flattened).to.equal(0);
      }
    });
  });
});
