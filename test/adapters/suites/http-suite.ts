// The HTTP suite: one set of supertest cases, run for every framework (test/adapters/<framework>.test.ts) on each store.
import { once } from 'node:events';
import http, { type RequestListener } from 'node:http';
import type { AddressInfo } from 'node:net';
import { expect } from 'chai';
import request from 'supertest';
import { SPOOFABLE_IP_WARNING } from '../../../adapters/common.js';
import type { ExampleAppOptions } from '../../../examples/rules.js';
import { createLimiter, type Decision, type Limiter, type Rule, type Store } from '../../../src/index.js';
import { PATIENT } from '../../support/settle.js';

/** A store to run the suite on: `makeStore` gives a fresh, empty store on the given clock. */
export interface StoreFactory {
  name: string;
  makeStore(clock: () => number): Store | Promise<Store>;
}

/** Adapter options the suite uses, in a framework-neutral form the harness translates. */
export interface SuiteOptions {
  headers?: 'legacy' | 'draft-6' | 'draft-7' | 'standard' | 'both' | false;
  reset?: 'epoch-seconds' | 'delta-seconds';
  statusCode?: number;
  message?: unknown;
  isFailure?: (status: number) => boolean;
  clock?: () => number;
  onLimited?: (decision: Decision) => void;
  /** Skip requests whose headers satisfy this. */
  skip?: (headers: http.IncomingHttpHeaders) => boolean;
  /** Answer denials with 418 `{ custom: true }` from a custom handler. */
  customHandler?: boolean;
}

export interface AppSpec {
  limiter: Limiter | Rule[];
  options?: SuiteOptions;
  /** `'app'`: the middleware before every route; `'route'`: only on `POST /users/:id/like`. @default 'app' */
  mount?: 'app' | 'route';
  /** `'none'`: the socket address; `'one-hop'`: one proxy (Express `trust proxy` 1, Koa `maxIpsCount` 1); `'all'`: spoofable. */
  trust?: 'none' | 'one-hop' | 'all';
}

/**
 * A framework under test. Every app has the same routes, each counting its calls in `hits`:
 * `POST /login` (200 for password 'right', else 401), `POST /users/:id/like`, `GET /echo` (returns the
 * decision), `GET /status/:code` (answers that status), `GET /throw/:code` (throws an error with that status).
 * Errors end as JSON `{ error, code }` with `err.status ?? 500`.
 */
export interface Harness {
  name: string;
  build(spec: AppSpec): { listener: RequestListener; hits: () => number };
  /** The example app as a request listener. */
  example(options: ExampleAppOptions): { listener: RequestListener; limiter: Limiter };
  /** The framework's default denial body, when it is not `{ error, retryAfter }` (Nest's `{ statusCode, message }`). */
  denialBody?: (retryAfterSeconds: number, statusCode?: number, message?: string) => unknown;
}

/** Whether the limiter tells adapters its rules' windows (then a limiter instance gets `w` too). */
const exposesWindows = (limiter: Limiter | undefined): boolean =>
  limiter !== undefined && 'ruleWindows' in limiter;

const START = Date.parse('2026-03-02T00:00:00Z'); // 08:00 in Asia/Shanghai
const fixed = (size: string) => ({ type: 'fixed', size }) as const;

