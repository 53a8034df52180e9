// limiter.acquire in one process, on the memory store and on Redis (a concurrency rule on PostgreSQL too): order,
// maxWait, abort, no timer left.
// (Exactness across processes: acquire-processes.test.ts.) Real time, small windows; no timing assertion.
import { randomBytes } from 'node:crypto';
import { expect } from 'chai';
import {
  type Acquired,
  createLimiter,
  type Decision,
  type Limiter,
  PostgresStore,
  RateLimitConfigError,
  RateLimitExceededError,
  RateLimitRequestError,
  RedisStore,
  type Rule,
  type Store,
} from '../../src/index.js';
import { getPostgres } from '../support/postgres.js';
import { getRedis } from '../support/redis.js';
import { PATIENT } from '../support/settle.js';
import { memoryStores, postgresStores, redisStores } from '../support/stores.js';

/** Timers alive in this process (the `Timeout` resources). */
const timers = () => process.getActiveResourcesInfo().filter((r) => r === 'Timeout').length;

const settleOf = (p: Promise<unknown>) =>
  p.then(
    () => 'resolved',
    (e: unknown) => e,
  );

for (const stores of [memoryStores, redisStores]) {
  describe(`acquire on the ${stores.name} store`, () => {
    const limiters: Limiter[] = [];
    afterEach(async () => {
      await Promise.all(limiters.splice(0).map((l) => l.close()));
    });
    async function limiter(rule: Partial<Rule> = {}): Promise<Limiter> {
      const l = createLimiter({
        ...PATIENT,
        store: await stores.makeStore(Date.now),
        rules: [
          { name: 'api', key: 'ip', limit: 3, window: { type: 'sliding-log', size: '300ms' }, ...rule },
        ],
      });
      limiters.push(l);
      // Connected and its scripts loaded: the timers counted from here are those of the calls.
      await l.status(rule.name ?? 'api', 'warm-up');
      return l;
    }

    it('admits every waiter, first come first served, never past the limit', async () => {
      const l = await limiter();
      const before = timers();
      const order: number[] = [];
      const decisions = await Promise.all(
        Array.from({ length: 10 }, (_, i) =>
          l.acquire('api', 'partner').then((d) => {
            order.push(i);
            return d;
          }),
        ),
      );
      expect(order).to.deep.equal([0, 1, 2, 3, 4, 5, 6, 7, 8, 9]);
      expect(decisions.every((d) => d.allowed)).to.equal(true);
      expect(timers(), 'no timer left behind').to.equal(before);
    });

    it('rejects at once when the earliest admission is later than maxWait, consuming nothing', async () => {
      const l = await limiter({ limit: 1, window: { type: 'fixed', size: '1h' } });
      await l.acquire('api', 'k');
      const before = timers();
      const error = await settleOf(l.acquire('api', 'k', { maxWait: '2s' }));
      expect(error).to.be.instanceOf(RateLimitExceededError);
      expect((error as RateLimitExceededError).code).to.equal('ERR_RATE_LIMITED');
      expect((error as RateLimitExceededError).retryAfterMs).to.be.greaterThan(2000);
      expect((error as RateLimitExceededError).decision.rule).to.equal('api');
      expect((await l.status('api', 'k')).count).to.equal(1);
      expect(timers(), 'it never slept').to.equal(before);
    });

    it('maxWait 0 takes a turn only when one is free now', async () => {
      const l = await limiter({ limit: 1 });
      expect((await l.acquire('api', 'k', { maxWait: 0 })).allowed).to.equal(true);
      expect(await settleOf(l.acquire('api', 'k', { maxWait: 0 }))).to.be.instanceOf(RateLimitExceededError);
    });

    it('refuses a waiter queued behind a head that sleeps past its maxWait, at once', async () => {
      const l = await limiter({ limit: 1, window: { type: 'fixed', size: '2s' } });
      await l.acquire('api', 'k');
      const head = l.acquire('api', 'k');
      // The head sleeps about 2 s; this waiter would come after it.
      await new Promise((resolve) => setImmediate(resolve));
      const behind = await settleOf(l.acquire('api', 'k', { maxWait: '500ms' }));
      expect(behind).to.be.instanceOf(RateLimitExceededError);
      expect((await head).allowed).to.equal(true);
    });

    it('honours an AbortSignal: before, while sleeping, while queued; no timer left, the next waiter served', async () => {
      const l = await limiter({ limit: 1, window: { type: 'fixed', size: '400ms' } });
      const early = await settleOf(l.acquire('api', 'k', { signal: AbortSignal.abort() }));
      expect((early as Error).name).to.equal('AbortError');
      expect((await l.status('api', 'k')).count, 'an aborted call consumes nothing').to.equal(0);

      await l.acquire('api', 'k');
      const before = timers();
      const sleeping = new AbortController();
      const queued = new AbortController();
      const head = settleOf(l.acquire('api', 'k', { signal: sleeping.signal }));
      const second = settleOf(l.acquire('api', 'k', { signal: queued.signal }));
      const third = l.acquire('api', 'k');
      await new Promise((resolve) => setImmediate(resolve));
      queued.abort();
      sleeping.abort(new Error('shutting down'));
      expect(((await head) as Error).message).to.equal('shutting down');
      expect(((await second) as Error).name).to.equal('AbortError');
      expect((await third).allowed).to.equal(true);
      expect(timers()).to.equal(before);
    });

    it('rejects every waiter when the limiter closes, leaving no timer, and refuses new calls', async () => {
      const l = await limiter({ limit: 1, window: { type: 'fixed', size: '1h' } });
      await l.acquire('api', 'k');
      const before = timers();
      const waiting = [settleOf(l.acquire('api', 'k')), settleOf(l.acquire('api', 'k'))];
      await new Promise((resolve) => setImmediate(resolve));
      const closing = l.close();
      const [first, second] = await Promise.all(waiting);
      expect((first as Error).message).to.equal(
        'ratekeeper: the limiter was closed while this call waited for its turn',
      );
      expect((second as Error).message, 'the one queued behind it too').to.match(/limiter was closed/);
      await closing;
      // On Redis the head's try may still be on the wire, under the store's own timeout timer.
      if (stores.name === 'memory') expect(timers()).to.equal(before);
      expect(((await settleOf(l.acquire('api', 'k'))) as Error).message).to.match(/limiter was closed/);
    });

    it('takes several rules all or nothing: a denial by one consumes none, the wait ends when all admit', async () => {
      const l = createLimiter({
        store: await stores.makeStore(Date.now),
        rules: [
          { name: 'hour', key: 'ip', limit: 3, window: { type: 'fixed', size: '1h' } },
          { name: 'burst', key: 'ip', limit: 1, window: { type: 'sliding-log', size: '300ms' } },
        ],
      });
      limiters.push(l);
      expect((await l.acquire(['hour', 'burst'], 'k')).allowed).to.equal(true);
      const refused = await settleOf(l.acquire(['hour', 'burst'], 'k', { maxWait: 0 }));
      expect((refused as RateLimitExceededError).decision.rule).to.equal('burst');
      expect((await l.status('hour', 'k')).count, 'the hour rule gave back what burst denied').to.equal(1);
      const waited = await l.acquire(['hour', 'burst'], 'k');
      expect(waited.rules.map((r) => [r.rule, r.allowed])).to.deep.equal([
        ['hour', true],
        ['burst', true],
      ]);
      expect((await l.status('hour', 'k')).count).to.equal(2);
      const bad = await settleOf(l.acquire([], 'k'));
      expect(bad).to.be.instanceOf(RateLimitConfigError);
      expect((bad as Error).message).to.equal(
        'acquire: rules must be a rule name or a non-empty array of rule names, got an array',
      );
    });

    it('waits for a 30-day window with one try and no overflowing timer, and refuses at once past maxWait', async () => {
      const l = createLimiter({
        store: await stores.makeStore(Date.now),
        rules: [
          { name: 'month', key: 'ip', limit: 1, window: { type: 'fixed', size: '30d' } },
          { name: 'tick', key: 'ip', limit: 1, window: { type: 'sliding-log', size: '100ms' } },
        ],
      });
      limiters.push(l);
      const tries: string[] = [];
      l.observe({ decision: (d) => tries.push(d.rules.map((r) => r.rule).join()) });
      const warnings: string[] = [];
      const onWarning = (w: Error) => warnings.push(w.name);
      process.on('warning', onWarning);
      try {
        await l.acquire('month', 'k');
        const slept = new Promise<void>((resolve) => {
          l.observe({ decision: (d) => d.rules[0]?.rule === 'month' && !d.allowed && resolve() });
        });
        const waiting = settleOf(l.acquire('month', 'k'));
        await slept;
        // Another key's turn comes after a real wait: the month waiter's timer stays armed meanwhile.
        await l.acquire('tick', 't');
        await l.acquire('tick', 't');
        expect(tries.filter((t) => t === 'month')).to.have.length(2);
        await l.acquire('month', 'other');
        const refused = await settleOf(l.acquire('month', 'other', { maxWait: '29d' }));
        expect((refused as RateLimitExceededError).retryAfterMs).to.be.greaterThan(29 * 86_400_000);
        expect(
          tries.filter((t) => t === 'month'),
          'one try each for the other key',
        ).to.have.length(4);
        await l.close();
        expect(((await waiting) as Error).message).to.match(/limiter was closed/);
        await new Promise((resolve) => setImmediate(resolve));
        expect(warnings, 'no TimeoutOverflowWarning').to.deep.equal([]);
      } finally {
        process.off('warning', onWarning);
      }
    });

    it('lets an aborted waiter leave the queue at once, and refuses a call past maxQueue', async () => {
      const l = await limiter({ limit: 1, window: { type: 'fixed', size: '1h' } });
      await l.acquire('api', 'k');
      const options = { maxQueue: 3 };
      const head = settleOf(l.acquire('api', 'k', options));
      const controllers = [new AbortController(), new AbortController()];
      const behind = controllers.map((c) =>
        settleOf(l.acquire('api', 'k', { ...options, signal: c.signal })),
      );
      const full = await settleOf(l.acquire('api', 'k', options));
      expect(full).to.be.instanceOf(RateLimitRequestError);
      expect((full as RateLimitRequestError).code).to.equal('ERR_QUEUE_FULL');
      expect((full as Error).message).to.equal(
        `acquire on rule "api" for key 'k': 3 calls already wait for their turn, the most maxQueue allows; nothing was consumed`,
      );
      for (const c of controllers) c.abort();
      for (const aborted of await Promise.all(behind)) expect((aborted as Error).name).to.equal('AbortError');
      // The two aborted calls left: two more fit, a third does not.
      const more = [settleOf(l.acquire('api', 'k', options)), settleOf(l.acquire('api', 'k', options))];
      expect(((await settleOf(l.acquire('api', 'k', options))) as RateLimitRequestError).code).to.equal(
        'ERR_QUEUE_FULL',
      );
      await l.close();
      for (const closed of await Promise.all([head, ...more]))
        expect((closed as Error).message).to.match(/limiter was closed/);
    });

    it('refuses a cost the rule never admits at once, a lockout rule and bad options, consuming nothing', async () => {
      const l = await limiter();
      const never = await settleOf(l.acquire('api', 'k', { cost: 4 }));
      expect(never).to.be.instanceOf(RateLimitRequestError);
      expect((never as Error).message).to.equal(
        'rule "api": a cost of 4 never fits, it admits at most 3 at once; nothing was consumed',
      );
      const bad: Array<[string, unknown, RegExp]> = [
        ['api', { maxwait: '1s' }, /acquire: unknown field 'maxwait' .*did you mean 'maxWait'\?/],
        ['api', { maxWait: 'soon' }, /acquire: maxWait must be a duration/],
        ['api', { signal: {} }, /acquire: signal must be an AbortSignal/],
        ['nope', {}, /no rule named 'nope'/],
      ];
      for (const [rule, options, message] of bad) {
        const error = await settleOf(l.acquire(rule, 'k', options as { maxWait?: string }));
        expect(error, String(message)).to.be.instanceOf(RateLimitConfigError);
        expect((error as Error).message).to.match(message);
      }
      const locking = await limiter({ name: 'login', lockout: { duration: '1m' } });
      const refused = await settleOf(locking.acquire('login', 'k'));
      expect((refused as Error).message).to.match(/^acquire: rule "login" has a lockout/);
      expect((await l.status('api', 'k')).count).to.equal(0);
    });
  });
}

