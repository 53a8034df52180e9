// A release learns from the store whether its slot was still held: observers and Prometheus count `lapsed`, not
// `released`, for a slot whose lease ran out (another holder may have it by then) or that an operator reset,
// on the memory store, Redis and PostgreSQL; and across processes, for a holder whose handler blocked its event
// loop past the lease while another process was admitted.
import { spawn } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { expect } from 'chai';
import type pg from 'pg';
import { Registry } from 'prom-client';
import {
  createLimiter,
  type Limiter,
  MemoryStore,
  PostgresStore,
  RedisStore,
  type Rule,
  type Store,
} from '../../src/index.js';
import { prometheusMetrics } from '../../src/operators/prometheus.js';
import { STALL_REQUEST, STALL_RULE } from '../fixtures/stall-worker.js';
import { getPostgres, type PostgresServer } from '../support/postgres.js';
import { exited, makeTempDir, removeTempDir, track } from '../support/processes.js';
import { getRedis } from '../support/redis.js';
import { PATIENT } from '../support/settle.js';
import { memoryStores, postgresStores, redisStores, type StoreFactory } from '../support/stores.js';

/** One export per user in flight, leased for an hour: no renewal runs while a test steps its clock. */
const EXPORTS: Rule = {
  name: 'exports',
  key: 'user',
  limit: 1,
  window: { type: 'concurrency', lease: '1h' },
};
const HOUR_MS = 3_600_000;
const req = (user: string) => ({ method: 'POST', path: '/exports', headers: {}, user });

type Told = { held: number; released: number; lapsed: number };

/** A limiter on `store` whose observer counts the slot changes it is told of, and its Prometheus registry. */
function observed(store: Store): { limiter: Limiter; told: Told; registry: Registry } {
  const limiter = createLimiter({ store, rules: [EXPORTS], ...PATIENT });
  const told: Told = { held: 0, released: 0, lapsed: 0 };
  limiter.observe({ slots: (event) => (told[event.change] += event.slots) });
  const registry = new Registry();
  prometheusMetrics(limiter, { registry });
  return { limiter, told, registry };
}

/** What `ratekeeper_slots_total` counted, by change. */
async function slotsTotal(registry: Registry): Promise<Record<string, number>> {
  const metric = await registry.getSingleMetric('ratekeeper_slots_total')?.get();
  return Object.fromEntries((metric?.values ?? []).map((v) => [String(v.labels.change), v.value]));
}

for (const target of [memoryStores, redisStores, postgresStores] satisfies StoreFactory[]) {
  describe(`a release counts lapsed for a slot the store no longer held, ${target.name}`, () => {
    const clock = { now: Date.parse('2026-12-07T00:00:00Z') };
    const limiters: Limiter[] = [];
    let store: Store;
    beforeEach(async () => {
      store = await target.makeStore(() => clock.now);
    });
    afterEach(async () => {
      await Promise.all(limiters.splice(0).map((l) => l.close()));
    });
    const make = () => {
      const made = observed(store);
      limiters.push(made.limiter);
      return made;
    };

    it('a slot released while held counts released', async () => {
      const a = make();
      const decision = await a.limiter.check(req('u1'));
      expect(decision.allowed).to.equal(true);
      await a.limiter.release(decision);
      expect(a.told).to.deep.equal({ held: 1, released: 1, lapsed: 0 });
      expect(await slotsTotal(a.registry)).to.deep.equal({ released: 1, lapsed: 0 });
    });

    it('a slot whose lease ran out without renewals, taken by another holder since, counts lapsed at its release', async () => {
      const [a, b] = [make(), make()];
      const first = await a.limiter.check(req('u1'));
      expect(first.allowed).to.equal(true);
      expect((await b.limiter.check(req('u1'))).allowed, 'the slot is held').to.equal(false);
      clock.now += HOUR_MS;
      const second = await b.limiter.check(req('u1'));
      expect(second.allowed, "admitted once the first holder's lease ran out").to.equal(true);
      await a.limiter.release(first);
      expect(a.told).to.deep.equal({ held: 1, released: 0, lapsed: 1 });
      expect(await slotsTotal(a.registry)).to.deep.equal({ released: 0, lapsed: 1 });
      expect(
        (await b.limiter.status('exports', 'u1')).count,
        "the late release left the other's slot",
      ).to.equal(1);
      await b.limiter.release(second);
      expect(b.told).to.deep.equal({ held: 1, released: 1, lapsed: 0 });
    });

    it('a slot whose lease ran out with no one taking it since counts lapsed at its release', async () => {
      const a = make();
      const decision = await a.limiter.check(req('u1'));
      clock.now += HOUR_MS;
      await a.limiter.release(decision);
      expect(a.told).to.deep.equal({ held: 1, released: 0, lapsed: 1 });
    });

    it('a slot an operator reset counts lapsed at its release; the slots of the same decision on other keys count apart', async () => {
      const a = make();
      const reset = await a.limiter.check(req('u1'));
      const kept = await a.limiter.check(req('u2'));
      await a.limiter.reset('exports', 'u1');
      await Promise.all([a.limiter.release(reset), a.limiter.release(kept)]);
      expect(a.told).to.deep.equal({ held: 2, released: 1, lapsed: 1 });
      expect(await slotsTotal(a.registry)).to.deep.equal({ released: 1, lapsed: 1 });
    });

    it('a second release of a decision tells nothing more', async () => {
      const a = make();
      const decision = await a.limiter.check(req('u1'));
      await a.limiter.release(decision);
      await a.limiter.release(decision);
      expect(a.told).to.deep.equal({ held: 1, released: 1, lapsed: 0 });
    });
  });
}

