// Key extraction: every key form, and hostile key material that must not escape its bucket (IP keys: ip.test.ts).
import { expect } from 'chai';
import {
  createLimiter,
  type KeySpec,
  RateLimitRequestError,
  type RequestInfo,
  UNPARSED_BODY_KEY,
  userKey,
} from '../../../src/index.js';

const base: RequestInfo = { method: 'POST', path: '/login', ip: '203.0.113.10', headers: {} };

/** The identity one rule keys a request on, or undefined when the rule does not apply. */
async function keyOf(
  key: KeySpec,
  req: Partial<RequestInfo>,
  extra: Record<string, unknown> = {},
): Promise<string | undefined> {
  const limiter = createLimiter({
    rules: [{ name: 'r', key, limit: 100, window: { type: 'fixed', size: '1m' }, ...extra }],
  });
  const d = await limiter.peek({ ...base, ...req });
  await limiter.close();
  return d.rules[0]?.key;
}

/** The error with which a rule refuses to key a request (nothing consumed), or undefined when it keys it. */
async function refusalOf(
  key: KeySpec,
  req: Partial<RequestInfo>,
): Promise<RateLimitRequestError | undefined> {
  const limiter = createLimiter({
    rules: [{ name: 'r', key, limit: 1, window: { type: 'fixed', size: '1m' } }],
  });
  try {
    await limiter.check({ ...base, ...req });
    return undefined;
  } catch (error) {
    expect(error).to.be.an.instanceOf(RateLimitRequestError);
    return error as RateLimitRequestError;
  } finally {
    await limiter.close();
  }
}

