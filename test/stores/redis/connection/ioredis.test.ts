// The ioredis connection's script calls (src/stores/redis/connection/ioredis.ts): the same replies and errors
// as the client's own `call`, on every ioredis-family client, with a key prefix or auto-pipelining, and on a
// Cluster, each call routed to the node serving its key. Real servers.
import { expect } from 'chai';
import type { Redis as Ioredis5 } from 'ioredis5';
import type { RedisConnection } from '../../../../src/stores/redis/connection/connection.js';
import { ioredisConnection } from '../../../../src/stores/redis/connection/ioredis.js';
import { IOREDIS_5, IOREDIS_6, IOVALKEY } from '../../../support/clients.js';
import { getRedis, type RedisServer, useCluster } from '../../../support/redis.js';

/** A script that answers its KEYS and ARGV as it got them. */
const ECHO =
  'local out = {} for _, k in ipairs(KEYS) do out[#out + 1] = k end ' +
  'for _, a in ipairs(ARGV) do out[#out + 1] = a end return out';

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
      it('sends EVAL and EVALSHA with their arguments as given: the reply is the one `call` gets', async () => {
        const client = (await kind.standalone(server)) as Ioredis5;
        try {
          const connection = connectionOf(client);
          const result = await connection.send('EVAL', [ECHO, '1', 'rk-echo-key', ...ARGS], 'rk-echo-key');
          expect(result).to.deep.equal(['rk-echo-key', ...ARGS]);
          expect(await client.call('EVAL', ECHO, '1', 'rk-echo-key', ...ARGS)).to.deep.equal(result);

          const sha = String(await client.script('LOAD', ECHO));
          expect(await connection.send('EVALSHA', [sha, '0', 'only', 'args'], undefined)).to.deep.equal([
            'only',
            'args',
          ]);
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

      it('answers as `call` does with a key prefix, auto-pipelining or friendly error stacks', async () => {
        for (const options of [
          { keyPrefix: 'rk-prefixed:' },
          { enableAutoPipelining: true },
          { showFriendlyErrorStack: true },
        ]) {
          const client = (await kind.standalone(server)) as Ioredis5;
          // The options as a client made with them holds them (the kind makes its clients with its own).
          Object.assign(client.options, options);
          try {
            const connection = connectionOf(client);
            const viaCall = await client.call('EVAL', ECHO, '1', 'k', 'a');
            const result = await connection.send('EVAL', [ECHO, '1', 'k', 'a'], 'k');
            expect(result, JSON.stringify(options)).to.deep.equal(viaCall);
          } finally {
            await kind.close(client);
          }
        }
      });
    });
  }

  describe('on a Cluster (ioredis 6)', () => {
    const cluster = useCluster();
    it('routes each script call by its key: each reply from the node serving the key', async () => {
      const connection = connectionOf(cluster.ioredis);
      for (const tag of ['a', 'b', 'c', 'd']) {
        const key = `rk-echo:{${tag}}`;
        expect(await connection.send('EVAL', [ECHO, '1', key, ...ARGS], key)).to.deep.equal([key, ...ARGS]);
      }
    });
  });
});
