// The login recipe against password guessing: spraying, one account from many IPs, the owner's trusted device,
// the NIST cap.
import { expect } from 'chai';
import { deviceCookies } from '../../../../examples/device-cookie.js';
import type { LockoutEvent, UnlockEvent } from '../../../../src/index.js';
import {
  type AttackContext,
  bot,
  DAY,
  DEVICE_SECRET,
  HOUR,
  MINUTE,
  RIGHT,
  SECOND,
  START,
} from './context.js';

export function loginGuessing(ctx: AttackContext): void {
  const { time, boot, login, deviceOf } = ctx;
  describe('login: guessing', () => {
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
      time.now += DAY - SECOND;
      await login(app, { ip: sprayer, username: 'user101' }).expect(429).expect('retry-after', '1');
      time.now += SECOND;
      await login(app, { ip: sprayer, username: 'user101' }).expect(401);
    });

    it('counts a missing, empty or null username against the IP alone: the pair on the IP locks it after 5, no account rule counts', async () => {
      const app = await boot();
      const ip = '198.51.100.9';
      const usernames = [undefined, '', '   ', null];
      for (let i = 0; i < 5; i++)
        await login(app, { ip, username: usernames[i % usernames.length] }).expect(401);
      await login(app, { ip, username: null }).expect(429);
      expect((await app.loginLimiter.status('login-pair', `|${ip}`)).locked).to.equal(true);
      expect((await app.loginLimiter.status('login-ip', ip)).count).to.equal(5);
      for (const rule of ['login-account', 'login-account-cap'])
        expect(await app.loginLimiter.locked(rule), rule).to.deep.equal([]);
      // A real username from that IP is another pair.
      await login(app, { ip, username: 'alice', password: RIGHT }).expect(200);
    });

    it('refuses a username that is an array or an object with 400 before the password check: 0 of 30 from 30 IPs reach it', async () => {
      const app = await boot();
      // A handler that coerces the field (String(['alice']) is 'alice') would check alice's password.
      const shapes: unknown[] = [['alice'], [['alice']], { $ne: '' }, { toString: 'alice' }, ['Alice', 'x']];
      const statuses: number[] = [];
      for (let i = 0; i < 30; i++) {
        const res = await login(app, { ip: bot(i), username: shapes[i % shapes.length] });
        statuses.push(res.status);
        if (res.status === 400) expect(JSON.stringify(res.body)).to.include('body.username');
      }
      expect(new Set(statuses), 'every one refused before the handler').to.deep.equal(new Set([400]));
      for (const rule of ['login-pair', 'login-ip', 'login-account', 'login-account-cap'])
        expect(await app.loginLimiter.locked(rule), rule).to.deep.equal([]);
      expect((await app.loginLimiter.status('login-ip', bot(0))).count, 'nothing consumed').to.equal(0);
      await login(app, { ip: bot(99), username: 'alice', password: RIGHT }).expect(200);
    });

    it("an account named '#NON-SCALAR' and its device cookie: 150 guesses of {username: ['alice']} from 30 IPs reach no password check", async () => {
      const app = await boot({ trustedDeviceSkipsCap: true });
      // The attacker's own account, '#NON-SCALAR', logged in once: its device cookie, as the app would issue it.
      const issued = deviceCookies({ secret: DEVICE_SECRET, clock: () => time.now }).issue('#non-scalar');
      const cookie = issued.split(';')[0] as string;
      let reached = 0;
      for (let i = 0; i < 150; i++) {
        const res = await login(app, { ip: bot(i % 30), username: ['alice'], cookie });
        if (res.status !== 400) reached++;
      }
      expect(reached, 'requests that got past the limiter').to.equal(0);
      // The account itself keys apart from every sentinel ('##non-scalar'), and the device check is asked
      // about its real name: the cookie vouches for it, and for no one else.
      await login(app, { ip: bot(200), username: '#NON-SCALAR' }).expect(401);
      await login(app, { ip: bot(201), username: '#NON-SCALAR', cookie }).expect(401);
      await app.settle();
      expect((await app.loginLimiter.status('login-account-cap', '##non-scalar')).count).to.equal(1);
      for (let i = 0; i < 10; i++)
        await login(app, { ip: bot(300 + i), username: 'alice', cookie }).expect(401);
      await login(app, { ip: bot(400), username: 'alice', password: RIGHT, cookie }).expect(429);
    });

    it('one username guessed from many IPs is slowed to one failure per 6 minutes after 10, never locked', async () => {
      const app = await boot();
      for (let i = 0; i < 10; i++) await login(app, { ip: bot(i), username: 'alice' }).expect(401);
      const slowed = await login(app, { ip: bot(10), username: 'alice' }).expect(429);
      expect(slowed.headers['retry-after']).to.equal('360');
      expect(slowed.body).to.deep.equal(
        ctx.framework.denialBody?.(360) ?? { error: 'Too Many Requests', retryAfter: 360 },
      );
      for (let i = 11; i < 40; i++) {
        const res = await login(app, { ip: bot(i), username: 'alice' }).expect(429);
        expect(Number(res.headers['retry-after'])).to.be.at.most(360);
      }
      time.now += 360 * SECOND;
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
        await login(app, { ip: '203.0.113.7', username: 'alice', password: RIGHT, cookie: bad }).expect(429);
      // Bob's own cookie does not vouch for alice's account.
      await login(app, { ip: '203.0.113.7', username: 'alice', password: RIGHT, cookie: 'x=1' }).expect(429);
    });

    it('stops trusting a device cookie 30 days after it was issued', async () => {
      const app = await boot();
      const cookie = await deviceOf(app);
      time.now += 30 * DAY;
      for (let i = 0; i < 10; i++) await login(app, { ip: bot(i), username: 'alice' }).expect(401);
      await login(app, { ip: '203.0.113.7', username: 'alice', password: RIGHT, cookie }).expect(429);
    });

    it('keeps a victim on a new device waiting at most 6 minutes per attempt, through 3 hours of attack', async () => {
      const app = await boot();
      const victim = '192.0.2.200';
      let attempts = 0;
      let longest = 0;
      for (let minute = 1; minute <= 180; minute++) {
        time.now = Math.max(time.now, START + minute * MINUTE);
        await login(app, { ip: bot(minute), username: 'alice' }); // a guess every minute
        if (minute % 30 !== 0) continue;
        let res = await login(app, { ip: victim, username: 'alice', password: RIGHT });
        attempts++;
        if (res.status === 429) {
          const wait = Number(res.headers['retry-after']);
          longest = Math.max(longest, wait);
          time.now += wait * SECOND;
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
            time.now += Number(res.headers['retry-after']) * SECOND;
          }
        }
      }
      // A success in between clears the count: only consecutive failures reach the cap.
      await guess(60);
      expect((await app.loginLimiter.status('login-account-cap', 'alice')).count).to.equal(60);
      await login(app, { ip: '203.0.113.7', username: 'alice', password: RIGHT, cookie }).expect(200);
      await app.settle();
      expect((await app.loginLimiter.status('login-account-cap', 'alice')).count).to.equal(0);

      const started = time.now;
      await guess(100);
      expect(time.now - started).to.be.at.least(9 * HOUR);
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
          lockedUntil: time.now + 30 * DAY,
          level: 1,
        },
      ]);
      const [listed, ...others] = await app.loginLimiter.locked('login-account-cap');
      expect(others).to.deep.equal([]);
      expect(listed).to.deep.equal({
        rule: 'login-account-cap',
        key: 'alice',
        remainingMs: 30 * DAY,
        lockedUntil: time.now + 30 * DAY,
        level: 1,
      });
      expect(await app.loginLimiter.status('login-account-cap', 'alice')).to.include({
        locked: true,
        lockRemainingMs: 30 * DAY,
        level: 1,
      });

      time.now += 2 * HOUR; // still locked: only a reset reopens it
      await login(app, { ip: '203.0.113.7', username: 'alice', password: RIGHT, cookie }).expect(429);
      await app.loginLimiter.reset('login-account-cap', 'alice');
      expect(unlocks).to.deep.equal([{ rule: 'login-account-cap', key: 'alice' }]);
      expect(await app.loginLimiter.locked('login-account-cap')).to.deep.equal([]);
      await login(app, { ip: '203.0.113.7', username: 'alice', password: RIGHT, cookie }).expect(200);
      expect(JSON.stringify([lockouts, unlocks])).not.to.match(/hunter2|correct-horse|password/);
    });

    it('with trustedDeviceSkipsCap: 25 IPs and 100 failures in 9 hours cap the account, and the owner still logs in on her device', async () => {
      const app = await boot({ trustedDeviceSkipsCap: true });
      const cookie = await deviceOf(app);
      const started = time.now;
      let failures = 0;
      for (let n = 0; failures < 100; n++) {
        const res = await login(app, { ip: bot(n % 25), username: 'alice' });
        if (res.status === 401) failures++;
        else {
          expect(res.status).to.equal(429);
          time.now += Number(res.headers['retry-after']) * SECOND;
        }
      }
      expect(time.now - started).to.be.at.least(9 * HOUR);
      const capped = await login(app, { ip: bot(7), username: 'alice', password: RIGHT }).expect(429);
      expect(capped.headers['retry-after'], 'a new device, right password').to.equal(
        String((30 * DAY) / SECOND),
      );
      expect((await app.loginLimiter.status('login-account-cap', 'alice')).locked).to.equal(true);
      // Her trusted browser: a typo counts on her own pair only, and the right password lets her in.
      await login(app, { ip: '203.0.113.7', username: 'alice', cookie }).expect(401);
      await login(app, { ip: '203.0.113.7', username: 'alice', password: RIGHT, cookie }).expect(200);
      expect(
        (await app.loginLimiter.status('login-account-cap', 'alice')).locked,
        'still capped elsewhere',
      ).to.equal(true);
      // A tampered device cookie is no pass.
      await login(app, {
        ip: '203.0.113.8',
        username: 'alice',
        password: RIGHT,
        cookie: `${cookie}x`,
      }).expect(429);
    });

    it('counts a login sent as text/plain, with no content type or as application/x-json: 5 of 40 guesses reach the password check', async () => {
      const app = await boot();
      const ip = '198.51.100.20';
      const types = ['text/plain', null, 'application/x-json'];
      const statuses: number[] = [];
      for (let i = 0; i < 40; i++)
        statuses.push(
          (await ctx.typed(app, '/login', ip, types[i % 3] ?? null, { username: 'alice', password: 'x' }))
            .status,
        );
      // 401: the handler checked a password; 415: the framework refused the type before any handler.
      expect(statuses.filter((s) => s === 401).length, 'reached the password check').to.be.at.most(5);
      expect(
        statuses.filter((s) => s !== 401 && s !== 429 && s !== 415),
        'other answers',
      ).to.deep.equal([]);
      const right = await ctx.typed(app, '/login', ip, 'text/plain', { username: 'alice', password: RIGHT });
      expect(right.status, 'the right password as the 41st guess').to.be.oneOf([415, 429]);
    });
  });
}
