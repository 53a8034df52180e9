// Known ways around a rate limiter, played against apps built from the README on one framework and one
// store: a client that resets its connection, a client with no address, a forwarded-header entry, a name
// that stalls normalization, HEAD, a flood that evicts login counts. Each asserts the secure outcome.
import { randomBytes } from 'node:crypto';
import { rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { monitorEventLoopDelay } from 'node:perf_hooks';
import { expect } from 'chai';
import type { ExampleAppOptions } from '../../../examples/rules.js';
import {
  createLimiter,
  type Limiter,
  loginRules,
  MemoryStore,
  UNRESOLVED_IP_WARNING,
} from '../../../src/index.js';
import type { BypassFramework } from '../../fixtures/bypass-apps.js';
import { json, postThenReset, recordWarnings, send, serve } from '../../fixtures/bypass-client.js';
import { PATIENT, trackStore, until } from '../../support/settle.js';
import type { StoreFactory } from '../../support/stores.js';

const START = Date.parse('2026-03-02T00:00:00Z');
const phone = (n: number) => `+4478${String(n).padStart(8, '0')}`;
const bot = (n: number) => `10.${(n >> 16) & 255}.${(n >> 8) & 255}.${n & 255}`;

export function bypassSuite(framework: BypassFramework, stores: StoreFactory): void {
  describe(`${framework.name} on the ${stores.name} store: known bypasses stay closed`, function () {
    this.timeout(60_000);
    let now = START;
    const clock = () => now;
    const cleanup: Array<() => unknown> = [];
    let warnings: ReturnType<typeof recordWarnings>;
    beforeEach(() => {
      now = START;
      warnings = recordWarnings();
    });
    afterEach(async () => {
      warnings.stop();
      for (const step of cleanup.splice(0).reverse()) await step();
    });

    /** The example app (login, codes, API) on a fresh store; `sent` lists the codes it sent. */
    async function example(options: ExampleAppOptions = {}, socketPath?: string) {
      const tracked = trackStore(options.store ?? (await stores.makeStore(clock)));
      const sent: string[] = [];
      const app = framework.example({
        clock,
        trustProxy: 1,
        scryptCost: 1024,
        deviceSecret: 'a test secret of at least thirty-two bytes',
        sendCode: (to) => void sent.push(to),
        limiterOptions: PATIENT, // every figure asserted is the store's
        ...options,
        store: tracked.store,
      });
      const server = await serve(app.listener, socketPath);
      cleanup.push(() => Promise.all([app.limiter.close(), app.loginLimiter.close()]), server.close);
      /** Waits for the outcomes of the requests answered so far to reach the store. */
      const settle = async () => {
        await server.responsesClosed();
        await tracked.idle();
      };
      return { ...app, ...server, sent, settle };
    }

    it('a client that resets the connection right after writing its request never reaches the handler', async () => {
      const app = await example();
      let arrived = 0;
      app.server.prependListener('request', () => arrived++);
      for (let i = 0; i < 30; i++) await postThenReset(app.port, '/sms/code', { phone: phone(i) });
      await Promise.all(
        Array.from({ length: 30 }, (_, i) => postThenReset(app.port, '/sms/code', { phone: phone(100 + i) })),
      );
      // Every request the server will ever read has been read once it has seen every connection end.
      const connections = () =>
        new Promise<number>((resolve, reject) =>
          app.server.getConnections((error, count) => (error ? reject(error) : resolve(count))),
        );
      await until('the server saw every connection end', async () => (await connections()) === 0);
      await app.settle();
      expect(arrived, 'requests the server read').to.be.greaterThan(20);
      expect(app.sent, 'codes sent').to.deep.equal([]);
      for (const key of ['127.0.0.1', '#unresolved-ip'])
        expect((await app.limiter.status('sms-ip', key)).count, key).to.equal(0);
    });

    it('a Unix socket (no client address) shares one bucket per rule, with one warning naming the rule', async () => {
      const path = join(tmpdir(), `rk-${randomBytes(4).toString('hex')}.sock`);
      cleanup.push(() => rmSync(path, { force: true }));
      const app = await example({}, path);
      const statuses: number[] = [];
      for (let i = 0; i < 22; i++)
        statuses.push(
          (await send({ socketPath: path }, 'POST', '/sms/code', json({ phone: phone(i) })))?.status ?? 0,
        );
      expect(statuses.filter((s) => s === 200)).to.have.length(20);
      expect(statuses.slice(20)).to.deep.equal([429, 429]);
      expect(app.sent).to.have.length(20);
      expect((await app.limiter.status('sms-ip', '#unresolved-ip')).count).to.equal(20);
      const seen = await warnings.of(UNRESOLVED_IP_WARNING);
      expect(seen).to.have.length(1);
      expect(seen[0]).to.match(/rule "sms-ip": a request has no client address/);
    });

    for (const entry of ['unknown', '09.9.9.9', '', 'evil, unknown']) {
      it(`a trusted X-Forwarded-For entry ${JSON.stringify(entry)} never switches the IP rules off`, async () => {
        const app = await example();
        const headers = { 'x-forwarded-for': entry };
        let admitted = 0;
        for (let i = 0; i < 22; i++) {
          const res = await send(app, 'POST', '/sms/code', json({ phone: phone(i) }, headers));
          if (res?.status === 200) admitted++;
        }
        expect(admitted).to.equal(20);
        for (let i = 0; i < 100; i++)
          expect(
            (await send(app, 'POST', '/login', json({ username: `u${i}`, password: 'x' }, headers)))?.status,
          ).to.equal(401);
        expect(
          (await send(app, 'POST', '/login', json({ username: 'alice', password: 'x' }, headers)))?.status,
        ).to.equal(429);
      });
    }

    it('a 100,000-mark username neither stalls the event loop nor escapes the limits', async () => {
      const store = await stores.makeStore(clock);
      const limiter = createLimiter({ ...PATIENT, store, rules: loginRules() });
      const server = await serve(framework.wired('login', limiter));
      cleanup.push(() => limiter.close(), server.close);
      const marks = (n: number) => `a${'\u0316\u0301'.repeat(n / 2)}`;
      // Loop delay, not wall time: plain NFKC over 100,000 marks of alternating classes blocks the loop for
      // seconds (quadratic), three times per request in the login recipe; linear work over 200 kB takes
      // milliseconds. One second is far from both, so the bound tells complexity apart, not speed.
      const delay = monitorEventLoopDelay({ resolution: 10 });
      delay.enable();
      const statuses: Array<number | undefined> = [];
      for (const name of [marks(100_000), marks(100_000), marks(8_000), `${marks(100_000)}!`])
        statuses.push(
          (await send(server, 'POST', '/login', json({ username: name, password: 'x' })))?.status,
        );
      delay.disable();
      console.log(`      longest event-loop delay ${(delay.max / 1e6).toFixed(1)} ms over 4 requests`);
      expect(statuses).to.deep.equal([401, 401, 401, 401]);
      expect(delay.max / 1e6, 'longest event-loop delay, ms').to.be.below(1000);
      expect((await limiter.status('login-account-cap', '#oversized')).count).to.equal(3);
    });

    it('limits every spelling of /login that reaches the login handler as /login: 5 of 40', async () => {
      const store = await stores.makeStore(clock);
      const limiter = createLimiter({ store, rules: loginRules() });
      const server = await serve(framework.wired('login', limiter));
      cleanup.push(() => limiter.close(), server.close);
      const spellings = [
        '/login',
        '/%6Cogin',
        '/l%6Fgin',
        '//login',
        '/login;jsessionid=1',
        '/login//',
        '/login/',
        '/LOGIN',
      ];
      const statuses: Array<number | undefined> = [];
      for (let i = 0; i < 40; i++) {
        const path = spellings[i % spellings.length] as string;
        statuses.push((await send(server, 'POST', path, json({ username: 'alice', password: 'x' })))?.status);
      }
      // 401: the handler checked the password; 404: the framework routes that spelling nowhere (an app-wide
      // limiter may count such a request too, as Hono's does: fewer reach the handler then).
      expect(statuses[0], 'the first guess').to.equal(401);
      expect(statuses.filter((s) => s === 401).length, 'reached the handler').to.be.within(1, 5);
      expect(statuses.filter((s) => s !== 401 && s !== 404 && s !== 429)).to.deep.equal([]);
    });

    it('limits HEAD with the GET rule, so status codes cannot be probed unlimited', async () => {
      const app = await example({ apiPerMinute: 3 });
      const statuses: Array<number | undefined> = [];
      for (const method of ['HEAD', 'HEAD', 'GET', 'HEAD', 'GET'])
        statuses.push(
          (await send(app, method, '/api/items', { headers: { 'x-forwarded-for': '198.51.100.3' } }))?.status,
        );
      expect(statuses).to.deep.equal([200, 200, 200, 429, 429]);
    });

    it('keeps an account slowed and its counts through a flood of junk usernames that fills the store', async () => {
      const maxKeys = 300;
      const store =
        stores.name === 'memory' ? new MemoryStore({ maxKeys, clock }) : await stores.makeStore(clock);
      const app = await example({ store });
      const login = (ip: string, username: string) =>
        send(app, 'POST', '/login', json({ username, password: 'hunter2' }, { 'x-forwarded-for': ip }));
      for (let i = 0; i < 10; i++) expect((await login(bot(i), 'alice'))?.status).to.equal(401);
      expect((await login(bot(10), 'alice'))?.status, 'slowed').to.equal(429);
      for (let i = 0; i < 4; i++) await login('198.51.100.9', 'bob');
      for (let i = 0; i < 2 * maxKeys; i++) await login(bot(1000 + i), `junk${i}`);
      if (store instanceof MemoryStore) expect(store.size).to.be.at.most(maxKeys);
      expect((await login(bot(20), 'alice'))?.status, 'alice still slowed').to.equal(429);
      expect((await app.loginLimiter.status('login-account-cap', 'alice')).count).to.equal(10);
      expect((await app.loginLimiter.status('login-pair', 'bob|198.51.100.9')).count).to.equal(4);
      expect((await login('198.51.100.9', 'bob'))?.status).to.equal(401);
      expect((await login('198.51.100.9', 'bob'))?.status, "bob's pair locks at the 6th").to.equal(429);
    });
  });
}

export type { Limiter };
