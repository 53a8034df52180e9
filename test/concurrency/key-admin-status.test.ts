// Operator views of a concurrency rule: `status` gives the requests in flight and how long each has been in
// flight (its slot's id holds the ms it was taken), on the memory store (a fake clock: exact ages), on a real
// Redis and a real PostgreSQL through the command line, and in the console.
import { randomBytes } from 'node:crypto';
import { expect } from 'chai';
import express from 'express';
import request from 'supertest';
import {
  createLimiter,
  type Decision,
  type Limiter,
  MemoryStore,
  PostgresStore,
  RedisStore,
} from '../../src/index.js';
import { operatorConsole } from '../../src/operators/console/index.js';
import { EXPORTS } from '../fixtures/concurrency-ops-rules.js';
import { type CliRun, runCliInProcess } from '../support/ops.js';
import { getPostgres, type PostgresServer } from '../support/postgres.js';
import { type RedisServer, startRedis } from '../support/redis.js';

const req = (user: string) => ({ method: 'POST', path: '/exports', headers: { 'x-user': user } });

/** The command line on one store, with the store's own options added. */
type Cli = (...args: string[]) => Promise<CliRun>;
type Status = { count: number; holders: Array<{ ageMs: number; leaseLeftMs: number }> };

/**
 * Takes 3 of EXPORTS's slots for u1 through `limiter`; the command line's status --json lists their holders,
 * oldest first, and its text shows them in flight and held for. Answers the slots and the text.
 */
async function expectThreeHolders(limiter: Limiter, cli: Cli): Promise<{ held: Decision[]; text: string }> {
  const held: Decision[] = [];
  for (let i = 0; i < 3; i++) held.push(await limiter.check(req('u1')));
  expect(held.map((d) => d.allowed)).to.deep.equal([true, true, true]);
  const json = await cli('status', 'exports', 'u1', '--json');
  expect(json.code, json.stderr).to.equal(0);
  const status = JSON.parse(json.stdout) as Status;
  expect(status.count).to.equal(3);
  expect(status.holders).to.have.length(3);
  for (const h of status.holders) {
    expect(h.ageMs).to.be.at.least(0);
    expect(h.leaseLeftMs).to.be.within(1, 30_000);
  }
  // Oldest first.
  const ages = status.holders.map((h) => h.ageMs);
  expect(ages).to.deep.equal([...ages].sort((a, b) => b - a));
  const text = await cli('status', 'exports', 'u1');
  expect(text.code, text.stderr).to.equal(0);
  expect(text.stdout).to.include('in flight 3 of 5, 2 free');
  expect(text.stdout).to.match(/held for {2}\d+(ms|s), \d+(ms|s), \d+(ms|s)\n/);
  return { held, text: text.stdout };
}

/** Releases `first`: the command line's status --json lists the 2 holders left. */
async function expectReleaseFreesOne(limiter: Limiter, first: Decision, cli: Cli): Promise<void> {
  await limiter.release(first);
  const after = JSON.parse((await cli('status', 'exports', 'u1', '--json')).stdout) as Status;
  expect(after.count).to.equal(2);
  expect(after.holders).to.have.length(2);
}