export function httpSuite(harness: Harness, stores: StoreFactory): void {
  describe(`${harness.name} adapter on the ${stores.name} store`, () => {
    let now = START;
    const clock = () => now;
    const limiters: Limiter[] = [];

    beforeEach(() => {
      now = START;
    });
    afterEach(async () => {
      await Promise.all(limiters.splice(0).map((l) => l.close()));
    });

    async function limiterFor(rules: Rule[]): Promise<Limiter> {
      const limiter = createLimiter({ ...PATIENT, store: await stores.makeStore(clock), rules });
      limiters.push(limiter);
      return limiter;
    }
    async function app(rules: Rule[], spec: Omit<AppSpec, 'limiter'> = {}) {
      return harness.build({ ...spec, limiter: await limiterFor(rules) });
    }

    describe('headers', () => {
      const rules: Rule[] = [{ name: 'echo', match: 'GET /echo', key: 'ip', limit: 3, window: fixed('1m') }];

      it('sends X-RateLimit-Limit, -Remaining and -Reset in epoch seconds on an admitted request', async () => {
        const { listener } = await app(rules, { options: { clock } });
        const res = await request(listener).get('/echo?x=1').expect(200);
        expect(res.headers['x-ratelimit-limit']).to.equal('3');
        expect(res.headers['x-ratelimit-remaining']).to.equal('2');
        expect(res.headers['x-ratelimit-reset']).to.equal(String(Math.ceil((START + 60_000) / 1000)));
        expect(res.headers['retry-after']).to.equal(undefined);
        expect(res.headers.ratelimit).to.equal(undefined);
      });

      it("sends X-RateLimit-Reset in seconds from now with reset: 'delta-seconds'", async () => {
        const { listener } = await app(rules, { options: { reset: 'delta-seconds' } });
        await request(listener).get('/echo').expect(200);
        now += 15_500;
        const res = await request(listener).get('/echo').expect(200);
        expect(res.headers['x-ratelimit-remaining']).to.equal('1');
        expect(res.headers['x-ratelimit-reset']).to.equal('45');
      });

      it('sends no rate-limit headers when no rule matches the request', async () => {
        const { listener } = await app(rules);
        const res = await request(listener).get('/status/200').expect(200);
        expect(Object.keys(res.headers).filter((h) => /ratelimit|retry-after/i.test(h))).to.deep.equal([]);
      });

      it('sends only Retry-After, on the 429, with headers: false', async () => {
        const { listener } = await app(rules, { options: { headers: false } });
        for (let i = 0; i < 3; i++) {
          const ok = await request(listener).get('/echo').expect(200);
          expect(ok.headers['x-ratelimit-limit']).to.equal(undefined);
        }
        const res = await request(listener).get('/echo').expect(429);
        expect(res.headers['x-ratelimit-limit']).to.equal(undefined);
        expect(res.headers['retry-after']).to.equal('60');
      });

      it('sends the IETF RateLimit-Policy and RateLimit fields, one member per matched rule, exactly', async () => {
        const day: Rule[] = [
          { name: 'burst', match: 'GET /echo', key: 'ip', limit: 5, window: fixed('1m') },
          {
            name: 'daily',
            match: 'GET /echo',
            key: 'ip',
            limit: 100,
            window: { type: 'calendar', unit: 'day', timezone: 'Asia/Shanghai' },
          },
        ];
        const { listener } = await harness.build({ limiter: day, options: { headers: 'standard' } });
        const res = await request(listener).get('/echo').expect(200);
        expect(res.headers['ratelimit-policy']).to.equal('"burst";q=5;w=60, "daily";q=100;w=86400');
        expect(res.headers.ratelimit).to.match(/^"burst";r=4;t=60, "daily";r=99;t=\d+$/);
        expect(res.headers['x-ratelimit-limit']).to.equal(undefined);
      });

      it('gives t up to midnight in the rule time zone, and w only when known (a limiter instance omits it)', async () => {
        const day: Rule[] = [
          {
            name: 'daily',
            key: 'ip',
            limit: 2,
            window: { type: 'calendar', unit: 'day', timezone: 'Asia/Shanghai' },
          },
        ];
        const { listener } = await app(day, { options: { headers: 'both', clock } });
        const res = await request(listener).get('/echo').expect(200);
        expect(res.headers['ratelimit-policy']).to.equal(
          exposesWindows(limiters[0]) ? '"daily";q=2;w=86400' : '"daily";q=2',
        );
        expect(res.headers.ratelimit).to.equal('"daily";r=1;t=57600'); // 16 h to midnight in Shanghai
        expect(res.headers['x-ratelimit-reset']).to.equal(String(START / 1000 + 57_600));
      });
    });

    describe('draft-6 and draft-7 header fields', () => {
      const rules: Rule[] = [
        { name: 'burst', match: 'GET /echo', key: 'ip', limit: 5, window: fixed('1m') },
        {
          name: 'daily',
          match: 'GET /echo',
          key: 'ip',
          limit: 100,
          window: { type: 'calendar', unit: 'day', timezone: 'Asia/Shanghai' },
        },
      ];
      const policy = (limiter: Limiter | undefined) =>
        exposesWindows(limiter) ? '5;w=60, 100;w=86400' : '5, 100';

      it("headers: 'draft-6' sends RateLimit-Limit, -Remaining, -Reset of the rule with the least remaining", async () => {
        const { listener } = await app(rules, { options: { headers: 'draft-6' } });
        const res = await request(listener).get('/echo').expect(200);
        expect(res.headers['ratelimit-limit']).to.equal('5');
        expect(res.headers['ratelimit-remaining']).to.equal('4');
        expect(res.headers['ratelimit-reset']).to.equal('60');
        expect(res.headers['ratelimit-policy']).to.equal(policy(limiters[0]));
        expect(res.headers.ratelimit).to.equal(undefined);
        expect(res.headers['x-ratelimit-limit']).to.equal(undefined);
      });

      it("headers: 'draft-7' sends one RateLimit field, and the denying rule's figures on a 429", async () => {
        const { listener } = await app(rules, { options: { headers: 'draft-7' } });
        const first = await request(listener).get('/echo').expect(200);
        expect(first.headers.ratelimit).to.equal('limit=5, remaining=4, reset=60');
        expect(first.headers['ratelimit-policy']).to.equal(policy(limiters[0]));
        expect(first.headers['ratelimit-limit']).to.equal(undefined);
        for (let i = 0; i < 4; i++) await request(listener).get('/echo').expect(200);
        now += 15_000;
        const denied = await request(listener).get('/echo').expect(429);
        expect(denied.headers.ratelimit).to.equal('limit=5, remaining=0, reset=45');
        expect(denied.headers['retry-after']).to.equal('45');
      });
    });

    describe('denials', () => {
      const rules: Rule[] = [{ name: 'echo', match: 'GET /echo', key: 'ip', limit: 3, window: fixed('1m') }];

      it('answers the 4th request with 429, Retry-After and a JSON body, and never runs the handler', async () => {
        const { listener, hits } = await app(rules);
        for (let i = 0; i < 3; i++) await request(listener).get('/echo').expect(200);
        now += 20_000;
        const res = await request(listener).get('/echo').expect(429).expect('content-type', /json/);
        expect(res.body).to.deep.equal(
          harness.denialBody?.(40) ?? { error: 'Too Many Requests', retryAfter: 40 },
        );
        expect(res.headers['retry-after']).to.equal('40');
        expect(res.headers['x-ratelimit-remaining']).to.equal('0');
        expect(hits()).to.equal(3);
      });

      it('takes statusCode and a text message', async () => {
        const { listener } = await app(rules, { options: { statusCode: 503, message: 'slow down' } });
        for (let i = 0; i < 3; i++) await request(listener).get('/echo').expect(200);
        const res = await request(listener).get('/echo').expect(503);
        if (harness.denialBody !== undefined) {
          // Nest's convention: the message inside `{ statusCode, message }`.
          expect(res.body).to.deep.equal(harness.denialBody(60, 503, 'slow down'));
        } else {
          expect(res.headers['content-type']).to.match(/text\/plain/);
          expect(res.text).to.equal('slow down');
        }
        expect(res.headers['retry-after']).to.equal('60');
      });

      it('lets a custom handler answer the denial, with the headers already set', async () => {
        const { listener, hits } = await app(rules, { options: { customHandler: true } });
        for (let i = 0; i < 3; i++) await request(listener).get('/echo').expect(200);
        const res = await request(listener).get('/echo').expect(418);
        expect(res.body).to.deep.equal({ custom: true, rule: 'echo' });
        expect(res.headers['retry-after']).to.equal('60');
        expect(hits()).to.equal(3);
      });

      it('bypasses the limiter for requests skip() selects', async () => {
        const { listener } = await app(rules, { options: { skip: (h) => h['x-internal'] === '1' } });
        for (let i = 0; i < 5; i++) {
          const res = await request(listener).get('/echo').set('x-internal', '1').expect(200);
          expect(res.headers['x-ratelimit-limit']).to.equal(undefined);
        }
        await request(listener).get('/echo').expect(200).expect('x-ratelimit-remaining', '2');
      });

      it('exposes the decision to the handler', async () => {
        const { listener } = await app(rules);
        const res = await request(listener).get('/echo').expect(200);
        expect(res.body.rateLimit).to.include({ allowed: true, limit: 3, remaining: 2, rule: 'echo' });
      });
    });

    describe('route matching', () => {
      const like: Rule[] = [
        { name: 'like', match: 'POST /users/:id/like', key: 'param.id', limit: 1, window: fixed('1s') },
      ];

      it("keys a rule by a path-to-regexp param ('POST /users/:id/like', key 'param.id')", async () => {
        const { listener, hits } = await app(like);
        await request(listener).post('/users/1/like').expect(200).expect('x-ratelimit-remaining', '0');
        await request(listener).post('/users/1/like').expect(429).expect('retry-after', '1');
        await request(listener).post('/users/2/like').expect(200);
        now += 1000;
        await request(listener).post('/users/1/like').expect(200);
        expect(hits()).to.equal(3);
      });

      it("keys a rule by the user an earlier middleware authenticated (key 'user'), and skips it without one", async () => {
        const { listener, hits } = await app([
          { name: 'per-user', match: 'GET /echo', key: 'user', limit: 1, window: fixed('1m') },
        ]);
        await request(listener).get('/echo').set('x-user', 'ann').expect(200);
        await request(listener).get('/echo').set('x-user', 'ann').expect(429);
        const bob = await request(listener).get('/echo').set('x-user', 'bob').expect(200);
        expect(bob.body.rateLimit.rules[0]).to.include({ key: 'bob', remaining: 0 });
        // No user: the rule finds no key, so it neither counts nor denies.
        await request(listener).get('/echo').expect(200);
        await request(listener).get('/echo').expect(200);
        expect(hits()).to.equal(4);
      });

      it('reads the framework params when mounted on the route itself', async () => {
        const { listener } = await app([{ name: 'like', key: 'param.id', limit: 1, window: fixed('1s') }], {
          mount: 'route',
        });
        await request(listener).post('/users/7/like').expect(200);
        await request(listener).post('/users/7/like').expect(429);
        await request(listener).post('/users/8/like').expect(200);
        await request(listener)
          .get('/echo')
          .expect(200)
          .expect((res) => expect(res.headers['x-ratelimit-limit']).to.equal(undefined));
      });

      it('matches the path without its query string, and an absolute-form request target by its path', async () => {
        const { listener } = await app(like);
        await request(listener).post('/users/1/like?via=feed').expect(200);
        const server = http.createServer(listener).listen(0, '127.0.0.1');
        await once(server, 'listening');
        try {
          const { port } = server.address() as AddressInfo;
          const status = await new Promise<number | undefined>((resolve, reject) => {
            http
              .request(
                { host: '127.0.0.1', port, method: 'POST', path: `http://127.0.0.1:${port}/users/1/like` },
                (res) => {
                  res.resume();
                  resolve(res.statusCode);
                },
              )
              .on('error', reject)
              .end();
          });
          expect(status).to.equal(429);
        } finally {
          server.close();
        }
      });

      it('reports the tighter of several rules on one route, and denies by the first one exceeded', async () => {
        const rules: Rule[] = [
          { name: 'wide', match: 'GET /echo', key: 'ip', limit: 10, window: fixed('1m') },
          { name: 'tight', match: 'GET /echo', key: 'ip', limit: 2, window: fixed('10s') },
        ];
        const { listener } = await app(rules, { options: { headers: 'both' } });
        const res = await request(listener).get('/echo').expect(200);
        expect(res.headers['x-ratelimit-limit']).to.equal('2');
        expect(res.headers['x-ratelimit-remaining']).to.equal('1');
        expect(res.headers.ratelimit).to.equal('"wide";r=9;t=60, "tight";r=1;t=10');
        await request(listener).get('/echo').expect(200);
        const denied = await request(listener).get('/echo').expect(429);
        expect(denied.body).to.deep.equal(
          harness.denialBody?.(10) ?? { error: 'Too Many Requests', retryAfter: 10 },
        );
        expect(denied.headers.ratelimit).to.equal('"wide";r=8;t=60, "tight";r=0;t=10');
      });
    });

    describe('outcomes', () => {
      const login: Rule[] = [
        {
          name: 'login',
          match: 'POST /login',
          key: ['body.username', 'ip'],
          limit: 3,
          window: fixed('5m'),
          countOn: 'failure',
          resetOnSuccess: true,
          lockout: { duration: '15m' },
        },
      ];
      const wrong = { username: 'alice', password: 'wrong' };
      const right = { username: 'alice', password: 'right' };

      it('locks after 3 failed logins, denies even the right password, and unlocks after 15 minutes', async () => {
        const { listener, hits } = await app(login);
        for (let i = 0; i < 3; i++) await request(listener).post('/login').send(wrong).expect(401);
        const locked = await request(listener).post('/login').send(right).expect(429);
        expect(locked.headers['retry-after']).to.equal('900');
        expect(hits()).to.equal(3);
        now += 15 * 60_000 - 1000;
        await request(listener).post('/login').send(right).expect(429).expect('retry-after', '1');
        now += 1000;
        await request(listener).post('/login').send(right).expect(200);
      });

      it('clears the failure count on a successful login (resetOnSuccess)', async () => {
        const { listener } = await app(login);
        for (let i = 0; i < 2; i++) await request(listener).post('/login').send(wrong).expect(401);
        await request(listener).post('/login').send(right).expect(200);
        for (let i = 0; i < 3; i++) await request(listener).post('/login').send(wrong).expect(401);
        await request(listener).post('/login').send(wrong).expect(429);
      });

      it('does not count successes under countOn: failure', async () => {
        const { listener } = await app(login);
        for (let i = 0; i < 6; i++) await request(listener).post('/login').send(right).expect(200);
      });

      it('never reports a denied request', async () => {
        const limiter = await limiterFor(login);
        const reported: string[] = [];
        const report = limiter.report.bind(limiter);
        limiter.report = (decision, outcome) => {
          reported.push(outcome);
          return report(decision, outcome);
        };
        const { listener } = harness.build({ limiter });
        for (let i = 0; i < 3; i++) await request(listener).post('/login').send(wrong).expect(401);
        for (let i = 0; i < 3; i++) await request(listener).post('/login').send(right).expect(429);
        expect(reported).to.deep.equal(['failure', 'failure', 'failure']);
      });

      const throwing: Rule[] = [
        {
          name: 'errors',
          match: '/throw/:code',
          key: 'ip',
          limit: 2,
          window: fixed('1m'),
          countOn: 'failure',
        },
      ];

      it('judges a thrown error by the status it ends in', async () => {
        const { listener } = await app(throwing);
        await request(listener).get('/throw/401').expect(401);
        await request(listener).get('/throw/500').expect(500);
        await request(listener).get('/throw/401').expect(429);
      });

      it('takes isFailure to decide which statuses count as failures', async () => {
        const { listener } = await app(throwing, { options: { isFailure: (status) => status === 401 } });
        for (let i = 0; i < 4; i++) await request(listener).get('/throw/500').expect(500);
        await request(listener).get('/throw/401').expect(401);
        await request(listener).get('/throw/401').expect(401);
        await request(listener).get('/throw/401').expect(429);
      });

      it('does not charge countOn: success for a 5xx (a code that failed to send)', async () => {
        const rules: Rule[] = [
          {
            name: 'send',
            match: '/status/:code',
            key: 'ip',
            limit: 1,
            window: fixed('1m'),
            countOn: 'success',
          },
        ];
        const { listener } = await app(rules);
        await request(listener).get('/status/503').expect(503);
        await request(listener).get('/status/503').expect(503);
        await request(listener).get('/status/200').expect(200);
        await request(listener).get('/status/200').expect(429);
      });
    });

    describe('dry run', () => {
      it('never denies, still sends headers, and calls onLimited for what it would have denied', async () => {
        const seen: Decision[] = [];
        const rules: Rule[] = [
          { name: 'trial', match: 'GET /echo', key: 'ip', limit: 1, window: fixed('1m'), mode: 'dry-run' },
        ];
        const { listener, hits } = await app(rules, { options: { onLimited: (d) => seen.push(d) } });
        for (let i = 0; i < 3; i++) {
          const res = await request(listener).get('/echo').expect(200);
          expect(res.headers['x-ratelimit-remaining']).to.equal('0');
          expect(res.headers['retry-after']).to.equal(undefined);
        }
        expect(hits()).to.equal(3);
        expect(seen.map((d) => [d.allowed, d.dryRun])).to.deep.equal([
          [true, true],
          [true, true],
        ]);
      });

      it('calls onLimited for enforced denials', async () => {
        const seen: Decision[] = [];
        const rules: Rule[] = [
          { name: 'echo', match: 'GET /echo', key: 'ip', limit: 1, window: fixed('1m') },
        ];
        const { listener } = await app(rules, { options: { onLimited: (d) => seen.push(d) } });
        await request(listener).get('/echo').expect(200);
        await request(listener).get('/echo').expect(429);
        expect(seen.map((d) => [d.allowed, d.rule, d.retryAfterMs])).to.deep.equal([[false, 'echo', 60_000]]);
      });
    });

    describe('client address', () => {
      const one: Rule[] = [{ name: 'echo', match: 'GET /echo', key: 'ip', limit: 1, window: fixed('1m') }];
      const keyOf = (res: request.Response): string => res.body.rateLimit.rules[0].key;

      it('ignores a spoofed X-Forwarded-For unless the app trusts a proxy', async () => {
        const { listener, hits } = await app(one);
        const first = await request(listener).get('/echo').set('x-forwarded-for', '1.2.3.4').expect(200);
        expect(keyOf(first)).to.equal('127.0.0.1');
        await request(listener).get('/echo').set('x-forwarded-for', '5.6.7.8').expect(429);
        expect(hits()).to.equal(1);
      });

      it('believes only the entry the trusted proxy appended (one hop)', async () => {
        const { listener } = await app(one, { trust: 'one-hop' });
        const res = await request(listener).get('/echo').set('x-forwarded-for', 'evil, 5.6.7.8').expect(200);
        expect(keyOf(res)).to.equal('5.6.7.8');
        await request(listener).get('/echo').set('x-forwarded-for', 'other, 5.6.7.8').expect(429);
        await request(listener).get('/echo').set('x-forwarded-for', '5.6.7.8, 9.9.9.9').expect(200);
      });

      it('warns once when the framework believes the left-most, client-chosen X-Forwarded-For entry, saying what to set', async () => {
        const codes: string[] = [];
        const messages: string[] = [];
        const onWarning = (warning: Error & { code?: string }) => {
          if (warning.code !== undefined) codes.push(warning.code);
          if (warning.code === SPOOFABLE_IP_WARNING) messages.push(warning.message);
        };
        process.on('warning', onWarning);
        try {
          const { listener } = await app(one, { trust: 'all' });
          await request(listener).get('/echo').set('x-forwarded-for', '1.1.1.1').expect(200);
          await request(listener).get('/echo').set('x-forwarded-for', '2.2.2.2').expect(200);
          await new Promise((resolve) => setImmediate(resolve));
        } finally {
          process.off('warning', onWarning);
        }
        expect(codes.filter((c) => c === SPOOFABLE_IP_WARNING)).to.have.length(1);
        // The framework's own setting to change, and to what (Koa: app.maxIpsCount = n).
        expect(messages[0]).to.match(
          /^ratekeeper: .+ \((set|call|create it with|give) .+\); any client can choose its rate-limit key/,
        );
      });

      it('keys IPv6 clients by their /56: addresses in one /56 share a count', async () => {
        const { listener } = await app(one, { trust: 'one-hop' });
        const res = await request(listener)
          .get('/echo')
          .set('x-forwarded-for', '2001:db8:1:2::1')
          .expect(200);
        expect(keyOf(res)).to.equal('2001:db8:1::/56');
        await request(listener)
          .get('/echo')
          .set('x-forwarded-for', '2001:db8:1:ff:ffff:eeee:dddd:9')
          .expect(429);
        await request(listener).get('/echo').set('x-forwarded-for', '2001:db8:1:100::1').expect(200);
        await request(listener).get('/echo').set('x-forwarded-for', '::ffff:5.6.7.8').expect(200);
        await request(listener).get('/echo').set('x-forwarded-for', '5.6.7.8').expect(429);
      });
    });

    describe('limiter errors', () => {
      it('sends a key function that throws to the error handler, consuming nothing', async () => {
        const rules: Rule[] = [
          { name: 'first', match: 'GET /echo', key: 'ip', limit: 1, window: fixed('1m') },
          {
            name: 'boom',
            match: 'GET /echo',
            key: (req) => {
              if (req.headers['x-boom'] !== undefined) throw new Error('no tenant');
              return 'tenant';
            },
            limit: 5,
            window: fixed('1m'),
          },
        ];
        const { listener, hits } = await app(rules);
        const res = await request(listener).get('/echo').set('x-boom', '1').expect(500);
        expect(res.body).to.deep.equal({
          error: 'rule "boom": key function threw: no tenant',
          code: 'ERR_KEY_FUNCTION',
        });
        expect(hits()).to.equal(0);
        const ok = await request(listener).get('/echo').expect(200);
        expect(ok.headers.ratelimit).to.equal(undefined);
        expect(ok.body.rateLimit.rules.map((r: { remaining: number }) => r.remaining)).to.deep.equal([0, 4]);
      });
    });
  });
}

