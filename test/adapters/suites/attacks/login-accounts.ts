// The login recipe's accounts: IPv6 clients, unknown usernames answered as real ones, normalization, escalating
// locks, operator tools, every login endpoint and path spelling, parallel guesses.
import { expect } from 'chai';
import type request from 'supertest';
import type { LockoutEvent, UnlockEvent } from '../../../../src/index.js';
import { type AttackContext, bot, DAY, HOUR, MINUTE, RIGHT, SECOND, START } from './context.js';

export function loginAccounts(ctx: AttackContext): void {
  const { time, boot, login, deviceOf } = ctx;
  describe('login: accounts and operators', () => {
    it('credential stuffing from one IPv6 /56, one address (and /64) per attempt, meets one pair and one IP count', async () => {
      const app = await boot();
      // A new /64 of the same /56 for every attempt: 2001:db8:1:00xx::/64.
      const in56 = (n: number) => `2001:db8:1:${(n % 256).toString(16)}:${(n + 1).toString(16)}::1`;
      for (let i = 0; i < 5; i++) await login(app, { ip: in56(i), username: 'alice' }).expect(401);
      const locked = await login(app, { ip: in56(5), username: 'alice', password: RIGHT }).expect(429);
      expect(locked.headers['retry-after']).to.equal('60');
      expect((await app.loginLimiter.locked('login-pair')).map((l) => l.key)).to.deep.equal([
        'alice|2001:db8:1::/56',
      ]);
      // Another /56 is another client.
      await login(app, { ip: '2001:db8:1:100::1', username: 'alice', password: RIGHT }).expect(200);

      for (let i = 0; i < 95; i++)
        await login(app, { ip: in56(100 + i), username: `victim${i}@example.com` }).expect(401);
      await login(app, { ip: in56(999), username: 'someone-else' }).expect(429);
      expect((await app.loginLimiter.locked('login-ip')).map((l) => l.key)).to.deep.equal([
        '2001:db8:1::/56',
      ]);
      await login(app, { ip: '::ffff:198.51.100.1', username: 'bob' }).expect(401);
    });

    it('answers an unknown username exactly as an existing one: statuses, bodies, headers, counts', async () => {
      const transcript = async (username: string) => {
        time.now = START;
        const app = await boot();
        const out: unknown[] = [];
        const record = (res: request.Response) => {
          const { date: _date, ...headers } = res.headers;
          out.push({ status: res.status, body: res.body, headers });
        };
        for (let i = 0; i < 6; i++) record(await login(app, { ip: '198.51.100.1', username }));
        time.now += MINUTE;
        for (let i = 0; i < 4; i++) record(await login(app, { ip: bot(i), username }));
        record(await login(app, { ip: bot(9), username, path: '/rpc/login' }));
        record(await login(app, { ip: bot(10), username, path: '/rpc/login' }));
        for (const rule of ['login-account', 'login-account-cap']) {
          const { key: _key, ...status } = await app.loginLimiter.status(rule, username);
          out.push(status);
        }
        return out;
      };
      const existing = await transcript('alice');
      const unknown = await transcript('nobody-by-this-name');
      expect(unknown).to.deep.equal(existing);
      expect(existing.map((r) => (r as { status?: number }).status)).to.deep.equal([
        401,
        401,
        401,
        401,
        401,
        429,
        401,
        401,
        401,
        401,
        200,
        429,
        undefined,
        undefined,
      ]);
      // Login answers carry no rate-limit fields that could count another user's attempts.
      expect(Object.keys((existing[0] as { headers: object }).headers).filter((h) => /ratelimit/i.test(h))).to
        .be.empty;
    });

    it('normalizes usernames: " ALICE ", "Ａｌｉｃｅ" and "alice" are one account and one pair', async () => {
      const app = await boot();
      const variants = [' ALICE ', 'Ａｌｉｃｅ', 'alice', 'Alice', 'aLiCe\t'];
      for (const username of variants) await login(app, { ip: '198.51.100.1', username }).expect(401);
      await login(app, { ip: '198.51.100.1', username: 'ALICE' }).expect(429);
      expect((await app.loginLimiter.locked('login-pair')).map((l) => l.key)).to.deep.equal([
        'alice|198.51.100.1',
      ]);
      expect((await app.loginLimiter.status('login-account-cap', 'alice')).count).to.equal(5);
      await login(app, { ip: '198.51.100.2', username: 'ＡＬＩＣＥ', password: RIGHT }).expect(200);
      await app.settle();
      expect((await app.loginLimiter.status('login-account-cap', 'alice')).count).to.equal(0);
    });

    it('escalates the pair lock 1, 2, 4 … 60 minutes, ends each on time, and forgets it a day after the last', async () => {
      const app = await boot();
      const cookie = await deviceOf(app, '203.0.113.50'); // alice mistyping on her own device
      const lockouts: LockoutEvent[] = [];
      app.loginLimiter.on('lockout', (event) => lockouts.push(event));
      const ip = '203.0.113.7';
      const fail = () => login(app, { ip, username: 'alice', cookie });
      const expected = [1, 2, 4, 8, 16, 32, 60, 60];
      for (const minutes of expected) {
        for (let i = 0; i < 5; i++) await fail().expect(401);
        await fail()
          .expect(429)
          .expect('retry-after', String(minutes * 60));
        time.now += minutes * MINUTE - SECOND;
        await fail().expect(429).expect('retry-after', '1');
        time.now += SECOND;
      }
      expect(lockouts.map((e) => [e.rule, e.key, e.durationMs / MINUTE, e.level])).to.deep.equal(
        expected.map((m, i) => ['login-pair', `alice|${ip}`, m, i + 1]),
      );
      time.now += DAY - SECOND; // just short of a day after the last lock ended: the level is remembered
      for (let i = 0; i < 5; i++) await fail().expect(401);
      await fail()
        .expect(429)
        .expect('retry-after', String(60 * 60));
      time.now += HOUR + DAY;
      for (let i = 0; i < 5; i++) await fail().expect(401);
      await fail().expect(429).expect('retry-after', '60');
      expect(lockouts.at(-1)?.level).to.equal(1);
    });

    it('lets an operator list locked pairs, read one, and unlock it, with events that carry no request data', async () => {
      const app = await boot();
      const lockouts: LockoutEvent[] = [];
      const unlocks: UnlockEvent[] = [];
      const limited: unknown[] = [];
      app.loginLimiter.on('lockout', (event) => lockouts.push(event));
      app.loginLimiter.on('unlock', (event) => unlocks.push(event));
      app.loginLimiter.on('limited', (event) => limited.push(event));
      const pairs = [
        ['bob', '198.51.100.1'],
        ['alice', '198.51.100.2'],
        ['carol', '198.51.100.3'],
      ] as const;
      for (const [n, [username, ip]] of pairs.entries()) {
        for (let i = 0; i < 6; i++) await login(app, { ip, username });
        time.now += (n + 1) * SECOND;
      }
      const all = await app.loginLimiter.locked('login-pair');
      expect(all.map((l) => [l.key, l.remainingMs])).to.deep.equal([
        ['bob|198.51.100.1', MINUTE - 6 * SECOND],
        ['alice|198.51.100.2', MINUTE - 5 * SECOND],
        ['carol|198.51.100.3', MINUTE - 3 * SECOND],
      ]);
      expect(await app.loginLimiter.locked('login-pair', { limit: 2 })).to.deep.equal(all.slice(0, 2));
      expect(await app.loginLimiter.status('login-pair', 'alice|198.51.100.2')).to.deep.equal({
        rule: 'login-pair',
        key: 'alice|198.51.100.2',
        count: 0,
        limit: 5,
        overridden: false,
        remaining: 0,
        resetMs: MINUTE - 5 * SECOND,
        locked: true,
        lockRemainingMs: MINUTE - 5 * SECOND,
        level: 1,
      });

      await app.loginLimiter.reset('login-pair', 'alice|198.51.100.2');
      expect(unlocks).to.deep.equal([{ rule: 'login-pair', key: 'alice|198.51.100.2' }]);
      await login(app, { ip: '198.51.100.2', username: 'alice', password: RIGHT }).expect(200);
      await login(app, { ip: '198.51.100.1', username: 'bob' }).expect(429);
      expect((await app.loginLimiter.locked('login-pair')).map((l) => l.key)).to.deep.equal([
        'bob|198.51.100.1',
        'carol|198.51.100.3',
      ]);

      expect(lockouts).to.have.length(3);
      for (const event of lockouts)
        expect(Object.keys(event).sort()).to.deep.equal([
          'durationMs',
          'key',
          'level',
          'lockedUntil',
          'rule',
        ]);
      expect(limited.length).to.be.at.least(3);
      for (const event of limited)
        expect(Object.keys(event as object).sort()).to.deep.equal([
          'cached',
          'key',
          'locked',
          'retryAfterMs',
          'rule',
        ]);
      expect(JSON.stringify([lockouts, unlocks, limited])).not.to.match(/hunter2|correct-horse|password/);
    });

    it('counts failures of the 200-answering RPC endpoint (reported by the app) with those of /login', async () => {
      const app = await boot();
      const ip = '198.51.100.1';
      for (let i = 0; i < 3; i++) {
        const res = await login(app, { ip, username: 'alice', path: '/rpc/login' }).expect(200);
        expect(res.body).to.deep.equal({ ok: false, error: 'invalid username or password' });
      }
      await login(app, { ip, username: 'alice', password: RIGHT, path: '/rpc/login' }).expect(200, {
        ok: true,
      });
      expect((await app.loginLimiter.status('login-pair', `alice|${ip}`)).count).to.equal(0);
      for (let i = 0; i < 3; i++) await login(app, { ip, username: 'alice', path: '/rpc/login' }).expect(200);
      for (let i = 0; i < 2; i++) await login(app, { ip, username: 'alice' }).expect(401);
      await login(app, { ip, username: 'alice', password: RIGHT, path: '/rpc/login' }).expect(429);
      await login(app, { ip, username: 'alice', password: RIGHT }).expect(429);
    });

    it('limits /LOGIN, /login/ and /login?next=/ as /login', async () => {
      const app = await boot();
      const ip = '198.51.100.1';
      for (const path of ['/LOGIN', '/login/', '/login?next=/', '/Login', '/login'])
        await login(app, { ip, username: 'alice', path }).expect(401);
      await login(app, { ip, username: 'alice', password: RIGHT, path: '/login/' }).expect(429);
    });

    it('lets at most 5 of 50 parallel wrong passwords on one pair reach the password check', async () => {
      const app = await boot();
      const results = await Promise.all(
        Array.from({ length: 50 }, () => login(app, { ip: '198.51.100.1', username: 'alice' })),
      );
      const statuses = results.map((r) => r.status);
      expect(statuses.filter((s) => s === 401)).to.have.length(5);
      expect(statuses.filter((s) => s === 429)).to.have.length(45);
    });
  });
}