describe('operator views of a concurrency rule', function () {
  this.timeout(60_000);
  const open: Limiter[] = [];
  afterEach(async () => {
    await Promise.all(open.splice(0).map((l) => l.close()));
  });

  it("status: the count in flight and each holder's age and lease left, oldest first (memory store, fake clock)", async () => {
    let now = Date.parse('2026-03-02T00:00:00Z');
    const limiter = createLimiter({ rules: [EXPORTS], store: new MemoryStore({ clock: () => now }) });
    open.push(limiter);
    const first = await limiter.check(req('u1'));
    now += 5000;
    await limiter.check(req('u1'));
    now += 2000;
    const status = await limiter.status('exports', 'u1');
    expect(status).to.include({ count: 2, limit: 5, remaining: 3 });
    expect(status.holders).to.deep.equal([
      { ageMs: 7000, leaseLeftMs: 23_000 },
      { ageMs: 2000, leaseLeftMs: 28_000 },
    ]);
    await limiter.release(first);
    expect((await limiter.status('exports', 'u1')).holders).to.deep.equal([
      { ageMs: 2000, leaseLeftMs: 28_000 },
    ]);
    // Another key, and a key with nothing in flight: nothing listed.
    expect((await limiter.status('exports', 'u2')).holders).to.deep.equal([]);
  });

  it('a rule of another window type lists no holders', async () => {
    const limiter = createLimiter({
      rules: [{ name: 'hourly', key: 'header:x-user', limit: 5, window: { type: 'fixed', size: '1h' } }],
    });
    open.push(limiter);
    await limiter.check(req('u1'));
    expect(await limiter.status('hourly', 'u1')).not.to.have.property('holders');
  });

  describe('on Redis', () => {
    let server: RedisServer;
    before(async () => {
      server = await startRedis();
    });
    after(() => server.stop());

    it('the command line shows in flight and held for; --json lists the holders; a release removes one', async () => {
      const prefix = `ops${randomBytes(4).toString('hex')}`;
      const client = server.client();
      const limiter = createLimiter({ rules: [EXPORTS], store: new RedisStore({ client, prefix }) });
      open.push(limiter);
      const cli: Cli = (...args) =>
        runCliInProcess([...args, '--prefix', prefix, '--rules', 'test/fixtures/concurrency-ops-rules.ts'], {
          REDIS_URL: server.url,
        });
      const { held, text } = await expectThreeHolders(limiter, cli);
      expect(text).not.to.include('back to full');
      await expectReleaseFreesOne(limiter, held[0] as Decision, cli);
      client.disconnect();
    });
  });

  describe('on PostgreSQL', () => {
    let server: PostgresServer;
    before(async () => {
      server = await getPostgres();
    });

    it('the command line (--postgres) shows in flight and held for; --json lists the holders; release and reset free them', async () => {
      const schema = `ops${randomBytes(4).toString('hex')}`;
      const pool = server.pool({ max: 4 });
      const limiter = createLimiter({ rules: [EXPORTS], store: new PostgresStore({ pool, schema }) });
      open.push(limiter);
      const cli: Cli = (...args) =>
        runCliInProcess([
          ...args,
          '--postgres',
          server.url,
          '--schema',
          schema,
          '--rules',
          'test/fixtures/concurrency-ops-rules.ts',
        ]);
      const { held } = await expectThreeHolders(limiter, cli);
      await expectReleaseFreesOne(limiter, held[0] as Decision, cli);
      // unlock (a reset) frees every slot; a holder released after it frees nothing (the key keeps its last id).
      const reset = await cli('unlock', 'exports', 'u1');
      expect(reset.code, reset.stderr).to.equal(0);
      expect((await limiter.status('exports', 'u1')).holders).to.deep.equal([]);
      const fresh = await limiter.check(req('u1'));
      await limiter.release(held[1] as Decision);
      expect((await limiter.status('exports', 'u1')).count).to.equal(1);
      await limiter.release(fresh);
      await pool.end();
    });
  });

  it('the console shows In flight and Held for instead of a count that resets', async () => {
    let now = Date.parse('2026-03-02T00:00:00Z');
    const limiter = createLimiter({ rules: [EXPORTS], store: new MemoryStore({ clock: () => now }) });
    open.push(limiter);
    await limiter.check(req('u1'));
    now += 12_000;
    await limiter.check(req('u1'));
    now += 3000;
    const app = express();
    app.use('/ops', operatorConsole(limiter, { authorize: () => true }));
    const page = await request(app).get('/ops').query({ rule: 'exports', key: 'u1' }).expect(200);
    expect(page.text).to.include(
      '<dt>In flight</dt><dd>2 of 5, 3 free</dd><dt>Held for</dt><dd>15s, 3s</dd>',
    );
    expect(page.text).not.to.include('Back to full in');
  });
});
