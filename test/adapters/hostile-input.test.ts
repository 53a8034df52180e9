// Hostile input through the core and the Express and Koa middleware, on the memory store, RedisStore and a Cluster:
// each identity gets a bucket of its own (the same identity always the same one) or a clear error that consumes
// nothing; nothing crashes, hangs or pollutes a prototype.
import http, { type RequestListener } from 'node:http';
import type { AddressInfo } from 'node:net';
import { expect } from 'chai';
import express, { type NextFunction, type Request, type Response } from 'express';
import Koa from 'koa';
import request from 'supertest';
import { rateLimit as expressRateLimit } from '../../adapters/express.js';
import { rateLimit as koaRateLimit } from '../../adapters/koa.js';
import {
  createLimiter,
  type Limiter,
  MemoryStore,
  RateLimitConfigError,
  RateLimitRequestError,
  RedisStore,
  type RequestInfo,
  type Rule,
  type Store,
  UNPARSED_BODY_KEY,
} from '../../src/index.js';
import { escapeIdentity, opKeys } from '../../src/stores/redis/check-call.js';
import { tagSlot } from '../../src/stores/redis/keys.js';
import { getRedis, useCluster } from '../support/redis.js';
import { PATIENT } from '../support/settle.js';

const HUGE = 'a'.repeat(1 << 20);
/** The longest key material a rule still tells apart (MAX_KEY_LENGTH); anything longer shares '#oversized'. */
const LONGEST = 'c'.repeat(8192);

/**
 * Identities that must each get a bucket of their own, labelled for messages. Pairs rather than an object:
 * an object literal would take `__proto__` for its prototype.
 */
const IDENTITIES: ReadonlyArray<readonly [string, string]> = [
  ['1 MB', HUGE],
  ['8192 characters', LONGEST],
  ['8192 characters, last character differs', `${LONGEST.slice(0, -1)}b`],
  ['300 characters', 'k'.repeat(300)],
  ['Alice', 'Alice'],
  ['alice', 'alice'],
  ['alice, space-padded', ' alice '],
  ['ＡＬＩＣＥ (fullwidth)', 'ＡＬＩＣＥ'],
  ['emoji', '👩‍💻'],
  ['arabic', 'مرحبا'],
  ['e + combining acute', 'e\u0301'],
  ['é precomposed', 'é'],
  ['right-to-left override', '\u202Eevil'],
  ['lone high surrogate', '\ud800'],
  ['replacement character', '\ufffd'],
  ['{', '{'],
  ['}', '}'],
  ['{}', '{}'],
  ['}{', '}{'],
  ['{x}', '{x}'],
  ['a{b}c', 'a{b}c'],
  ['{{x}}', '{{x}}'],
  ['*', '*'],
  ['a*', 'a*'],
  ['?', '?'],
  ['[a-z]', '[a-z]'],
  ['newline', 'line\nbreak'],
  ['CRLF', 'crlf\r\nx'],
  ['NUL inside', 'nul\u0000byte'],
  ['NUL alone', '\u0000'],
  ['tab', 'tab\tx'],
  ['__proto__', '__proto__'],
  ['constructor', 'constructor'],
  ['toString', 'toString'],
  ['hasOwnProperty', 'hasOwnProperty'],
  ['#-prefixed', '#hash'],
  ['a:b', 'a:b'],
  ['a|b', 'a|b'],
  ['%7C', '%7C'],
  ["the string 'undefined'", 'undefined'],
  ["the string 'null'", 'null'],
];

/** The identities whose braces decide a Cluster slot if they are not escaped. */
const BRACES = ['{', '}', '{}', '}{', '{x}', 'a{b}c', '{{x}}', 'x{}{y}', '{x}{y}'];

const hour = { type: 'fixed', size: '1h' } as const;

interface StoreKind {
  name: string;
  make(): Store | Promise<Store>;
}

let prefixes = 0;
const MEMORY: StoreKind = { name: 'memory store', make: () => new MemoryStore() };
const REDIS: StoreKind = {
  name: 'RedisStore',
  make: async () => new RedisStore({ client: await sharedClient(), prefix: `rkh${prefixes++}` }),
};
let shared: ReturnType<Awaited<ReturnType<typeof getRedis>>['client']> | undefined;
async function sharedClient() {
  shared ??= (await getRedis()).client();
  return shared;
}