describe('a release the store keeps failing counts lapsed', () => {
  /** A memory store whose every refund fails: its slots lapse in it a lease after their last renewal. */
  const failingStore = (): Store =>
    new Proxy(new MemoryStore(), {
      get(target, prop) {
        if (prop === 'refund') return () => Promise.reject(new Error('store down'));
        const value = Reflect.get(target, prop, target);
        return typeof value === 'function' ? value.bind(target) : value;
      },
    }) as Store;
  const rule: Rule = {
    name: 'exports',
    key: 'user',
    limit: 2,
    window: { type: 'concurrency', lease: '1s' },
  };

  it('once its tries at the renewals of a lease have failed', async () => {
    const limiter = createLimiter({ store: failingStore(), rules: [rule] });
    const told: string[] = [];
    const lapsed = new Promise<void>((resolve) =>
      limiter.observe({
        slots: (event) => {
          told.push(event.change);
          if (event.change === 'lapsed') resolve();
        },
      }),
    );
    limiter.on('storeError', () => {});
    try {
      await limiter.release(await limiter.check(req('u1')));
      expect(told, 'not told before its tries end').to.deep.equal(['held']);
      await lapsed;
      expect(told).to.deep.equal(['held', 'lapsed']);
    } finally {
      await limiter.close();
    }
  });

  it('when the limiter closes with the release still to be tried again', async () => {
    const limiter = createLimiter({ store: failingStore(), rules: [rule] });
    const told: string[] = [];
    limiter.observe({ slots: (event) => told.push(event.change) });
    limiter.on('storeError', () => {});
    await limiter.release(await limiter.check(req('u1')));
    await limiter.close();
    expect(told).to.deep.equal(['held', 'lapsed']);
  });
});

/** The stalling holder (test/fixtures/stall-worker.ts): started, its 'admitted' awaited, its report read. */
function startStaller(kind: 'redis' | 'postgres', url: string, space: string, marker: string) {
  const child = track(
    spawn(process.execPath, ['--import', 'tsx', 'test/fixtures/stall-worker.ts', kind, url, space, marker], {
      stdio: ['ignore', 'pipe', 'inherit'],
    }),
  );
  const lines = createInterface({ input: child.stdout })[Symbol.asyncIterator]();
  const next = async () => {
    const line = await lines.next();
    if (line.done === true) throw new Error('the stalling process ended without a report');
    return String(line.value);
  };
  return { child, next };
}

describe('a holder whose event loop stalls past its lease while another process is admitted', function () {
  this.timeout(60_000);
  let dir: string;
  let server: PostgresServer;
  let pool: pg.Pool;
  before(async () => {
    dir = makeTempDir('stall');
    server = await getPostgres();
    pool = server.pool({ max: 4 });
  });
  after(async () => {
    await pool.end();
    removeTempDir(dir);
  });

  for (const [name, kind] of [
    ['Redis', 'redis'],
    ['PostgreSQL', 'postgres'],
  ] as const) {
    it(`${name}: the stalled holder's release counts lapsed, and its Prometheus counter too`, async () => {
      const space = `rks${Math.random().toString(16).slice(2, 10)}`;
      const marker = join(dir, `${space}.go`);
      const redis = kind === 'redis' ? await getRedis() : undefined;
      const url = redis === undefined ? server.url : redis.url;
      const staller = startStaller(kind, url, space, marker);
      expect(await staller.next()).to.equal('admitted');

      // The other process: its acquire waits for the slot, admitted once the stalled holder's lease ran out.
      const client = redis?.client();
      const store =
        client === undefined
          ? new PostgresStore({ pool, schema: space })
          : new RedisStore({ client, prefix: space });
      const other = createLimiter({ store, rules: [STALL_RULE], ...PATIENT });
      try {
        const turn = await other.acquire(STALL_RULE.name, STALL_REQUEST.user);
        // The stall ends once the other process holds the slot.
        writeFileSync(marker, '');
        const report = JSON.parse(await staller.next()) as Told & { prometheusLapsed: number };
        console.log(`      the stalled holder's observer: ${JSON.stringify(report)}`);
        expect(report).to.deep.equal({ held: 1, released: 0, lapsed: 1, prometheusLapsed: 1 });
        expect(
          (await other.status(STALL_RULE.name, STALL_REQUEST.user)).count,
          "the other's slot kept",
        ).to.equal(1);
        await turn.release();
        expect((await other.status(STALL_RULE.name, STALL_REQUEST.user)).count).to.equal(0);
      } finally {
        await other.close();
        client?.disconnect();
        await exited(staller.child);
      }
    });
  }
});