/** Boots an example app and drives its three protected routes. */
export function exampleSuite(harness: Harness, stores: StoreFactory): void {
  describe(`${harness.name} example app on the ${stores.name} store`, () => {
    let now = START;
    const clock = () => now;
    let limiter: Limiter | undefined;
    afterEach(async () => {
      await limiter?.close();
      limiter = undefined;
      now = START;
    });
    async function boot(options: ExampleAppOptions = {}): Promise<RequestListener> {
      const built = harness.example({
        store: await stores.makeStore(clock),
        clock,
        trustProxy: 1,
        scryptCost: 1024, // fast fake password hashes
        limiterOptions: PATIENT,
        ...options,
      });
      limiter = built.limiter;
      return built.listener;
    }
    const wrong = { username: 'alice', password: 'hunter2' };
    const right = { username: 'alice', password: 'correct-horse' };
    const from = (ip: string) => ({ 'x-forwarded-for': ip });

    it('locks alice from one IP after 5 wrong passwords, not from her own IP, and unlocks after a minute', async () => {
      const app = await boot();
      for (let i = 0; i < 5; i++)
        await request(app).post('/login').set(from('198.51.100.1')).send(wrong).expect(401);
      const locked = await request(app).post('/login').set(from('198.51.100.1')).send(right).expect(429);
      expect(locked.headers['retry-after']).to.equal('60');
      await request(app).post('/login').set(from('203.0.113.7')).send(right).expect(200);
      now += 60_000;
      await request(app).post('/login').set(from('198.51.100.1')).send(right).expect(200);
    });

    it('doubles the lock on the next lockout', async () => {
      const app = await boot();
      for (let round = 1; round <= 2; round++) {
        for (let i = 0; i < 5; i++)
          await request(app).post('/login').set(from('198.51.100.1')).send(wrong).expect(401);
        const res = await request(app).post('/login').set(from('198.51.100.1')).send(wrong).expect(429);
        expect(res.headers['retry-after']).to.equal(String(60 * round));
        // Well past the lock, and long enough for the account-wide slowdown (10 failures, then one per
        // 6 minutes) to drain, so only the pair's lock answers the next round.
        now += 30 * 60_000;
      }
    });

    it('sends one SMS code per number per minute and 10 per Shanghai day; a failed send is not charged', async () => {
      let fail = false;
      const app = await boot({
        sendCode: () => {
          if (fail) throw new Error('gateway down');
        },
      });
      const phone = { phone: '+8613800138000' };
      fail = true;
      await request(app).post('/sms/code').send(phone).expect(503);
      fail = false;
      const res = await request(app).post('/sms/code').send(phone).expect(200);
      expect(res.headers['ratelimit-policy']).to.equal(
        exposesWindows(limiter)
          ? '"sms-minute";q=1;w=60, "sms-day";q=10;w=86400, "sms-ip";q=20;w=3600, "sms-global";q=1000;w=3600'
          : '"sms-minute";q=1, "sms-day";q=10, "sms-ip";q=20, "sms-global";q=1000',
      );
      // The hourly rules are sliding counters of 6-minute buckets: a hit counts for 60 to 66 minutes.
      expect(res.headers.ratelimit).to.equal(
        '"sms-minute";r=0;t=60, "sms-day";r=9;t=57600, "sms-ip";r=19;t=3960, "sms-global";r=999;t=3960',
      );
      await request(app).post('/sms/code').send(phone).expect(429).expect('retry-after', '60');
      await request(app).post('/sms/code').send({ phone: '+8613900139000' }).expect(200);
      for (let i = 0; i < 9; i++) {
        now += 60_000;
        await request(app).post('/sms/code').send(phone).expect(200);
      }
      now += 60_000;
      const day = await request(app).post('/sms/code').send(phone).expect(429);
      expect(Number(day.headers['retry-after'])).to.equal(57_600 - 10 * 60);
    });

    it('limits the API per client', async () => {
      const app = await boot({ apiPerMinute: 2 });
      const res = await request(app).get('/api/items').set(from('192.0.2.1')).expect(200);
      expect(res.headers['ratelimit-policy']).to.equal(
        exposesWindows(limiter) ? '"api";q=2;w=60' : '"api";q=2',
      );
      await request(app).get('/api/items').set(from('192.0.2.1')).expect(200);
      await request(app).get('/api/items').set(from('192.0.2.1')).expect(429).expect('retry-after', '30');
      await request(app).get('/api/items').set(from('192.0.2.2')).expect(200);
    });
  });
}