/** Everything Object.prototype has, to compare before and after. */
const prototypeKeys = () => Object.getOwnPropertyNames(Object.prototype).sort().join(',');

describe('Hostile input', function () {
  this.timeout(60_000);
  const limiters: Limiter[] = [];
  const protoBefore = prototypeKeys();

  async function limiterOn(kind: StoreKind, rules: Rule[]): Promise<Limiter> {
    const limiter = createLimiter({ ...PATIENT, store: await kind.make(), rules });
    limiters.push(limiter);
    return limiter;
  }

  afterEach(async () => {
    await Promise.all(limiters.splice(0).map((l) => l.close()));
    expect(prototypeKeys(), 'Object.prototype untouched').to.equal(protoBefore);
    expect(({} as Record<string, unknown>).username, 'no inherited username').to.equal(undefined);
  });
  after(() => shared?.disconnect());

  for (const kind of [MEMORY, REDIS]) {
    describe(`core, on the ${kind.name}`, () => {
      it('gives each hostile identity its own bucket, and the same identity always the same one', async () => {
        const limiter = await limiterOn(kind, [{ name: 'u', key: 'ip', limit: 1, window: hour }]);
        for (const [label, identity] of IDENTITIES) {
          expect((await limiter.consume('u', identity)).allowed, `first ${label}`).to.equal(true);
        }
        for (const [label, identity] of IDENTITIES) {
          expect((await limiter.consume('u', identity)).allowed, `again ${label}`).to.equal(false);
        }
      });

      it('keys a request body field the same way: own buckets, one shared key for non-strings and one for unparsed bodies', async () => {
        const limiter = await limiterOn(kind, [
          { name: 'user', key: 'body.username', limit: 1, window: hour },
          { name: 'ip', key: 'ip', limit: 1000, window: hour },
        ]);
        const post = (body: unknown): RequestInfo => ({
          method: 'POST',
          path: '/login',
          ip: '10.0.0.1',
          headers: {},
          body,
        });
        const userRule = async (body: unknown) =>
          (await limiter.check(post(body))).rules.find((r) => r.rule === 'user');
        for (const identity of IDENTITIES.map(([, identity]) => identity)) {
          expect((await userRule({ username: identity }))?.allowed).to.equal(true);
          expect((await userRule({ username: identity }))?.allowed).to.equal(false);
        }
        // A finite number is its decimal string: 7 and '7' are one identity.
        expect((await userRule({ username: 7 }))?.allowed).to.equal(true);
        expect((await userRule({ username: '7' }))?.allowed).to.equal(false);
        // A boolean is its text; a body nothing parsed shares one key.
        const keyed: Array<[unknown, string]> = [
          [{ username: true }, 'true'],
          ['username=alice', UNPARSED_BODY_KEY],
          [42, UNPARSED_BODY_KEY],
          [null, UNPARSED_BODY_KEY],
        ];
        for (const [body, key] of keyed)
          expect((await userRule(body))?.key, JSON.stringify(body)).to.equal(key);
        // An object, an array or a number that is not finite: refused, naming the field; nothing counted.
        const ipBeforeRefusals = (await limiter.status('ip', '10.0.0.1')).count;
        for (const username of [['alice'], { $ne: '' }, Number.NaN, Number.POSITIVE_INFINITY]) {
          const error = await limiter.check(post({ username })).then(
            () => undefined,
            (e: unknown) => e as RateLimitRequestError,
          );
          expect([error?.code, error?.field], JSON.stringify(username)).to.deep.equal([
            'ERR_KEY_VALUE',
            'body.username',
          ]);
        }
        expect((await limiter.status('ip', '10.0.0.1')).count, 'refused: nothing consumed').to.equal(
          ipBeforeRefusals,
        );
        // No username (null is absent): the rule does not apply (the IP rule still counts the request).
        const keyless: unknown[] = [
          { username: '' },
          { username: null },
          undefined,
          ['alice'],
          JSON.parse('{"__proto__": {"username": "admin"}}'),
        ];
        const ipBefore = (await limiter.status('ip', '10.0.0.1')).count;
        for (const body of keyless) {
          const decision = await limiter.check(post(body));
          expect(
            decision.rules.map((r) => r.rule),
            JSON.stringify(body),
          ).to.deep.equal(['ip']);
        }
        expect((await limiter.status('ip', '10.0.0.1')).count).to.equal(ipBefore + keyless.length);
        // An own __proto__ key next to a real username: the username counts, 'admin' stays untouched.
        const both = JSON.parse('{"__proto__": {"username": "admin"}, "username": "carol"}');
        expect((await userRule(both))?.key).to.equal('carol');
        expect((await userRule({ username: 'admin' }))?.allowed).to.equal(true);
      });

      it('joins a repeated header into one identity, distinct from each of its values', async () => {
        const limiter = await limiterOn(kind, [
          { name: 'k', key: 'header:x-api-key', limit: 1, window: hour },
        ]);
        const get = (value: string | string[]) =>
          limiter.check({ method: 'GET', path: '/', headers: { 'x-api-key': value } });
        expect((await get(['k1', 'k2'])).allowed).to.equal(true);
        expect((await get('k1')).allowed).to.equal(true);
        expect((await get('k2')).allowed).to.equal(true);
        expect((await get('k1, k2')).allowed, 'what Node makes of the repeated header').to.equal(false);
      });

      it('refuses a key or cost it cannot use with a RateLimitRequestError, and consumes nothing', async () => {
        const limiter = await limiterOn(kind, [
          { name: 'u', key: 'ip', limit: 1, window: hour },
          {
            name: 'fn',
            key: (req) => {
              if (typeof req.headers['x-id'] !== 'string') throw new TypeError('x-id must be one string');
              return req.headers['x-id'];
            },
            limit: 5,
            window: hour,
          },
          {
            name: 'weighted',
            match: 'POST /points',
            key: 'ip',
            limit: 100,
            window: hour,
            cost: (req) => Number((req.body as { points?: unknown } | undefined)?.points),
          },
        ]);
        const badKeys: unknown[] = [
          ['a'],
          {},
          '',
          Number.NaN,
          Number.POSITIVE_INFINITY,
          null,
          undefined,
          true,
          Symbol('s'),
          10n,
        ];
        for (const key of badKeys) {
          const error = await limiter.consume('u', key as string).then(
            () => undefined,
            (e: unknown) => e,
          );
          expect(error, String(key)).to.be.an.instanceOf(RateLimitRequestError);
          expect((error as RateLimitRequestError).code).to.equal('ERR_KEY');
        }
        for (const cost of [1.5, -1, Number.NaN, '5', Number.POSITIVE_INFINITY, 2 ** 53]) {
          const error = await limiter.consume('u', 'k', cost as number).then(
            () => undefined,
            (e: unknown) => e,
          );
          expect((error as RateLimitRequestError).code, String(cost)).to.equal('ERR_COST');
        }
        expect((await limiter.status('u', 'k')).count, 'nothing consumed').to.equal(0);
        for (const name of ['__proto__', 'constructor', 'toString']) {
          const error = await limiter.status(name, 'k').then(
            () => undefined,
            (e: unknown) => e,
          );
          expect(error, name).to.be.an.instanceOf(RateLimitConfigError);
        }
        // In a request, a throwing key function or a bad cost stops the whole decision before any rule counts.
        const req = (headers: RequestInfo['headers'], body?: unknown): RequestInfo => ({
          method: 'POST',
          path: '/points',
          ip: '10.0.0.9',
          headers,
          body,
        });
        const failures = [
          req({ 'x-id': ['a', 'b'] }),
          req({}),
          req({ 'x-id': 'a' }, { points: '1e400' }),
          req({ 'x-id': 'a' }, { points: -3 }),
          req({ 'x-id': 'a' }, { points: 0.5 }),
        ];
        for (const failing of failures) {
          const error = await limiter.check(failing).then(
            () => undefined,
            (e: unknown) => e,
          );
          expect(error).to.be.an.instanceOf(RateLimitRequestError);
          expect(['ERR_KEY_FUNCTION', 'ERR_COST']).to.include((error as RateLimitRequestError).code);
        }
        expect((await limiter.status('u', '10.0.0.9')).count).to.equal(0);
        expect((await limiter.status('fn', 'a')).count).to.equal(0);
        expect((await limiter.status('weighted', '10.0.0.9')).count).to.equal(0);
      });
    });
  }

  describe('HTTP', () => {
    const HTTP_RULES: Rule[] = [
      { name: 'user', match: 'POST /login', key: 'body.username', limit: 1, window: hour },
      { name: 'apikey', match: 'GET /api', key: 'header:x-api-key', limit: 1, window: hour },
      { name: 'search', match: 'GET /search', key: 'query.q', limit: 1, window: hour },
      {
        name: 'strict',
        match: 'POST /strict',
        key: (req) => {
          const id = (req.body as { id?: unknown } | null | undefined)?.id;
          if (typeof id !== 'string') throw new TypeError('id must be a string');
          return id;
        },
        limit: 1,
        window: hour,
      },
      { name: 'ip', key: 'ip', limit: 100_000, window: hour },
    ];

    function expressApp(limiter: Limiter): RequestListener {
      const app = express();
      app.use(express.json({ limit: '4mb' })); // strict, as Express ships it: objects and arrays only
      app.use(expressRateLimit(limiter));
      app.use((_req, res) => void res.json({ ok: true }));
      app.use(
        (
          err: Error & { status?: number; code?: string },
          _req: Request,
          res: Response,
          _next: NextFunction,
        ) => {
          res.status(err.status ?? 500).json({ error: err.message, code: err.code ?? null });
        },
      );
      return app;
    }

    function koaApp(limiter: Limiter): RequestListener {
      const app = new Koa();
      app.use(async (ctx, next) => {
        try {
          await next();
        } catch (error) {
          const err = error as Error & { status?: number; code?: string };
          ctx.status = err.status ?? 500;
          ctx.body = { error: err.message, code: err.code ?? null };
        }
      });
      // A JSON body parser without the strict mode of Express's: any JSON value becomes the body.
      app.use(async (ctx, next) => {
        if (ctx.is('application/json')) {
          ctx.req.setEncoding('utf8');
          let text = '';
          for await (const chunk of ctx.req) text += chunk;
          try {
            (ctx.request as { body?: unknown }).body = JSON.parse(text);
          } catch {
            ctx.throw(400, 'invalid JSON');
          }
        }
        await next();
      });
      app.use(koaRateLimit(limiter));
      app.use((ctx) => {
        ctx.body = { ok: true };
      });
      return app.callback();
    }

    const frameworks = [
      { name: 'Express', build: expressApp },
      { name: 'Koa', build: koaApp },
    ];

    for (const framework of frameworks) {
      for (const kind of [MEMORY, REDIS]) {
        describe(`${framework.name} on the ${kind.name}`, () => {
          let server: http.Server | undefined;
          let url = '';
          let limiter: Limiter;

          beforeEach(async () => {
            limiter = await limiterOn(kind, HTTP_RULES);
            server = http.createServer(framework.build(limiter)).listen(0, '127.0.0.1');
            await new Promise((resolve) => server?.once('listening', resolve));
            url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
          });
          afterEach(() => {
            server?.close();
            server?.closeAllConnections();
          });

          const login = (body: unknown) =>
            request(url)
              .post('/login')
              .timeout(10_000)
              .set('Content-Type', 'application/json')
              .send(JSON.stringify(body));
          const ipCount = async () => (await limiter.status('ip', '127.0.0.1')).count;

          it('keys each hostile username to a bucket of its own: first 200, the same again 429', async () => {
            for (const [label, username] of IDENTITIES) {
              expect((await login({ username })).status, `first ${label}`).to.equal(200);
            }
            for (const [label, username] of IDENTITIES) {
              expect((await login({ username })).status, `again ${label}`).to.equal(429);
            }
          });

          it('numbers and booleans key as their text, null as absent; objects and arrays are refused with 400 naming the field, counting nothing', async () => {
            expect((await login({ username: 7 })).status).to.equal(200);
            expect((await login({ username: '7' })).status).to.equal(429);
            expect((await login({ username: true })).status).to.equal(200);
            expect((await login({ username: 'true' })).status).to.equal(429);
            const before = await ipCount();
            for (const body of [
              '{"username": ["alice"]}',
              '{"username": {"$ne": ""}}',
              '{"username": [["alice"]]}',
            ]) {
              for (let i = 0; i < 2; i++) {
                const res = await login(JSON.parse(body));
                expect([res.status, res.body], body).to.deep.equal([
                  400,
                  {
                    statusCode: 400,
                    error: 'Bad Request',
                    message: 'body.username must be a string, a number or a boolean',
                    field: 'body.username',
                  },
                ]);
                expect(res.headers['x-ratelimit-limit'], 'no rule decided it').to.equal(undefined);
              }
            }
            expect(await ipCount(), 'refused requests consume nothing').to.equal(before);
            // No username at all (null is absent): only the IP rule applies.
            for (const body of [
              '{"username": ""}',
              '{"username": null}',
              '["alice"]',
              '{"__proto__": {"username": "admin"}}',
            ]) {
              for (let i = 0; i < 2; i++) {
                const res = await login(JSON.parse(body));
                expect(res.status, body).to.equal(200);
                expect(res.headers['x-ratelimit-limit'], `${body}: only the IP rule`).to.equal('100000');
              }
            }
            // JSON that is not an object or array: Express's strict parser refuses it (400) before the
            // limiter; Koa's passes it on, and the rule counts it, with text bodies, on #unparsed-body.
            const unparsed: number[] = [];
            for (const body of ['42', 'null', '"alice"']) {
              const res = await request(url)
                .post('/login')
                .timeout(10_000)
                .set('Content-Type', 'application/json')
                .send(body);
              unparsed.push(res.status);
            }
            for (let i = 0; i < 2; i++) {
              const text = await request(url)
                .post('/login')
                .timeout(10_000)
                .set('Content-Type', 'text/plain')
                .send('alice');
              unparsed.push(text.status);
            }
            expect(unparsed).to.deep.equal(
              framework.name === 'Express' ? [400, 400, 400, 200, 429] : [200, 429, 429, 429, 429],
            );
            expect((await limiter.status('user', UNPARSED_BODY_KEY)).count).to.equal(1);
            const both = '{"__proto__": {"username": "admin"}, "username": "carol"}';
            const send = () =>
              request(url).post('/login').timeout(10_000).set('Content-Type', 'application/json').send(both);
            expect((await send()).status).to.equal(200);
            expect((await send()).status).to.equal(429);
            expect((await login({ username: 'admin' })).status, "'admin' untouched").to.equal(200);
          });

          it('headers: a repeated header is one identity, long and odd values are isolated, XFF is ignored', async () => {
            const api = (key: string | string[], xff?: string[]) => {
              // superagent sends an array as one header line per value (its types admit only strings).
              const req = request(url)
                .get('/api')
                .timeout(10_000)
                .set('X-Api-Key', key as string);
              return xff === undefined ? req : req.set('X-Forwarded-For', xff as unknown as string);
            };
            expect((await api(['k1', 'k2'])).status, 'two header lines').to.equal(200);
            expect((await api('k1')).status).to.equal(200);
            expect((await api('k2')).status).to.equal(200);
            expect((await api('k1, k2')).status, 'the joined form').to.equal(429);
            const long = 'x'.repeat(8000);
            for (const value of [
              long,
              `${long.slice(0, -1)}y`,
              '__proto__',
              'constructor',
              '{x}',
              '}',
              '*',
            ]) {
              expect((await api(value)).status, value.slice(0, 20)).to.equal(200);
              expect((await api(value)).status, value.slice(0, 20)).to.equal(429);
            }
            // Not behind a trusted proxy: the socket address is the IP, whatever the client claims.
            const before = await ipCount();
            await api('fresh-1', ['1.2.3.4', '5.6.7.8']);
            await api('fresh-2', ['9.9.9.9']);
            expect(await ipCount()).to.equal(before + 2);
          });

          it('query: a repeated parameter is refused with 400; bracketed ones, NUL, newline, braces and 8 KB values are isolated', async () => {
            const search = (query: string) => request(url).get(`/search?${query}`).timeout(10_000);
            for (const query of ['q=a&q=b', 'q=b&q=a']) {
              const res = await search(query);
              expect([res.status, res.body.field], query).to.deep.equal([400, 'query.q']);
            }
            // The framework's own query parser keeps these under other names: no 'q' for the handler either.
            for (const query of ['q[x]=1', 'q[]=a', 'q[__proto__]=x', '__proto__=x']) {
              for (let i = 0; i < 2; i++) {
                const res = await search(query);
                expect([res.status, res.headers['x-ratelimit-limit']], query).to.deep.equal([200, '100000']);
              }
            }
            for (const value of [
              '%00',
              '%0A',
              '%0D%0A',
              '%7Bx%7D',
              '*',
              '%E2%80%AE',
              '__proto__',
              'y'.repeat(8000),
            ]) {
              expect((await search(`q=${value}`)).status, value.slice(0, 20)).to.equal(200);
              expect((await search(`q=${value}`)).status, value.slice(0, 20)).to.equal(429);
            }
          });

          it('a key function that throws on hostile input: 500 with ERR_KEY_FUNCTION, and nothing counted', async () => {
            const strict = (body: string, type = 'application/json') =>
              request(url).post('/strict').timeout(10_000).set('Content-Type', type).send(body);
            const before = await ipCount();
            for (const [body, type] of [
              ['{"id": 5}', 'application/json'],
              ['{"id": ["x"]}', 'application/json'],
              ['{"id": {"toString": "x"}}', 'application/json'],
              ['x', 'text/plain'],
            ] as const) {
              const res = await strict(body, type);
              expect([res.status, res.body.code], body).to.deep.equal([500, 'ERR_KEY_FUNCTION']);
            }
            expect(await ipCount(), 'no rule counted the failed requests').to.equal(before);
            expect((await strict('{"id": "x"}')).status).to.equal(200);
            expect((await strict('{"id": "x"}')).status).to.equal(429);
          });
        });
      }
    }
  });

  describe('on a 3-master Redis Cluster: braces never choose the slot', () => {
    const cluster = useCluster();

    const rules: Rule[] = [
      { name: 'a', key: 'body.username', limit: 1, window: hour },
      {
        name: 'b',
        key: 'body.username',
        limit: 1,
        window: { type: 'sliding-log', size: '1h' },
        lockout: { duration: '1h' },
      },
    ];
    const scriptCalls = async () =>
      (await cluster.commandCount('fcall')) +
      (await cluster.commandCount('evalsha')) +
      (await cluster.commandCount('eval'));

    it('decides two rules of a brace identity in one script call, no CROSSSLOT, in the slot of its digest', async () => {
      const prefix = `rkh${prefixes++}`;
      const limiter = createLimiter({
        ...PATIENT,
        store: new RedisStore({ client: cluster.ioredis, prefix }),
        rules,
      });
      limiters.push(limiter);
      const post = (username: string): RequestInfo => ({
        method: 'POST',
        path: '/',
        headers: {},
        body: { username },
      });
      // Identities on every master, so the script is loaded everywhere before calls are counted.
      for (let i = 0; i < 30; i++) await limiter.check(post(`warm-up-${i}`));
      for (const identity of new Set([...BRACES, ...IDENTITIES.map(([, identity]) => identity)])) {
        const label = JSON.stringify(identity.slice(0, 20));
        const before = await scriptCalls();
        const first = await limiter.check(post(identity));
        expect(
          first.rules.map((r) => r.allowed),
          label,
        ).to.deep.equal([true, true]);
        expect((await scriptCalls()) - before, `${label}: one call`).to.equal(1);
        const again = await limiter.check(post(identity));
        expect(
          again.rules.map((r) => [r.allowed, r.locked]),
          label,
        ).to.deep.equal([
          [false, false],
          [false, true],
        ]);
        // The identity as the rule keyed on it (a 1 MB one is a digest by then).
        const keyed = first.rules[0]?.key as string;
        const keys = opKeys(prefix, 'a', keyed);
        const slot = Number(await cluster.ioredis.cluster('KEYSLOT', keys.count));
        expect(slot, label).to.equal(tagSlot(escapeIdentity(keyed)));
        expect(
          Number(await cluster.ioredis.cluster('KEYSLOT', opKeys(prefix, 'b', keyed).lock)),
          label,
        ).to.equal(slot);
        if (/[{}]/.test(identity))
          expect(keys.count, label).to.match(new RegExp(`^${prefix}:\\{#[\\w-]{43}\\}:a$`));
        expect(await cluster.ioredis.exists(keys.count), `${label}: stored where computed`).to.equal(1);
      }
    });

    it('Express on the Cluster: brace usernames get buckets of their own', async () => {
      const limiter = createLimiter({
        ...PATIENT,
        store: new RedisStore({ client: cluster.ioredis, prefix: `rkh${prefixes++}` }),
        rules: [{ name: 'user', match: 'POST /login', key: 'body.username', limit: 1, window: hour }],
      });
      limiters.push(limiter);
      const app = express();
      app.use(express.json());
      app.use(expressRateLimit(limiter));
      app.use((_req, res) => void res.json({ ok: true }));
      for (const round of [200, 429]) {
        for (const username of BRACES) {
          const res = await request(app).post('/login').timeout(10_000).send({ username });
          expect(res.status, `${username}: ${res.text}`).to.equal(round);
        }
      }
    });
  });
});
