// Key material an attacker controls: templates that cannot be shifted into one another, normalization done once
// per request and in linear time, requests with no usable address or body still limited (or the app told), HEAD
// limited as GET.
import { expect } from 'chai';
import {
  createLimiter,
  type Limiter,
  normalizeDestination,
  normalizeIdentity,
  RateLimitConfigError,
  type RequestInfo,
  type Rule,
  UNPARSED_BODY_WARNING,
  UNRESOLVED_IP_WARNING,
} from '../../../src/index.js';

const base: RequestInfo = { method: 'POST', path: '/sms', ip: '203.0.113.10', headers: {} };
const minute = { type: 'fixed', size: '1m' } as const;

/** Process warnings with one of `codes` emitted while `run` runs (they arrive on the next tick). */
async function warningsDuring(codes: string[], run: () => Promise<void>): Promise<string[]> {
  const seen: string[] = [];
  const listener = (w: Error & { code?: string }) => {
    if (w.code !== undefined && codes.includes(w.code)) seen.push(`${w.code}: ${w.message}`);
  };
  process.on('warning', listener);
  try {
    await run();
    await new Promise((resolve) => setImmediate(resolve));
  } finally {
    process.off('warning', listener);
  }
  return seen;
}

describe('Key safety', () => {
  const limiters: Limiter[] = [];
  const make = (rules: Rule[]) => {
    const limiter = createLimiter({ rules });
    limiters.push(limiter);
    return limiter;
  };
  afterEach(() => Promise.all(limiters.splice(0).map((l) => l.close())));

  describe('templates', () => {
    it("refuses placeholders with nothing but letters or digits between them: ('ab','c') and ('a','bc') would share a counter", () => {
      for (const key of ['{body.org}{body.user}', '{body.a}x{body.b}', 'k:{body.a}42{body.b}:z']) {
        expect(() => make([{ name: 't', key, limit: 1, window: minute }]), key)
          .to.throw(RateLimitConfigError, /no separator between them other than letters or digits/)
          .with.property('code', 'ERR_KEY');
      }
    });

    it('keeps distinct identities apart through every separator, non-ASCII ones included', async () => {
      const keys = async (key: string, pairs: Array<[string, string]>) => {
        const limiter = make([{ name: 't', key, limit: 1, window: minute }]);
        const out = [];
        for (const [a, b] of pairs)
          out.push((await limiter.peek({ ...base, body: { a, b } })).rules[0]?.key as string);
        return out;
      };
      const plain = await keys('{body.a}:{body.b}', [
        ['ab', 'c'],
        ['a', 'bc'],
        ['a:b', 'c'],
        ['a', 'b:c'],
        ['a%3ab', 'c'],
      ]);
      expect(new Set(plain).size).to.equal(5);
      const arrows = await keys('{body.a}!→{body.b}', [
        ['!92', 'x'],
        ['→', 'x'],
        ['x!', '→x'],
        ['x', '!→x'],
      ]);
      expect(new Set(arrows).size).to.equal(4);
      expect(await keys('sms:{body.a}', [['+1 555', '']])).to.deep.equal(['sms:+1 555']);
    });
  });

  describe('normalization', () => {
    it('normalizes a field once per request, however many rules key on it', async () => {
      let calls = 0;
      const normalize = (value: string) => {
        calls++;
        return value.toLowerCase();
      };
      const limiter = make([
        { name: 'a', key: 'body.user', normalize, limit: 5, window: minute },
        { name: 'b', key: ['body.user', 'ip'], normalize, limit: 5, window: minute },
        { name: 'c', key: 'org:{body.user}', normalize, limit: 5, window: minute },
      ]);
      const decision = await limiter.check({ ...base, body: { user: 'ALICE' } });
      expect(decision.rules.map((r) => r.key)).to.deep.equal(['alice', 'alice|203.0.113.10', 'org:alice']);
      expect(calls).to.equal(1);
      await limiter.check({ ...base, body: { user: 'BOB' } });
      expect(calls).to.equal(2);
    });

    it('never hands a normalizer more than 8192 characters: longer material shares #oversized', async () => {
      const lengths: number[] = [];
      const limiter = make([
        {
          name: 'a',
          key: 'body.user',
          normalize: (v) => {
            lengths.push(v.length);
            return v;
          },
          limit: 5,
          window: minute,
        },
      ]);
      for (const user of ['x'.repeat(8192), 'y'.repeat(8193), 'z'.repeat(1 << 20)])
        await limiter.check({ ...base, body: { user } });
      expect(lengths).to.deep.equal([8192]);
      expect((await limiter.status('a', '#oversized')).count).to.equal(2);
    });

    it('normalizes text as NFKC does, and breaks a run of more than 30 combining marks (UAX #15) so its cost stays linear', () => {
      for (const text of ['ＡＬＩＣＥ', 'e\u0301', 'ﬁ', `a${'\u0301\u0316'.repeat(15)}`, '\u1100\u1161'])
        expect(normalizeIdentity(text), JSON.stringify(text)).to.equal(text.normalize('NFKC').toLowerCase());
      const marks = `x${'\u0316\u0301'.repeat(50_000)}`;
      const out = normalizeIdentity(marks);
      const runs = out.split('\u034f').map((run) => run.length);
      expect(Math.max(...runs)).to.be.at.most(31);
      expect(out.replaceAll('\u034f', '').length).to.equal(marks.length);
      expect(normalizeDestination(` +86 ${'\u0301'.repeat(100)}`)).to.have.length(100 + 3 + 3);
    });
  });

  describe('requests whose key material is missing', () => {
    it("keys every request without a usable address on one '#unresolved-ip' per rule, with one warning per rule naming it", async () => {
      const limiter = make([
        { name: 'sms-ip', key: 'ip', limit: 2, window: minute },
        { name: 'pair', key: ['body.user', 'ip'], limit: 2, window: minute },
      ]);
      const allowed: boolean[] = [];
      const warnings = await warningsDuring([UNRESOLVED_IP_WARNING], async () => {
        for (const ip of [undefined, '', 'unknown', '09.9.9.9'])
          allowed.push((await limiter.check({ ...base, ip, body: { user: 'a' } })).allowed);
      });
      expect(allowed).to.deep.equal([true, true, false, false]);
      expect((await limiter.status('sms-ip', '#unresolved-ip')).count).to.equal(2);
      expect((await limiter.status('pair', 'a|#unresolved-ip')).count).to.equal(2);
      expect(warnings).to.have.length(2);
      expect(warnings[0]).to.match(
        /rule "sms-ip": a request has no client address .* share the key '#unresolved-ip'/,
      );
      expect(warnings[1]).to.match(/rule "pair": /);
    });

    it('warns once, naming the rule, when a request carrying a body reaches a body.* rule unparsed; not for a request without a body', async () => {
      const limiter = make([{ name: 'sms-minute', key: 'body.phone', limit: 1, window: minute }]);
      const warnings = await warningsDuring([UNPARSED_BODY_WARNING], async () => {
        await limiter.check({ ...base, method: 'GET' });
        await limiter.check({ ...base, headers: { 'content-length': '0' } });
      });
      expect(warnings).to.deep.equal([]);
      const seen = await warningsDuring([UNPARSED_BODY_WARNING], async () => {
        await limiter.check({ ...base, headers: { 'content-length': '23' } });
        await limiter.check({ ...base, headers: { 'transfer-encoding': 'chunked' }, body: 'phone=1' });
      });
      expect(seen).to.have.length(1);
      expect(seen[0]).to.match(
        /rule "sms-minute": keys on 'body.phone', but a request reached it whose body was not parsed.*body parser .* before the rate limiter/,
      );
      const raw = make([{ name: 'raw', key: 'body.phone', limit: 1, window: minute }]);
      const bytes = await warningsDuring([UNPARSED_BODY_WARNING], async () => {
        await raw.check({ ...base, headers: { 'content-length': '5' }, body: Buffer.from('phone') });
      });
      expect(bytes[0]).to.match(/whose body is raw bytes, not a parsed object/);
    });
  });

  it('limits HEAD with the rules that match GET, and nothing else with them', async () => {
    const limiter = make([
      { name: 'items', match: 'GET /api/items', key: 'ip', limit: 2, window: minute },
      {
        name: 'search',
        match: { method: ['get', 'POST'], path: '/search' },
        key: 'ip',
        limit: 5,
        window: minute,
      },
      { name: 'post', match: 'POST /api/items', key: 'ip', limit: 5, window: minute },
    ]);
    const req = (method: string, path: string) => limiter.check({ ...base, method, path });
    expect((await req('HEAD', '/api/items')).rules.map((r) => r.rule)).to.deep.equal(['items']);
    expect((await req('head', '/search')).rules.map((r) => r.rule)).to.deep.equal(['search']);
    expect((await req('GET', '/api/items')).allowed).to.equal(true);
    expect((await req('HEAD', '/api/items')).allowed).to.equal(false);
    expect((await req('OPTIONS', '/api/items')).rules).to.deep.equal([]);
  });
});