/** A store whose `close` leaves it open: several limiters share it, and one closing stops only its own renewals. */
function unclosable(store: Store): Store {
  return new Proxy(store, {
    get(target, prop) {
      if (prop === 'close') return async () => {};
      const value: unknown = Reflect.get(target, prop, target);
      return typeof value === 'function' ? value.bind(target) : value;
    },
  });
}

/** Resolves at the next decision `l` makes that a rule denies (a waiter's try, denied: it sleeps now). */
function nextDenial(l: Limiter): Promise<Decision> {
  return new Promise((resolve) => {
    const stop = l.observe({
      decision: (d) => {
        if (d.allowed) return;
        stop();
        resolve(d);
      },
    });
  });
}

for (const stores of [memoryStores, redisStores, postgresStores]) {
  describe(`acquire on a concurrency rule, ${stores.name} store`, () => {
    const limiters: Limiter[] = [];
    const clients: Array<{ disconnect(): void }> = [];
    afterEach(async () => {
      await Promise.all(limiters.splice(0).map((l) => l.close()));
      for (const client of clients.splice(0)) client.disconnect();
    });
    /** A limiter on `store` (a fresh one by default) with `slots` in flight per key, leased for a minute. */
    async function limiter(slots: number, store?: Store, rules: Rule[] = []): Promise<Limiter> {
      const l = createLimiter({
        ...PATIENT,
        store: store ?? (await stores.makeStore(Date.now)),
        rules: [
          { name: 'calls', key: 'user', limit: slots, window: { type: 'concurrency', lease: '60s' } },
          ...rules,
        ],
      });
      limiters.push(l);
      await l.status('calls', 'warm-up');
      return l;
    }

    it('holds and frees the slots of two keys taken in one millisecond (the same slot id) each on its own', async () => {
      const at = Date.now();
      const l = await limiter(1, await stores.makeStore(() => at));
      const a = await l.acquire('calls', 'a');
      const b = await l.acquire('calls', 'b');
      const slot = (d: Acquired) => d.rules.find((r) => r.rule === 'calls')?.slot;
      expect(slot(a), 'fresh keys at one time: one id').to.equal(slot(b));
      await l.release(b);
      expect((await l.status('calls', 'b')).count, "b's release frees b").to.equal(0);
      expect((await l.status('calls', 'a')).count, 'and not a').to.equal(1);
      await l.release({ ...b });
      expect((await l.status('calls', 'a')).count, 'a copy of b released again frees nothing').to.equal(1);
      await l.release({ ...a });
      expect((await l.status('calls', 'a')).count, "a copy of a's decision frees a").to.equal(0);
    });

    // A lease of a minute and mocha's 20 s timeout: a waiter served only when the lease ran out fails.
    it('returns a release; a waiter is woken by it, first come first served, never more than the limit held', async () => {
      const l = await limiter(2);
      let tries = 0;
      l.observe({ decision: () => tries++ });
      const holders = [await l.acquire('calls', 'provider'), await l.acquire('calls', 'provider')];
      expect(holders.map((h) => [h.allowed, typeof h.release])).to.deep.equal([
        [true, 'function'],
        [true, 'function'],
      ]);
      expect(Object.keys(holders[0] as object), 'release is not copied by a spread or JSON').not.to.include(
        'release',
      );
      const order: number[] = [];
      const sleeping = nextDenial(l);
      const waiting = Array.from({ length: 100 }, (_, i) =>
        l.acquire('calls', 'provider').then((turn) => {
          order.push(i);
          return turn;
        }),
      );
      await sleeping;
      expect((await l.status('calls', 'provider')).count).to.equal(2);
      // Each release hands its slot to the next waiter; each admitted waiter releases in turn.
      await (holders[0] as Acquired).release();
      await (holders[0] as Acquired).release();
      const first = (await waiting[0]) as Acquired;
      expect((await l.status('calls', 'provider')).count, 'a second release freed nothing more').to.equal(2);
      await (holders[1] as Acquired).release();
      await first.release();
      for (const turn of waiting.slice(1)) await (await turn).release();
      expect(order).to.deep.equal(Array.from({ length: 100 }, (_, i) => i));
      expect((await l.status('calls', 'provider')).count).to.equal(0);
      // No stampede: a release wakes the head of the queue only (and, on Redis, its own announcement
      // may wake the next head once more), never every waiter.
      expect(tries, 'store tries').to.be.at.most(2 + 3 * 101);
    });

    /**
     * Two stores on the same state, as two processes would have: one memory store, one Redis prefix, or
     * one PostgreSQL schema (each store with a pool of its own).
     */
    async function sharedStores(): Promise<[Store, Store]> {
      if (stores.name === 'memory') {
        const shared = unclosable(await stores.makeStore(Date.now));
        return [shared, shared];
      }
      if (stores.name === 'postgres') {
        const server = await getPostgres();
        const schema = `rkq${randomBytes(5).toString('hex')}`;
        const store = () => {
          const pool = server.pool({ max: 4 });
          clients.push({ disconnect: () => void pool.end() });
          return new PostgresStore({ pool, schema });
        };
        return [store(), store()];
      }
      const server = await getRedis();
      const prefix = `rkq${randomBytes(5).toString('hex')}`;
      const store = () => {
        const client = server.client();
        clients.push(client);
        return new RedisStore({ client, prefix });
      };
      return [store(), store()];
    }

    it('wakes a waiter of another limiter on the same store (another process on Redis) when a slot frees', async () => {
      const [mine, theirs] = await sharedStores();
      const holder = await limiter(1, mine);
      const waiter = await limiter(1, theirs);
      const slot = await holder.check({ method: 'GET', path: '/', headers: {}, user: 'provider' });
      expect(slot.allowed).to.equal(true);
      const denied = nextDenial(waiter);
      const turn = waiter.acquire('calls', 'provider');
      await denied;
      await holder.release(slot);
      expect((await turn).allowed).to.equal(true);
      expect((await holder.status('calls', 'provider')).count).to.equal(1);
      // A reset frees every slot of the key: waiters of the other limiter are woken by it too.
      const sleeping = nextDenial(waiter);
      const next = waiter.acquire('calls', 'provider');
      await sleeping;
      await holder.reset('calls', 'provider');
      const after = await next;
      expect(after.allowed).to.equal(true);
      await after.release();
      await (await turn).release();
      expect((await holder.status('calls', 'provider')).count).to.equal(0);
    });

    it('waits up to maxWait for a slot (a release may come any time), then refuses, the slot staying with its holder', async () => {
      const l = await limiter(1);
      const held = await l.acquire('calls', 'k');
      const before = timers();
      const refused = await settleOf(l.acquire('calls', 'k', { maxWait: '30ms' }));
      expect(refused).to.be.instanceOf(RateLimitExceededError);
      expect((refused as RateLimitExceededError).decision.rule).to.equal('calls');
      expect(
        await settleOf(l.acquire('calls', 'k', { maxWait: 0 })),
        'maxWait 0: only a free slot',
      ).to.be.instanceOf(RateLimitExceededError);
      expect((await l.status('calls', 'k')).count).to.equal(1);
      // A waiter with a long maxWait, and one behind it with a short one: the short one is refused when its
      // time is up, the long one still gets the slot when it frees.
      const sleeping = nextDenial(l);
      const patient = l.acquire('calls', 'k', { maxWait: '1h' });
      const hasty = settleOf(l.acquire('calls', 'k', { maxWait: '30ms' }));
      await sleeping;
      expect(await hasty).to.be.instanceOf(RateLimitExceededError);
      await held.release();
      await (await patient).release();
      expect(timers(), 'no timer left behind').to.equal(before);
    });

    it('an aborted waiter leaves at once; the slot goes to the next; maxQueue bounds the waiters of a key', async () => {
      const l = await limiter(1);
      const held = await l.acquire('calls', 'k');
      const controllers = [new AbortController(), new AbortController()];
      const sleeping = nextDenial(l);
      const aborted = controllers.map((c) =>
        settleOf(l.acquire('calls', 'k', { signal: c.signal, maxQueue: 3 })),
      );
      const third = l.acquire('calls', 'k', { maxQueue: 3 });
      const full = await settleOf(l.acquire('calls', 'k', { maxQueue: 3 }));
      expect((full as RateLimitRequestError).code).to.equal('ERR_QUEUE_FULL');
      await sleeping;
      for (const c of controllers) c.abort();
      for (const a of await Promise.all(aborted)) expect((a as Error).name).to.equal('AbortError');
      expect((await l.status('calls', 'k')).count, 'the aborted calls took nothing').to.equal(1);
      await held.release();
      const turn = await third;
      expect(turn.allowed).to.equal(true);
      expect((await l.status('calls', 'k')).count).to.equal(1);
      await turn.release();
      await turn.release();
      expect((await l.status('calls', 'k')).count).to.equal(0);
    });

    it('a holder that never releases: its slot lapses after the lease and a waiter gets it; its late release frees nothing', async () => {
      const [mine, theirs] = await sharedStores();
      const rule: Rule = {
        name: 'short',
        key: 'user',
        limit: 1,
        window: { type: 'concurrency', lease: '1s' },
      };
      const gone = createLimiter({ ...PATIENT, store: mine, rules: [rule] });
      const stuck = await gone.acquire('short', 'k');
      // Its process "dies": no more renewals (the store stays open for the others).
      await gone.close();
      const l = createLimiter({ ...PATIENT, store: theirs, rules: [rule] });
      limiters.push(l);
      // Woken when the soonest lease ends, at most a second from now, not by a release.
      const turn = await l.acquire('short', 'k');
      expect(turn.allowed).to.equal(true);
      await stuck.release();
      await l.release(stuck);
      expect(
        (await l.status('short', 'k')).count,
        'the late release freed nothing of the new holder',
      ).to.equal(1);
      await turn.release();
      expect((await l.status('short', 'k')).count).to.equal(0);
    });

    it("waits on a concurrency rule and a window together: the window's retry time first, then a free slot", async () => {
      const l = await limiter(1, undefined, [
        { name: 'burst', key: 'user', limit: 2, window: { type: 'sliding-log', size: '200ms' } },
      ]);
      const a = await l.acquire(['calls', 'burst'], 'k');
      const sleeping = nextDenial(l);
      const b = l.acquire(['calls', 'burst'], 'k');
      await sleeping;
      await a.release();
      const second = await b;
      // Two admitted within the burst window: a third waits for it, then for the slot.
      const third = l.acquire(['calls', 'burst'], 'k', { maxWait: '1h' });
      const refused = await settleOf(l.acquire(['calls', 'burst'], 'k', { maxWait: 0 }));
      expect(
        (refused as RateLimitExceededError).decision.rules.map((r) => [r.rule, r.allowed]),
      ).to.deep.equal([
        ['calls', false],
        ['burst', false],
      ]);
      await second.release();
      expect((await third).allowed).to.equal(true);
      await (await third).release();
    });
  });
}
