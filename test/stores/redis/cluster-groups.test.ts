// Cluster batching across slots: requests of distinct identities (distinct slots) share one script call per
// master (lua/check.lua's cross-slot form, Redis 7), with every client library, and a slot moved under a
// stale map still counts each request once.
import { randomBytes } from 'node:crypto';
import { expect } from 'chai';
import { escapeIdentity } from '../../../src/stores/redis/check-call.js';
import { tagSlot } from '../../../src/stores/redis/keys.js';
import { RedisStore } from '../../../src/stores/redis/redis-store.js';
import type { StoreOp, StoreRule } from '../../../src/stores/store.js';
import {
  type AnyClient,
  IOREDIS_5,
  IOREDIS_6,
  IOVALKEY,
  NODE_REDIS_5,
  NODE_REDIS_6,
} from '../../support/clients.js';
import { useCluster, withConnection } from '../../support/redis.js';
import { until } from '../../support/settle.js';

const rule: StoreRule = {
  name: 'r',
  type: 'fixed',
  sizeMs: 60_000,
  buckets: 0,
  burst: 0,
  lockout: undefined,
  dryRun: false,
};
const LIMIT = 2;
const op = (identity: string): StoreOp => ({ rule, key: identity, cost: 1, limit: LIMIT });
const prefix = () => `rkx${randomBytes(4).toString('hex')}`;
type SlotRange = [number, number, [string, number]];

describe('RedisStore on a 3-master Cluster: one script call per master for requests of many slots', function () {
  this.timeout(120_000);
  const cluster = useCluster();

  const scriptCalls = async () =>
    (await cluster.commandCount('fcall')) +
    (await cluster.commandCount('evalsha')) +
    (await cluster.commandCount('eval'));
  const decideAll = (store: RedisStore, identities: string[]) =>
    Promise.all(identities.map((identity) => store.evaluate([op(identity)], 'check')));

  for (const kind of [IOREDIS_6, IOREDIS_5, IOVALKEY, NODE_REDIS_6, NODE_REDIS_5]) {
    describe(kind.name, () => {
      let client: AnyClient;
      const stores: RedisStore[] = [];
      before(async () => {
        client = await kind.cluster(cluster.nodes);
      });
      afterEach(async () => {
        await Promise.all(stores.splice(0).map((store) => store.close()));
      });
      after(() => kind.close(client));

      /** A store whose slot map has been read and whose scripts every master has. */
      async function warmStore(): Promise<RedisStore> {
        const store = new RedisStore({ client, prefix: prefix() });
        stores.push(store);
        const warm = Array.from({ length: 30 }, (_, i) => `warm-${i}`);
        // Warm once a round of them costs what a warm store's does: at most two calls per master.
        await until('a round of 30 identities in at most two script calls per master', async () => {
          const before = await scriptCalls();
          await decideAll(store, warm);
          return (await scriptCalls()) - before <= 6;
        });
        return store;
      }

      it('decides 45 identities of 45 slots in at most two calls per master, each counted once', async () => {
        const store = await warmStore();
        const identities = Array.from({ length: 45 }, (_, i) => `user-${i}`);
        expect(new Set(identities.map((identity) => tagSlot(escapeIdentity(identity)))).size).to.equal(45);
        for (let round = 1; round <= LIMIT + 1; round++) {
          const before = await scriptCalls();
          const decisions = await decideAll(store, identities);
          expect((await scriptCalls()) - before, `script calls, round ${round}`).to.be.at.most(6);
          for (const { results } of decisions) {
            expect(results[0]).to.include({ allowed: round <= LIMIT, count: Math.min(round, LIMIT) });
          }
        }
      });

      it('a slot moved to another master under a stale map: its requests are decided there, each counted once', async () => {
        const store = await warmStore();
        const moved = `moved-${randomBytes(4).toString('hex')}`;
        const slot = tagSlot(escapeIdentity(moved));
        const masters = cluster.nodes.filter((node) => node.role === 'master');
        const ranges = (await withConnection(masters[0] as (typeof masters)[number], (conn) =>
          conn.cluster('SLOTS'),
        )) as unknown as SlotRange[];
        const owner = ranges.find(([first, last]) => slot >= first && slot <= last)?.[2][1];
        const from = masters.find((node) => node.port === owner);
        const to = masters.find((node) => node.port !== owner);
        if (from === undefined || to === undefined) throw new Error('no masters to move the slot between');
        // Identities served by the same master, so that the moved one shares their call.
        const neighbours: string[] = [];
        for (let i = 0; neighbours.length < 10; i++) {
          const s = tagSlot(escapeIdentity(`n-${i}`));
          if (
            s !== slot &&
            ranges.some(([first, last, [, port]]) => port === owner && s >= first && s <= last)
          ) {
            neighbours.push(`n-${i}`);
          }
        }
        const round = () => decideAll(store, [...neighbours, moved]);
        expect((await round()).every((d) => d.results[0]?.allowed)).to.equal(true);

        const id = async (node: { host: string; port: number }) =>
          String(await withConnection(node, (conn) => conn.cluster('MYID')));
        const [fromId, toId] = await Promise.all([id(from), id(to)]);
        await withConnection(to, (conn) => conn.cluster('SETSLOT', slot, 'IMPORTING', fromId));
        await withConnection(from, async (conn) => {
          await conn.cluster('SETSLOT', slot, 'MIGRATING', toId);
          const keys = (await conn.cluster('GETKEYSINSLOT', slot, 100)) as string[];
          await conn.call('MIGRATE', to.host, String(to.port), '', '0', '5000', 'KEYS', ...keys);
        });
        for (const node of masters) {
          await withConnection(node, (conn) => conn.cluster('SETSLOT', slot, 'NODE', toId));
        }

        const second = await round();
        expect(second.map((d) => d.results[0]?.count)).to.deep.equal(new Array(11).fill(2));
        const third = await round();
        expect(third.map((d) => d.results[0]?.allowed)).to.deep.equal(new Array(11).fill(false));
        expect(third.map((d) => d.results[0]?.count)).to.deep.equal(new Array(11).fill(2));
      });
    });
  }
});
