// The verification-code recipe against SMS pumping, flooding one number, and charging failed sends.
import { expect } from 'chai';
import { type AttackContext, bot, MINUTE, SECOND } from './context.js';

export function codeAttacks(ctx: AttackContext): void {
  const { time, boot, code } = ctx;
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
      time.now += wait * SECOND;
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
        time.now += MINUTE;
        await code(app, bot(10 + i), { phone }).expect(200);
      }
      time.now += MINUTE;
      const day = await code(app, bot(30), { phone }).expect(429);
      // 08:10 in Shanghai: 15 h 50 min to midnight.
      expect(day.headers['retry-after']).to.equal(String(16 * 3600 - 10 * 60));
      expect(day.headers.ratelimit).to.match(/"sms-day";r=0;t=57000/);
      time.now = Date.parse('2026-03-02T16:00:00Z'); // midnight in Shanghai
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

    it('one number from 60 IPs in a minute, sent as text/plain or with no content type: at most one code', async () => {
      const sent: string[] = [];
      const app = await boot({ sendCode: (to) => void sent.push(to) });
      const statuses: number[] = [];
      for (let i = 0; i < 60; i++) {
        const res = await ctx.typed(app, '/sms/code', bot(i), i % 2 === 0 ? 'text/plain' : null, {
          phone: '+447700900123',
        });
        statuses.push(res.status);
      }
      expect(sent.length, 'codes sent').to.be.at.most(1);
      expect(statuses.filter((s) => s === 200).length).to.equal(sent.length);
    });
  });
}
