// ratekeeper/console on a limiter whose store is PostgreSQL: locked keys listed, unlock and override through the store.
import { randomBytes } from 'node:crypto';
import type { Server } from 'node:http';
import { expect } from 'chai';
import express from 'express';
import type pg from 'pg';
import request from 'supertest';
import { createLimiter, type Limiter, PostgresStore } from '../../src/index.js';
import { operatorConsole } from '../../src/operators/console/index.js';
import { API, LOGIN } from '../fixtures/ops-rules.js';
import { getPostgres } from '../support/postgres.js';
import { PATIENT } from '../support/settle.js';

const HOSTILE = '<img src=x onerror=alert(1)>';

describe('operator console on a PostgresStore', function () {
  this.timeout(120_000);
  let pool: pg.Pool;
  let limiter: Limiter;
  let other: Limiter;
  let server: Server;
  before(async () => {
    pool = (await getPostgres()).pool({ max: 4 });
  });
  after(() => pool.end());
  beforeEach(async () => {
    const schema = `console_${randomBytes(4).toString('hex')}`;
    limiter = createLimiter({ store: new PostgresStore({ pool, schema }), rules: [LOGIN, API], ...PATIENT });
    // Another process's limiter on the same tables: what the console changes, it sees.
    other = createLimiter({ store: new PostgresStore({ pool, schema }), rules: [LOGIN, API], ...PATIENT });
    for (const key of ['alice', HOSTILE]) for (let i = 0; i < 3; i++) await limiter.consume('login', key);
    const app = express();
    app.use('/ops', operatorConsole(limiter, { authorize: (req) => req.headers['x-operator'] === 'yes' }));
    server = app.listen(0);
  });
  afterEach(async () => {
    server.close();
    await Promise.all([limiter.close(), other.close()]);
  });

  async function session() {
    const page = await request(server).get('/ops').set('x-operator', 'yes').expect(200);
    const token = /name="csrf" value="([^"]+)"/.exec(page.text)?.[1] as string;
    const cookie = (page.headers['set-cookie'] as unknown as string[])[0]?.split(';')[0] as string;
    return { token, cookie, page };
  }
  const post = (cookie: string, fields: Record<string, string>) =>
    request(server).post('/ops').set({ 'x-operator': 'yes', cookie }).type('form').send(fields);

  it('lists the keys the store holds locked, escaped, and unlocks one for every process', async () => {
    const { token, cookie, page } = await session();
    expect(page.text).to.include('<td class="key"><bdi>alice</bdi></td>');
    expect(page.text).to.include('<td class="key"><bdi>&lt;img src=x onerror=alert(1)&gt;</bdi></td>');
    expect(page.text).not.to.include(HOSTILE);
    await post(cookie, { action: 'unlock', rule: 'login', key: 'alice', csrf: token }).expect(303);
    expect((await other.status('login', 'alice')).locked).to.equal(false);
    expect((await other.status('login', HOSTILE)).locked, 'the other key stays locked').to.equal(true);
  });

  it("sets and clears a key's limit override in the store", async () => {
    const { token, cookie } = await session();
    const fields = { rule: 'api', key: 'bob', csrf: token };
    await post(cookie, { ...fields, action: 'override', limit: '5', for: '1h' }).expect(303);
    expect(await other.status('api', 'bob')).to.include({ limit: 5, overridden: true });
    const shown = await request(server)
      .get('/ops')
      .query({ rule: 'api', key: 'bob' })
      .set({ 'x-operator': 'yes', cookie });
    expect(shown.text).to.include('<dd>0 of 5 (override for this key)</dd>');
    await post(cookie, { ...fields, action: 'clear-override' }).expect(303);
    expect(await other.status('api', 'bob')).to.include({ limit: 100, overridden: false });
  });
});
