// The attack suite: the login and verification-code recipes of the example apps, played as an attacker would,
// for one framework on one store.
import http, { type RequestListener } from 'node:http';
import type { AddressInfo } from 'node:net';
import { expect } from 'chai';
import request from 'supertest';
import type { ExampleAppOptions } from '../examples/rules.js';
import type { Limiter, LockoutEvent, UnlockEvent } from '../src/index.js';
import type { StoreFactory } from './support/stores.js';

/** A framework's example app as a request listener, with its two limiters. */
export interface Framework {
  name: string;
  create(options: ExampleAppOptions): { listener: RequestListener; limiter: Limiter; loginLimiter: Limiter };
}

const START = Date.parse('2026-03-02T00:00:00Z'); // 08:00 in Asia/Shanghai
const SECOND = 1000;
const MINUTE = 60 * SECOND;
const HOUR = 60 * MINUTE;
const DAY = 24 * HOUR;
const WRONG = 'hunter2';
const RIGHT = 'correct-horse';

/** The n-th address of a botnet: distinct IPv4 addresses (n < 2^24). */
const bot = (n: number) => `10.${(n >> 16) & 255}.${(n >> 8) & 255}.${n & 255}`;

export function attackSuite(framework: Framework, stores: StoreFactory): void {
  describe(`${framework.name} example app on the ${stores.name} store, under attack`, function () {
    this.timeout(60_000);
    let now = START;
    const clock = () => now;
    const open: Array<{ server: http.Server; limiters: Limiter[] }> = [];

    beforeEach(() => {
      now = START;
    });
    afterEach(async () => {
      for (const { server, limiters } of open.splice(0)) {
        server.close();
        await Promise.all(limiters.map((l) => l.close()));
      }
    });

    /** Boots the example app on a fresh store, listening on a free port. */
    async function boot(options: ExampleAppOptions = {}) {
      const store = await stores.makeStore(clock);
      const built = framework.create({
        store,
        clock,
        trustProxy: 1,
        scryptCost: 1024, // fast fake password hashes
        deviceSecret: 'a test secret of at least thirty-two bytes',
        ...options,
      });
      const server = http.createServer(built.listener).listen(0, '127.0.0.1');
      await new Promise((resolve) => server.once('listening', resolve));
      open.push({ server, limiters: [built.limiter, built.loginLimiter] });
      const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
      /**
       * Waits for the outcome of the last answered request to reach the store: the adapters report it
       * as the response goes out, which on a shared store lands a round trip or two after the client has it.
       */
      const settle = (): Promise<void> =>
        store.local ? Promise.resolve() : new Promise((resolve) => setTimeout(resolve, 100));
      return { ...built, url, settle };
    }

    type App = Awaited<ReturnType<typeof boot>>;

    interface Attempt {
      ip: string;
      username?: unknown;
      password?: unknown;
      cookie?: string;
      path?: string;
    }
    function login(app: App, a: Attempt) {
      const body: Record<string, unknown> = {};
      if (a.username !== undefined) body.username = a.username;
      body.password = a.password ?? WRONG;
      const req = request(app.url)
        .post(a.path ?? '/login')
        .set('x-forwarded-for', a.ip)
        .send(body);
      return a.cookie === undefined ? req : req.set('cookie', a.cookie);
    }
    /** Alice logs in from `ip` and gets her device cookie. */
    async function deviceOf(app: App, ip = '203.0.113.7'): Promise<string> {
      const res = await login(app, { ip, username: 'alice', password: RIGHT }).expect(200);
      const setCookie = res.headers['set-cookie'] as unknown as string[] | undefined;
      expect(setCookie?.[0]).to.match(/^__Host-device=[^;]+; Max-Age=2592000; Path=\/; Secure; HttpOnly/);
      await app.settle();
      return (setCookie?.[0] ?? '').split(';')[0] as string;
    }
    function code(app: App, ip: string, body: Record<string, unknown>, path = '/sms/code') {
      return request(app.url).post(path).set('x-forwarded-for', ip).send(body);
    }

    describe('login', () => {
      it('password spraying: one IP failing over 100 usernames is blocked for a day, other IPs are not', async () => {
        const app = await boot();
        const sprayer = '198.51.100.7';
        for (let i = 0; i < 100; i++) await login(app, { ip: sprayer, username: `user${i}` }).expect(401);
        const blocked = await login(app, { ip: sprayer, username: 'user100' }).expect(429);
        expect(blocked.headers['retry-after']).to.equal(String(DAY / SECOND));
        await login(app, { ip: sprayer, username: 'alice', password: RIGHT }).expect(429);
        await login(app, { ip: '198.51.100.8', username: 'alice', password: RIGHT }).expect(200);
        const locked = await app.loginLimiter.locked('login-ip');
        expect(locked.map(({ key, remainingMs, level }) => ({ key, remainingMs, level }))).to.deep.equal([
          { key: sprayer, remainingMs: DAY, level: 1 },
        ]);
        now += DAY - SECOND;
        await login(app, { ip: sprayer, username: 'user101' }).expect(429).expect('retry-after', '1');
        now += SECOND;
        await login(app, { ip: sprayer, username: 'user101' }).expect(401);
      });

      it('counts a missing, empty, object or array username against the IP only', async () => {
        const app = await boot();
        const ip = '198.51.100.9';
        const usernames = [undefined, '', '   ', { $ne: '' }, ['alice'], null, true];
        for (let i = 0; i < 100; i++)
          await login(app, { ip, username: usernames[i % usernames.length] }).expect(401);
        await login(app, { ip, username: { $ne: '' } }).expect(429);
        expect((await app.loginLimiter.status('login-ip', ip)).locked).to.equal(true);
        for (const rule of ['login-pair', 'login-account', 'login-account-cap'])
          expect(await app.loginLimiter.locked(rule), rule).to.deep.equal([]);
        expect((await app.loginLimiter.status('login-account-cap', 'alice')).count).to.equal(0);
        expect((await app.loginLimiter.status('login-account-cap', '[object Object]')).count).to.equal(0);
      });

      it('one username guessed from many IPs is slowed to one failure per 6 minutes after 10, never locked', async () => {
        const app = await boot();
        for (let i = 0; i < 10; i++) await login(app, { ip: bot(i), username: 'alice' }).expect(401);
        const slowed = await login(app, { ip: bot(10), username: 'alice' }).expect(429);
        expect(slowed.headers['retry-after']).to.equal('360');
        expect(slowed.body).to.deep.equal({ error: 'Too Many Requests', retryAfter: 360 });
        for (let i = 11; i < 40; i++) {
          const res = await login(app, { ip: bot(i), username: 'alice' }).expect(429);
          expect(Number(res.headers['retry-after'])).to.be.at.most(360);
        }
        now += 360 * SECOND;
        await login(app, { ip: bot(40), username: 'alice' }).expect(401);
        await login(app, { ip: bot(41), username: 'alice' })
          .expect(429)
          .expect('retry-after', '360');
        expect(await app.loginLimiter.locked('login-account')).to.deep.equal([]);
        const status = await app.loginLimiter.status('login-account', 'alice');
        expect(status).to.include({ locked: false, lockRemainingMs: 0, remaining: 0, limit: 10 });
        // Another account is not affected.
        await login(app, { ip: bot(42), username: 'bob' }).expect(401);
      });

      it("never slows the owner's trusted device, and trusts only a valid, unexpired cookie for that account", async () => {
        const app = await boot();
        const cookie = await deviceOf(app);
        for (let i = 0; i < 30; i++) await login(app, { ip: bot(i), username: 'alice' });
        await login(app, { ip: bot(99), username: 'alice', password: RIGHT }).expect(429);
        // Her own device: a typo is a plain failure, and then she is in, at once.
        await login(app, { ip: '203.0.113.7', username: 'alice', cookie }).expect(401);
        await login(app, { ip: '203.0.113.7', username: 'Alice', password: RIGHT, cookie }).expect(200);
        // From a new network too: the cookie, not the IP, is what is trusted.
        await login(app, { ip: '192.0.2.77', username: 'alice', password: RIGHT, cookie }).expect(200);

        const [name, value] = cookie.split('=') as [string, string];
        const [user, nonce, expires, mac] = value.split('.') as [string, string, string, string];
        const forged = [
          `${name}=${user}.${nonce}.${Number(expires) + 1}.${mac}`, // a longer life
          `${name}=${Buffer.from('bob').toString('base64url')}.${nonce}.${expires}.${mac}`, // another account
          `${name}=${user}.${nonce}.${expires}.${mac.slice(0, -2)}`, // a truncated signature
          `${name}=${user}.${nonce}.${expires}`,
        ];
        for (const bad of forged)
          await login(app, { ip: '203.0.113.7', username: 'alice', password: RIGHT, cookie: bad }).expect(
            429,
          );
        // Bob's own cookie does not vouch for alice's account.
        await login(app, { ip: '203.0.113.7', username: 'alice', password: RIGHT, cookie: 'x=1' }).expect(
          429,
        );
      });

      it('stops trusting a device cookie 30 days after it was issued', async () => {
        const app = await boot();
        const cookie = await deviceOf(app);
        now += 30 * DAY;
        for (let i = 0; i < 10; i++) await login(app, { ip: bot(i), username: 'alice' }).expect(401);
        await login(app, { ip: '203.0.113.7', username: 'alice', password: RIGHT, cookie }).expect(429);
      });

      it('keeps a victim on a new device waiting at most 6 minutes per attempt, through 3 hours of attack', async () => {
        const app = await boot();
        const victim = '192.0.2.200';
        let attempts = 0;
        let longest = 0;
        for (let minute = 1; minute <= 180; minute++) {
          now = Math.max(now, START + minute * MINUTE);
          await login(app, { ip: bot(minute), username: 'alice' }); // a guess every minute
          if (minute % 30 !== 0) continue;
          let res = await login(app, { ip: victim, username: 'alice', password: RIGHT });
          attempts++;
          if (res.status === 429) {
            const wait = Number(res.headers['retry-after']);
            longest = Math.max(longest, wait);
            now += wait * SECOND;
            res = await login(app, { ip: victim, username: 'alice', password: RIGHT });
          }
          expect(res.status).to.equal(200);
          await app.settle();
        }
        expect(attempts).to.equal(6);
        expect(longest).to.be.within(1, 360);
        expect(await app.loginLimiter.locked('login-account-cap')).to.deep.equal([]);
      });

      it('holds the account at 100 consecutive failures, reached only after 9 hours, until an operator resets it', async () => {
        const app = await boot();
        const lockouts: LockoutEvent[] = [];
        const unlocks: UnlockEvent[] = [];
        app.loginLimiter.on('lockout', (event) => lockouts.push(event));
        app.loginLimiter.on('unlock', (event) => unlocks.push(event));
        const cookie = await deviceOf(app);

        /** Guesses alice's password from new IPs, waiting out each slowdown, until `count` failures. */
        let n = 0;
        async function guess(count: number): Promise<void> {
          for (let failures = 0; failures < count; n++) {
            const res = await login(app, { ip: bot(n), username: 'alice' });
            if (res.status === 401) failures++;
            else {
              expect(res.status).to.equal(429);
              now += Number(res.headers['retry-after']) * SECOND;
            }
          }
        }
        // A success in between clears the count: only consecutive failures reach the cap.
        await guess(60);
        expect((await app.loginLimiter.status('login-account-cap', 'alice')).count).to.equal(60);
        await login(app, { ip: '203.0.113.7', username: 'alice', password: RIGHT, cookie }).expect(200);
        await app.settle();
        expect((await app.loginLimiter.status('login-account-cap', 'alice')).count).to.equal(0);

        const started = now;
        await guess(100);
        expect(now - started).to.be.at.least(9 * HOUR);
        expect(lockouts).to.deep.equal([]);
        const capped = await login(app, { ip: bot(5000), username: 'alice' }).expect(429);
        expect(capped.headers['retry-after']).to.equal(String((30 * DAY) / SECOND));
        // The owner's trusted device is held too: NIST's cap is per account.
        await login(app, { ip: '203.0.113.7', username: 'alice', password: RIGHT, cookie })
          .expect(429)
          .expect('retry-after', String((30 * DAY) / SECOND));
        await login(app, { ip: bot(5001), username: 'bob' }).expect(401);

        expect(lockouts).to.deep.equal([
          {
            rule: 'login-account-cap',
            key: 'alice',
            durationMs: 30 * DAY,
            lockedUntil: now + 30 * DAY,
            level: 1,
          },
        ]);
        const [listed, ...others] = await app.loginLimiter.locked('login-account-cap');
        expect(others).to.deep.equal([]);
        expect(listed).to.deep.equal({
          rule: 'login-account-cap',
          key: 'alice',
          remainingMs: 30 * DAY,
          lockedUntil: now + 30 * DAY,
          level: 1,
        });
        expect(await app.loginLimiter.status('login-account-cap', 'alice')).to.include({
          locked: true,
          lockRemainingMs: 30 * DAY,
          level: 1,
        });

        now += 2 * HOUR; // still locked: only a reset reopens it
        await login(app, { ip: '203.0.113.7', username: 'alice', password: RIGHT, cookie }).expect(429);
        await app.loginLimiter.reset('login-account-cap', 'alice');
        expect(unlocks).to.deep.equal([{ rule: 'login-account-cap', key: 'alice' }]);
        expect(await app.loginLimiter.locked('login-account-cap')).to.deep.equal([]);
        await login(app, { ip: '203.0.113.7', username: 'alice', password: RIGHT, cookie }).expect(200);
        expect(JSON.stringify([lockouts, unlocks])).not.to.match(/hunter2|correct-horse|password/);
      });

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
          now = START;
          const app = await boot();
          const out: unknown[] = [];
          const record = (res: request.Response) => {
            const { date: _date, ...headers } = res.headers;
            out.push({ status: res.status, body: res.body, headers });
          };
          for (let i = 0; i < 6; i++) record(await login(app, { ip: '198.51.100.1', username }));
          now += MINUTE;
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
        expect(Object.keys((existing[0] as { headers: object }).headers).filter((h) => /ratelimit/i.test(h)))
          .to.be.empty;
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
          now += minutes * MINUTE - SECOND;
          await fail().expect(429).expect('retry-after', '1');
          now += SECOND;
        }
        expect(lockouts.map((e) => [e.rule, e.key, e.durationMs / MINUTE, e.level])).to.deep.equal(
          expected.map((m, i) => ['login-pair', `alice|${ip}`, m, i + 1]),
        );
        now += DAY - SECOND; // just short of a day after the last lock ended: the level is remembered
        for (let i = 0; i < 5; i++) await fail().expect(401);
        await fail()
          .expect(429)
          .expect('retry-after', String(60 * 60));
        now += HOUR + DAY;
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
          now += (n + 1) * SECOND;
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
        for (let i = 0; i < 3; i++)
          await login(app, { ip, username: 'alice', path: '/rpc/login' }).expect(200);
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

    describe('verification codes', () => {
      it('SMS pumping: 20 numbers from one IP in an hour, then refused; other IPs still send', async () => {
        const app = await boot();
        const pumper = '198.51.100.66';
        for (let i = 0; i < 20; i++)
          await code(app, pumper, { phone: `+4478${String(i).padStart(8, '0')}` }).expect(200);
        const refused = await code(app, pumper, { phone: '+447899999999' }).expect(429);
        expect(refused.headers.ratelimit).to.match(/"sms-ip";r=0;/);
        await code(app, '198.51.100.67', { phone: '+447899999999' }).expect(200);
        // The e-mail endpoint has its own budget.
        await code(app, pumper, { email: 'someone@example.com' }, '/email/code').expect(200);
        const wait = Number(refused.headers['retry-after']);
        expect(wait).to.be.within(3600, 3960);
        now += wait * SECOND;
        await code(app, pumper, { phone: '+447899999998' }).expect(200);
      });

      it('one number flooded from many IPs: once a minute, 10 a day, the day ending at midnight in Shanghai', async () => {
        const app = await boot();
        const phone = '+8613800138000';
        await code(app, bot(0), { phone }).expect(200);
        await code(app, bot(1), { phone }).expect(429).expect('retry-after', '60');
        for (const variant of [
          '+86 138 0013 8000',
          '+86 (138) 0013-8000',
          '+86.138.0013.8000',
          '＋８６１３８００１３８０００',
        ])
          await code(app, bot(2), { phone: variant }).expect(429);
        for (let i = 1; i < 10; i++) {
          now += MINUTE;
          await code(app, bot(10 + i), { phone }).expect(200);
        }
        now += MINUTE;
        const day = await code(app, bot(30), { phone }).expect(429);
        // 08:10 in Shanghai: 15 h 50 min to midnight.
        expect(day.headers['retry-after']).to.equal(String(16 * 3600 - 10 * 60));
        expect(day.headers.ratelimit).to.match(/"sms-day";r=0;t=57000/);
        now = Date.parse('2026-03-02T16:00:00Z'); // midnight in Shanghai
        await code(app, bot(31), { phone }).expect(200);
      });

      it('does not charge a code that failed to send (5xx) or a refused request (4xx)', async () => {
        let down = true;
        const app = await boot({
          sendCode: () => {
            if (down) throw new Error('gateway down');
          },
        });
        const ip = '198.51.100.1';
        await code(app, ip, { phone: '+8613800138000' }).expect(503);
        await code(app, ip, { phone: '+1555' }).expect(400);
        await code(app, ip, { phone: { $ne: '' } }).expect(400);
        await code(app, ip, {}).expect(400);
        await app.settle();
        for (const rule of ['sms-minute', 'sms-day'])
          expect((await app.limiter.status(rule, '+8613800138000')).count, rule).to.equal(0);
        expect((await app.limiter.status('sms-ip', ip)).count).to.equal(0);
        expect((await app.limiter.status('sms-global', 'all')).count).to.equal(0);
        down = false;
        await code(app, ip, { phone: '+8613800138000' }).expect(200);
        expect((await app.limiter.status('sms-ip', ip)).count).to.equal(1);
      });

      it('treats e-mail addresses that differ in case or spaces as one destination', async () => {
        const app = await boot();
        await code(app, bot(0), { email: 'Alice@Example.com' }, '/email/code').expect(200);
        await code(app, bot(1), { email: ' alice@EXAMPLE.COM ' }, '/email/code').expect(429);
        await code(app, bot(2), { email: 'ａｌｉｃｅ@example.com' }, '/email/code').expect(429);
        expect((await app.limiter.status('email-minute', 'alice@example.com')).count).to.equal(1);
      });

      it('stops every sender once 1000 codes went out in an hour', async function () {
        this.timeout(120_000);
        const app = await boot();
        for (let ip = 0; ip < 50; ip++) {
          await Promise.all(
            Array.from({ length: 20 }, (_, i) =>
              code(app, bot(ip), { phone: `+44780${String(ip * 20 + i).padStart(7, '0')}` }).expect(200),
            ),
          );
        }
        const refused = await code(app, bot(9999), { phone: '+447999999999' }).expect(429);
        expect(refused.headers.ratelimit).to.match(/"sms-global";r=0;/);
        await code(app, bot(9999), { email: 'new@example.com' }, '/email/code').expect(200);
      });
    });
  });
}
