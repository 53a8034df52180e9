// Identities every store keeps apart: two different JavaScript strings never share a counter, a lock or a
// lock-index entry, lone surrogates included (UTF-8 would turn each into U+FFFD), nor a user's text and a
// sentinel.
import { expect } from 'chai';
import {
  createLimiter,
  type Limiter,
  MAX_KEY_LENGTH,
  OVERSIZED_KEY,
  type RequestInfo,
  type Rule,
} from '../../../src/index.js';
import { PATIENT } from '../../support/settle.js';
import { fakeClock, type StoreUnderTest } from './suite.js';

const login = (username: unknown): RequestInfo => ({
  method: 'POST',
  path: '/login',
  ip: '10.0.0.1',
  headers: {},
  body: { username },
});

const LOCKING: Rule = {
  name: 'user',
  key: 'body.username',
  limit: 2,
  window: { type: 'fixed', size: '1m' },
  lockout: { duration: '10m' },
};

export function identitySuite(target: StoreUnderTest): void {
  describe(`identities: ${target.name}`, () => {
    const limiters: Limiter[] = [];
    async function limiter(rules: Rule[]): Promise<Limiter> {
      const clock = fakeClock();
      const l = createLimiter({ store: await target.makeStore(clock.read), rules, ...PATIENT });
      limiters.push(l);
      return l;
    }
    afterEach(async () => {
      await Promise.all(limiters.splice(0).map((l) => l.close()));
    });

    it("keeps 'bob\\ud800', 'bob\\ud801' and 'bob\\ufffd' apart: counts, locks, the lock index and resets", async () => {
      const l = await limiter([LOCKING]);
      const names = ['bob\ud800', 'bob\ud801', 'bob\ufffd'];
      const keys: string[] = [];
      for (const name of names) {
        for (let i = 0; i < 2; i++) expect((await l.check(login(name))).allowed, `${i + 1}`).to.equal(true);
        const denied = await l.check(login(name));
        expect([denied.allowed, denied.locked]).to.deep.equal([false, true]);
        keys.push(denied.rules[0]?.key as string);
      }
      expect(new Set(keys).size, 'three identities').to.equal(3);
      const locked = await l.locked('user');
      expect(locked.map((entry) => entry.key).sort()).to.deep.equal([...keys].sort());
      // Each key a decision shows is the one status and reset take, as is the name given directly.
      await l.reset('user', names[0] as string);
      expect((await l.locked('user')).map((entry) => entry.key).sort()).to.deep.equal(keys.slice(1).sort());
      expect((await l.status('user', keys[0] as string)).locked).to.equal(false);
      expect((await l.status('user', names[1] as string)).locked, 'the other lone surrogate').to.equal(true);
      expect((await l.status('user', keys[2] as string)).locked).to.equal(true);
      expect((await l.check(login(names[0]))).allowed).to.equal(true);
    });

    it('keeps a user named #OVERSIZED apart from the requests whose name is over MAX_KEY_LENGTH', async () => {
      const l = await limiter([{ ...LOCKING, normalize: true }]);
      for (let i = 0; i < 3; i++) await l.check(login('x'.repeat(MAX_KEY_LENGTH + 1 + i)));
      expect((await l.status('user', OVERSIZED_KEY)).locked).to.equal(true);
      const named = await l.check(login('#OVERSIZED'));
      expect([named.allowed, named.rules[0]?.key]).to.deep.equal([true, '##oversized']);
    });
  });
}
