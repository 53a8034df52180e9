// Keys of values that are not text, through one framework on one store: a field sent as null is absent (one
// client's null never refuses another's), and an object or array where a rule reads a key is answered 400
// naming the field, before any handler runs, counting nothing.
import { expect } from 'chai';
import { createLimiter, type Limiter, type Rule, verificationCodeRules } from '../../../src/index.js';
import { type BypassFramework, held } from '../../fixtures/bypass-apps.js';
import { json, send, serve } from '../../fixtures/bypass-client.js';
import { PATIENT } from '../../support/settle.js';
import type { StoreFactory } from '../../support/stores.js';

const START = Date.parse('2026-03-02T00:00:00Z');

export function keyValuesSuite(framework: BypassFramework, stores: StoreFactory): void {
  describe(`${framework.name} on the ${stores.name} store: keys of values that are not text`, function () {
    this.timeout(60_000);
    const cleanup: Array<() => unknown> = [];
    afterEach(async () => {
      for (const step of cleanup.splice(0).reverse()) await step();
    });

    /** `framework.wired('login')` (POST /sms, GET /api/items, POST /login) limited by `rules`. */
    async function app(rules: Rule[]): Promise<{ limiter: Limiter; port: number }> {
      const store = await stores.makeStore(() => START);
      const limiter = createLimiter({ ...PATIENT, store, rules });
      const server = await serve(framework.wired('login', limiter));
      cleanup.push(() => limiter.close(), server.close);
      return { limiter, port: server.port };
    }

    it("a phone sent as null is absent: one client's {channel: 'email', phone: null} refuses no one else's", async () => {
      // One code endpoint, limited per phone number and per e-mail address.
      const { limiter, port } = await app([
        ...verificationCodeRules({ prefix: 'sms', match: 'POST /sms', destination: 'body.phone' }),
        ...verificationCodeRules({ prefix: 'mail', match: 'POST /sms', destination: 'body.email' }),
      ]);
      const statuses: Array<number | undefined> = [];
      for (const email of ['attacker@example.net', 'ann@example.com', 'bob@example.com'])
        statuses.push(
          (await send({ port }, 'POST', '/sms', json({ channel: 'email', email, phone: null })))?.status,
        );
      expect(statuses, 'the attacker, then two users whose clients also send phone: null').to.deep.equal([
        200, 200, 200,
      ]);
      const decided = await limiter.peek({
        method: 'POST',
        path: '/sms',
        ip: '127.0.0.1',
        headers: {},
        body: { channel: 'email', email: 'ann@example.com', phone: null },
      });
      expect(decided.rules.map((r) => r.rule)).to.deep.equal([
        'sms-ip',
        'sms-global',
        'mail-minute',
        'mail-day',
        'mail-ip',
        'mail-global',
      ]);
      // A rule keyed only on the null field does not apply: the per-phone rules count nothing.
      const onlyPhone = await app([
        {
          name: 'phone',
          match: 'POST /sms',
          key: 'body.phone',
          limit: 1,
          window: { type: 'fixed', size: '1m' },
        },
      ]);
      for (let i = 0; i < 3; i++) {
        const res = await send({ port: onlyPhone.port }, 'POST', '/sms', json({ phone: null }));
        expect(res?.status).to.equal(200);
      }
    });

    it('answers an array or an object in a body field with 400 naming the field; no handler runs, nothing is counted', async () => {
      const { limiter, port } = await app([
        {
          name: 'sms-phone',
          match: 'POST /sms',
          key: 'body.phone',
          limit: 1,
          window: { type: 'fixed', size: '1m' },
        },
        { name: 'sms-ip', match: 'POST /sms', key: 'ip', limit: 100, window: { type: 'fixed', size: '1m' } },
      ]);
      const handled = held.handled;
      for (const phone of [['+447800000001'], { $ne: '' }, [['+447800000001']], [], {}]) {
        const res = await send({ port }, 'POST', '/sms', json({ phone }));
        expect(res?.status, JSON.stringify(phone)).to.equal(400);
        expect(JSON.parse(res?.body ?? '{}')).to.deep.include({
          statusCode: 400,
          field: 'body.phone',
          message: 'body.phone must be a string, a number or a boolean',
        });
      }
      expect(held.handled - handled, 'handler runs').to.equal(0);
      expect((await limiter.status('sms-ip', '127.0.0.1')).count, 'nothing consumed').to.equal(0);
      expect((await send({ port }, 'POST', '/sms', json({ phone: '+447800000001' })))?.status).to.equal(200);
      expect((await send({ port }, 'POST', '/sms', json({ phone: '+447800000001' })))?.status).to.equal(429);
    });

    it('answers a repeated query parameter with 400 naming it, where the framework parses it as an array', async () => {
      const { limiter, port } = await app([
        {
          name: 'items',
          match: 'GET /api/items',
          key: 'query.q',
          limit: 1,
          window: { type: 'fixed', size: '1m' },
        },
      ]);
      const res = await send({ port }, 'GET', '/api/items?q=a&q=b');
      if (framework.name === 'Hono') {
        // Hono's c.req.query() gives the first value, to the rule and to the handler alike.
        expect(res?.status).to.equal(200);
        expect((await limiter.status('items', 'a')).count).to.equal(1);
      } else {
        expect([res?.status, JSON.parse(res?.body ?? '{}').field]).to.deep.equal([400, 'query.q']);
        expect((await limiter.status('items', 'a')).count).to.equal(0);
      }
    });
  });
}
