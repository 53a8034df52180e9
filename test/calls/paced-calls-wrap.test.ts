// limiter.wrap on both stores: all named rules decided together on a key from the arguments.
import { expect } from 'chai';
import {
  createLimiter,
  type Limiter,
  RateLimitConfigError,
  RateLimitExceededError,
  RateLimitRequestError,
  type Rule,
} from '../../src/index.js';
import { fakeClock } from '../stores/conformance/suite.js';
import { PATIENT } from '../support/settle.js';
import { memoryStores, redisStores } from '../support/stores.js';

/** The seeds' e-mail auth-code method: 1 per 60 s and 5 per calendar hour on the same address. */
const AUTH_CODE_RULES: Rule[] = [
  { name: 'auth-code-minute', key: 'ip', limit: 1, window: { type: 'fixed', size: '60s' } },
  { name: 'auth-code-hour', key: 'ip', limit: 5, window: { type: 'calendar', unit: 'hour' } },
];

const failureOf = (p: Promise<unknown>) =>
  p.then(
    () => undefined,
    (e: unknown) => e as Error,
  );

for (const stores of [memoryStores, redisStores]) {
  describe(`wrap on the ${stores.name} store`, () => {
    const clock = fakeClock(Date.parse('2026-01-05T09:00:00Z'));
    const limiters: Limiter[] = [];
    afterEach(async () => {
      await Promise.all(limiters.splice(0).map((l) => l.close()));
    });
    async function limiter(rules: Rule[]): Promise<Limiter> {
      const l = createLimiter({ ...PATIENT, store: await stores.makeStore(clock.read), rules });
      limiters.push(l);
      return l;
    }

    it('decides both rules together: a denial by the hour rule leaves the minute rule unspent, fn not called', async () => {
      clock.set('2026-01-05T09:00:00Z');
      const l = await limiter(AUTH_CODE_RULES);
      const sent: string[] = [];
      const sendCode = l.wrap(async (po: { email: string }) => sent.push(po.email), {
        rules: ['auth-code-minute', 'auth-code-hour'],
        key: '{0.email}',
      });
      const po = { email: 'ann@example.com' };
      await sendCode(po);
      const tooSoon = await failureOf(sendCode(po));
      expect(tooSoon).to.be.instanceOf(RateLimitExceededError);
      expect((tooSoon as RateLimitExceededError).decision.rule).to.equal('auth-code-minute');
      expect((tooSoon as RateLimitExceededError).retryAfterMs).to.equal(60_000);
      for (let i = 0; i < 4; i++) {
        clock.advance(60_000);
        await sendCode(po);
      }
      clock.advance(60_000);
      const hourSpent = await failureOf(sendCode(po));
      expect((hourSpent as RateLimitExceededError).decision.rule).to.equal('auth-code-hour');
      expect((await l.status('auth-code-minute', 'ann@example.com')).count, 'minute rule unspent').to.equal(
        0,
      );
      expect(sent).to.deep.equal(Array(5).fill('ann@example.com'));
      // Another address has its own counts; the next calendar hour starts over.
      await sendCode({ email: 'bob@example.com' });
      clock.set('2026-01-05T10:00:00Z');
      await sendCode(po);
      expect(sent).to.have.length(7);
    });

    it('keys on a template or a function of the arguments, keeps `this` and the return value', async () => {
      clock.set('2026-01-05T09:00:00Z');
      const l = await limiter([{ name: 'r', key: 'ip', limit: 1, window: { type: 'fixed', size: '1m' } }]);
      class Sms {
        prefix = '+44';
        send = l.wrap(
          async function (this: Sms, _user: { id: number }, phone: string) {
            return `${this.prefix}${phone}`;
          },
          { rules: 'r', key: 'sms:{0.id}:{1}' },
        );
      }
      const sms = new Sms();
      expect(await sms.send({ id: 7 }, '7700')).to.equal('+447700');
      expect((await l.status('r', 'sms:7:7700')).count, 'the key is the resolved string').to.equal(1);
      const byFunction = l.wrap(async (n: number) => n * 2, {
        rules: ['r'],
        key: (n) => n % 2,
        cost: (n) => (n > 10 ? 2 : 0),
      });
      expect(await byFunction(4)).to.equal(8);
      expect((await l.status('r', '0')).count, 'cost 0 counts nothing').to.equal(0);
      expect(await failureOf(byFunction(12))).to.be.instanceOf(RateLimitExceededError);
    });

    it("reports outcomes: with countOn 'failure' only calls that throw count", async () => {
      const l = await limiter([
        { name: 'login', key: 'ip', limit: 2, window: { type: 'fixed', size: '15m' }, countOn: 'failure' },
      ]);
      const login = l.wrap(
        async (user: string, password: string) => {
          if (password !== 'right') throw new Error('wrong password');
          return `welcome ${user}`;
        },
        { rules: 'login', key: '{0}' },
      );
      for (let i = 0; i < 3; i++) expect(await login('ann', 'right')).to.equal('welcome ann');
      for (let i = 0; i < 2; i++)
        expect((await failureOf(login('ann', 'wrong')))?.message).to.equal('wrong password');
      expect(await failureOf(login('ann', 'right'))).to.be.instanceOf(RateLimitExceededError);
    });

    it('refuses calls whose arguments give no key, or whose cost is bad, without calling fn', async () => {
      const l = await limiter([{ name: 'r', key: 'ip', limit: 5, window: { type: 'fixed', size: '1m' } }]);
      let calls = 0;
      const fn = l.wrap(
        async (_po: { email?: unknown }) => {
          calls++;
        },
        { rules: 'r', key: '{0.email}', cost: () => 1 },
      );
      for (const po of [{}, { email: '' }, { email: { $ne: '' } }]) {
        const error = await failureOf(fn(po));
        expect(error).to.be.instanceOf(RateLimitRequestError);
        expect((error as RateLimitRequestError).code).to.equal('ERR_KEY');
      }
      const badCost = l.wrap(async () => calls++, { rules: 'r', key: 'k', cost: () => -1 });
      expect(((await failureOf(badCost())) as RateLimitRequestError).code).to.equal('ERR_COST');
      expect(calls).to.equal(0);
    });

    it('refuses bad options when wrapping, not when calling', async () => {
      const l = await limiter([
        { name: 'r', key: 'ip', limit: 5, window: { type: 'fixed', size: '1m' } },
        {
          name: 'login',
          key: 'ip',
          limit: 5,
          window: { type: 'fixed', size: '1m' },
          lockout: { duration: '1m' },
        },
      ]);
      const fn = async (_a: unknown) => undefined;
      const bad: Array<[unknown, RegExp]> = [
        [{ rules: 'nope', key: '{0}' }, /no rule named 'nope'/],
        [{ rules: [], key: '{0}' }, /wrap: rules must be a rule name or a non-empty array/],
        [{ rules: 'r', key: '{email}' }, /wrap: key '\{email\}' has the placeholder '\{email\}'/],
        [{ rules: 'r', key: '{0}{1}' }, /wrap: key '\{0\}\{1\}' cannot be read: .*two placeholders/],
        [{ rules: 'r', key: 5 }, /wrap: key must be a template/],
        [{ rules: 'r', key: '{0}', wiat: '1s' }, /wrap: unknown field 'wiat' .*did you mean 'wait'\?/],
        [{ rules: 'login', key: '{0}', wait: '1s' }, /wrap: rule "login" has a lockout/],
      ];
      for (const [options, message] of bad) {
        expect(() => l.wrap(fn, options as never), String(message)).to.throw(RateLimitConfigError, message);
      }
      expect(() => l.wrap(fn, { rules: 'login', key: '{0}' })).not.to.throw();
    });
  });
}