describe('key forms', () => {
  it('reads user, headers, body paths, query and params', async () => {
    expect(await keyOf('user', { user: { id: 42 } })).to.equal('42');
    expect(await keyOf('user', { user: 'alice' })).to.equal('alice');
    expect(await keyOf('header:X-Api-Key', { headers: { 'x-api-key': 'k1' } })).to.equal('k1');
    expect(await keyOf('header:x-api-key', { headers: { 'x-api-key': ['a', 'b'] } })).to.equal('a, b');
    expect(await keyOf('body.account.email', { body: { account: { email: 'a@b.c' } } })).to.equal('a@b.c');
    expect(await keyOf('query.token', { query: { token: 't' } })).to.equal('t');
    expect(await keyOf('param.id', { params: { id: '7' } })).to.equal('7');
    expect(await keyOf((r) => r.method, {})).to.equal('POST');
  });

  it('fills templates and separates composite parts unambiguously', async () => {
    expect(await keyOf('sms:{body.phone}', { body: { phone: '+8613800000000' } })).to.equal(
      'sms:+8613800000000',
    );
    const ab = await keyOf(['body.user', 'body.ip'], { body: { user: 'a|b', ip: 'c' } });
    const a = await keyOf(['body.user', 'body.ip'], { body: { user: 'a', ip: 'b|c' } });
    expect(ab).to.not.equal(a);
    const t1 = await keyOf('{body.user}:{body.ip}', { body: { user: 'a:b', ip: 'c' } });
    const t2 = await keyOf('{body.user}:{body.ip}', { body: { user: 'a', ip: 'b:c' } });
    expect(t1).to.not.equal(t2);
  });

  it('keys strings, finite numbers and booleans as their text, and null as absent', async () => {
    expect(await keyOf('body.n', { body: { n: 5 } })).to.equal('5');
    expect(await keyOf('body.n', { body: { n: -0.5 } })).to.equal('-0.5');
    expect(await keyOf('body.n', { body: { n: 10n } })).to.equal('10');
    expect(await keyOf('body.flag', { body: { flag: true } })).to.equal('true');
    expect(await keyOf('body.flag', { body: { flag: false } })).to.equal('false');
    expect(await keyOf('query.flag', { query: { flag: 'true' } }), 'the same text as the boolean').to.equal(
      'true',
    );
    for (const [what, req] of [
      ['null', { body: { email: null } }],
      ['empty', { body: { email: '' } }],
      ['missing', { body: {} }],
      ['null query', { query: { email: null } }],
    ] as const)
      expect(await keyOf('body.email', req), what).to.equal(undefined);
    expect(await keyOf('user', { user: null }), 'no user').to.equal(undefined);
    expect(await keyOf('user', { user: { id: null } }), 'no user id').to.equal(undefined);
    expect(await keyOf('user', { user: { id: 7 } })).to.equal('7');
    expect(
      await keyOf((req) => req.body as string, { body: null }),
      'a key function answering null',
    ).to.equal(undefined);
    expect(
      await keyOf('sms:{body.phone}', { body: { phone: null } }),
      'a template of one absent field',
    ).to.equal(undefined);
  });

  it('refuses an object, an array or a number that is not finite where a rule reads a key, naming the field', async () => {
    for (const value of [
      { $ne: '' },
      ['a'],
      [['alice']],
      [],
      {},
      Number.NaN,
      Number.POSITIVE_INFINITY,
      { toString: () => 'x' },
    ]) {
      const shown = String(JSON.stringify(value));
      for (const [key, req, field] of [
        ['body.email', { body: { email: value } }, 'body.email'],
        ['query.email', { query: { email: value } }, 'query.email'],
        ['sms:{body.phone}', { body: { phone: value } }, 'body.phone'],
        [['ip', 'body.email'], { body: { email: value } }, 'body.email'],
        ['user', { user: { id: value } }, 'user'],
      ] as const) {
        const error = await refusalOf(key, req);
        expect(error?.code, `${shown} at ${field}`).to.equal('ERR_KEY_VALUE');
        expect(error?.field).to.equal(field);
        expect(error?.message).to.match(new RegExp(`^rule "r": ${field.replace('.', '\\.')} is `));
      }
    }
    const fromFunction = await refusalOf((req) => req.body as string, { body: ['a'] });
    expect(fromFunction?.code).to.equal('ERR_KEY_VALUE');
    expect(fromFunction?.field).to.equal(undefined);
    expect(fromFunction?.message).to.match(/the key function returned an array/);
  });

  it('keys a body nothing parsed on one shared #unparsed-body key, and a request without a body not at all', async () => {
    const carrying = { 'content-length': '24', 'content-type': 'text/plain' };
    expect(await keyOf('body.email', { body: 'email=a@b.c', headers: carrying })).to.equal(UNPARSED_BODY_KEY);
    expect(await keyOf('body.email', { body: undefined, headers: carrying })).to.equal(UNPARSED_BODY_KEY);
    expect(
      await keyOf('body.email', { body: undefined, headers: { 'transfer-encoding': 'chunked' } }),
    ).to.equal(UNPARSED_BODY_KEY);
    expect(await keyOf('body.email', { body: 'email=a@b.c' }), 'raw text').to.equal(UNPARSED_BODY_KEY);
    expect(await keyOf('body.email', { body: undefined }), 'no body').to.equal(undefined);
    expect(await keyOf('body.email', { body: undefined, headers: { 'content-length': '0' } })).to.equal(
      undefined,
    );
  });

  it('never reads through the prototype chain', async () => {
    expect(await keyOf('body.constructor', { body: {} })).to.equal(undefined);
    const own = await refusalOf('body.__proto__', { body: JSON.parse('{"__proto__": {"x": 1}}') });
    expect(own?.code, 'an own __proto__ field that is an object').to.equal('ERR_KEY_VALUE');
    expect(await keyOf('body.__proto__.x', { body: {} })).to.equal(undefined);
    expect(await keyOf('body.toString', { body: {} })).to.equal(undefined);
    expect(await keyOf('body.user', { body: JSON.parse('{"user": "__proto__"}') })).to.equal('__proto__');
  });

  it('normalizes usernames and e-mails when asked: NFKC, trim, lower case', async () => {
    const keys = await Promise.all(
      ['Alice', 'alice', 'ＡＬＩＣＥ', ' alice '].map((user) =>
        keyOf('body.user', { body: { user } }, { normalize: true }),
      ),
    );
    expect(new Set(keys)).to.deep.equal(new Set(['alice']));
    expect(await keyOf('body.user', { body: { user: 'Alice' } })).to.equal('Alice');
    expect(await keyOf('body.user', { body: { user: '   ' } }, { normalize: true })).to.equal(undefined);
  });

  it('bounds long identities to a digest, and keys material over 8192 characters on one shared #oversized', async () => {
    const long = 'x'.repeat(8192);
    const key = (await keyOf('body.user', { body: { user: long } })) as string;
    expect(key).to.match(/^#[\w-]{43}$/);
    expect(await keyOf('body.user', { body: { user: `${long.slice(1)}y` } })).to.match(/^#[\w-]{43}$/);
    expect(await keyOf('body.user', { body: { user: `${long.slice(1)}y` } })).to.not.equal(key);
    for (const user of [`${long}y`, 'x'.repeat(1024 * 1024)])
      expect(await keyOf('body.user', { body: { user } }, { normalize: true })).to.equal('#oversized');
    const pair = (user: string) => keyOf(['body.user', 'ip'], { body: { user }, ip: '10.0.0.1' });
    expect(await pair(`${long}y`), 'one pair per IP for every oversized name').to.equal(
      await pair(`${long}z`),
    );
  });

  it("gives a user's text starting with # one more #, so it never takes a reserved key's or a digest's form", async () => {
    const long = 'y'.repeat(300);
    const digest = (await keyOf('body.user', { body: { user: long } })) as string;
    expect(digest).to.match(/^#[\w-]{43}$/);
    expect(await keyOf('body.user', { body: { user: digest } }), 'a digest sent as a name').to.equal(
      `#${digest}`,
    );
    expect(await keyOf('body.user', { body: { user: '#1' } })).to.equal('##1');
    expect(await keyOf('body.user', { body: { user: '#OVERSIZED' } }, { normalize: true })).to.equal(
      '##oversized',
    );
    expect(await keyOf('body.user', { body: { user: 'x'.repeat(9000) } })).to.equal('#oversized');
    // userKey gives the key of a text, as reset and status take it.
    for (const text of ['alice', '#1', digest, long, 'bob\ud800', '##'])
      expect(userKey(text), text.slice(0, 10)).to.equal(await keyOf('body.user', { body: { user: text } }));
  });

  it('keeps lone surrogates apart: a key with one is stored as a digest of its UTF-16 code units', async () => {
    const keys = await Promise.all(
      ['bob\ud800', 'bob\ud801', 'bob\ufffd', '\udc00bob', '\ud800'.repeat(300), '\ufffd'.repeat(300)].map(
        (user) => keyOf('body.user', { body: { user } }),
      ),
    );
    expect(new Set(keys).size).to.equal(6);
    expect(keys[2], 'well-formed text stays as it is').to.equal('bob\ufffd');
    for (const key of [...keys.slice(0, 2), ...keys.slice(3)]) expect(key).to.match(/^#[\w-]{43}$/);
    expect(
      await keyOf('body.user', { body: { user: 'bob\ud83d\ude00' } }),
      'a pair is no lone surrogate',
    ).to.equal('bob\ud83d\ude00');
  });

  it('turns a throwing key function into a RateLimitRequestError', async () => {
    const limiter = createLimiter({
      rules: [
        {
          name: 'r',
          key: () => {
            throw new Error('boom');
          },
          limit: 1,
          window: { type: 'fixed', size: '1m' },
        },
      ],
    });
    let error: Error | undefined;
    await limiter.check(base).catch((e: Error) => {
      error = e;
    });
    expect(error?.name).to.equal('RateLimitRequestError');
    expect(error?.message).to.equal('rule "r": key function threw: boom');
    await limiter.close();
  });

  it('matches paths with path-to-regexp and hands their params to the key', async () => {
    const limiter = createLimiter({
      rules: [
        {
          name: 'like',
          match: 'POST /posts/:id/like',
          key: ['user', 'param.id'],
          limit: 1,
          window: { type: 'fixed', size: '1s' },
        },
      ],
    });
    const like = (path: string) => limiter.check({ ...base, path, user: 'u1' });
    expect((await like('/posts/9/like')).rules[0]?.key).to.equal('u1|9');
    expect((await like('/posts/9/like')).allowed).to.equal(false);
    expect((await like('/posts/10/like')).allowed).to.equal(true);
    expect((await like('/posts/9')).rules).to.deep.equal([]);
    expect((await like('/posts/%E0%A4%A/like')).rules).to.have.length(1);
    await limiter.close();
  });
});