describe('wrap with wait, the alias of maxWait', () => {
  it('waits its turn instead of throwing, and throws at once when the turn is later than wait', async () => {
    const l = createLimiter({
      rules: [
        { name: 'r', key: 'ip', limit: 2, window: { type: 'sliding-log', size: '200ms' } },
        { name: 'hourly', key: 'ip', limit: 1, window: { type: 'fixed', size: '1h' } },
      ],
    });
    const ping = l.wrap(async (i: number) => i, { rules: 'r', key: 'partner', wait: '5s' });
    expect(await Promise.all([0, 1, 2, 3, 4].map((i) => ping(i)))).to.deep.equal([0, 1, 2, 3, 4]);
    const report = l.wrap(async () => 'sent', { rules: 'hourly', key: 'partner', wait: '1s' });
    expect(await report()).to.equal('sent');
    const error = await failureOf(report());
    expect(error).to.be.instanceOf(RateLimitExceededError);
    expect((error as RateLimitExceededError).retryAfterMs).to.be.greaterThan(1000);
    await l.close();
  });
});

describe('wrap with maxWait and signal', () => {
  const limiters: Limiter[] = [];
  afterEach(async () => {
    await Promise.all(limiters.splice(0).map((l) => l.close()));
  });
  function limiter(): Limiter {
    const l = createLimiter({
      rules: [{ name: 'hourly', key: 'ip', limit: 1, window: { type: 'fixed', size: '1h' } }],
    });
    limiters.push(l);
    return l;
  }

  it('maxWait waits for a turn as acquire does, and refuses at once a turn later than maxWait', async () => {
    const l = createLimiter({
      rules: [{ name: 'r', key: 'ip', limit: 2, window: { type: 'sliding-log', size: '200ms' } }],
    });
    limiters.push(l);
    const ping = l.wrap(async (i: number) => i, { rules: 'r', key: 'partner', maxWait: '5s' });
    expect(await Promise.all([0, 1, 2, 3, 4].map((i) => ping(i)))).to.deep.equal([0, 1, 2, 3, 4]);
    const report = limiter().wrap(async () => 'sent', { rules: 'hourly', key: 'partner', maxWait: '1s' });
    expect(await report()).to.equal('sent');
    expect(await failureOf(report())).to.be.instanceOf(RateLimitExceededError);
  });

  it('signal ends the waits of its calls; after it aborts, a call rejects without deciding or calling fn', async () => {
    const l = limiter();
    const controller = new AbortController();
    let calls = 0;
    const send = l.wrap(async () => ++calls, {
      rules: 'hourly',
      key: 'partner',
      maxWait: Number.POSITIVE_INFINITY,
      signal: controller.signal,
    });
    expect(await send()).to.equal(1);
    const slept = new Promise<void>((resolve) => l.observe({ decision: (d) => !d.allowed && resolve() }));
    const waiting = failureOf(send());
    await slept;
    controller.abort(new Error('shutting down'));
    expect((await waiting)?.message).to.equal('shutting down');
    const unwaited = l.wrap(async () => ++calls, {
      rules: 'hourly',
      key: 'other',
      signal: controller.signal,
    });
    expect((await failureOf(unwaited()))?.message).to.equal('shutting down');
    expect((await l.status('hourly', 'other')).count, 'nothing decided').to.equal(0);
    expect(calls).to.equal(1);
  });

  it('refuses wait and maxWait given together, a bad signal and a bad maxQueue, when wrapping', () => {
    const l = limiter();
    const fn = async () => undefined;
    const bad: Array<[unknown, RegExp]> = [
      [
        { rules: 'hourly', key: 'k', wait: '1s', maxWait: '1s' },
        /^wrap: wait must be left out when maxWait is given \(it is the same option\), got '1s'$/,
      ],
      [{ rules: 'hourly', key: 'k', signal: {} }, /^wrap: signal must be an AbortSignal, got \{\}$/],
      [{ rules: 'hourly', key: 'k', maxQueue: 0 }, /^wrap: maxQueue must be a positive integer, got 0$/],
      [{ rules: 'hourly', key: 'k', maxWait: 'soon' }, /^wrap: maxWait must be a duration/],
    ];
    for (const [options, message] of bad) {
      expect(() => l.wrap(fn, options as never), String(message)).to.throw(RateLimitConfigError, message);
    }
  });
});
