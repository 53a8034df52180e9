// Wirings that could switch limits off without a word, on one framework and one store: a login answering with
// redirects, the body parser after the limiter, a mount prefix, a URL rewrite and a method override after it,
// a client already gone; and templates whose parts could be shifted into one another.
import { expect } from 'chai';
import {
  createLimiter,
  type Limiter,
  loginRules,
  RateLimitConfigError,
  REDIRECT_OUTCOME_WARNING,
  type Rule,
  UNMATCHED_ROUTE_WARNING,
  UNPARSED_BODY_WARNING,
} from '../../../src/index.js';
import { type BypassFramework, held, type Wiring } from '../../fixtures/bypass-apps.js';
import { json, recordWarnings, send, serve } from '../../fixtures/bypass-client.js';
import { PATIENT, trackStore } from '../../support/settle.js';
import type { StoreFactory } from '../../support/stores.js';

const form = (body: string) => ({ headers: { 'content-type': 'application/x-www-form-urlencoded' }, body });
const minute = { type: 'fixed', size: '1m' } as const;

export function wiringSuite(framework: BypassFramework, stores: StoreFactory): void {
  describe(`${framework.name} on the ${stores.name} store: wirings that turned limits off`, function () {
    this.timeout(60_000);
    const cleanup: Array<() => unknown> = [];
    let warnings: ReturnType<typeof recordWarnings>;
    /** What settle() waits for: the test's servers' responses, then its stores' calls. */
    let waits: Array<() => Promise<void>> = [];
    beforeEach(() => {
      warnings = recordWarnings();
      waits = [];
    });
    afterEach(async () => {
      warnings.stop();
      for (const step of cleanup.splice(0).reverse()) await step();
    });

    async function limiterOf(rules: Rule[]): Promise<Limiter> {
      const tracked = trackStore(await stores.makeStore(Date.now));
      const limiter = createLimiter({ ...PATIENT, store: tracked.store, rules });
      cleanup.push(() => limiter.close());
      waits.push(tracked.idle);
      return limiter;
    }
    async function start(listener: Parameters<typeof serve>[0]) {
      const server = await serve(listener);
      cleanup.push(server.close);
      waits.unshift(server.responsesClosed);
      return server;
    }
    /** Waits for the outcomes of the requests answered so far to reach the store. */
    const settle = async () => {
      for (const wait of waits) await wait();
    };

    describe('a login that answers with redirects (Passport failureRedirect)', () => {
      const rules = loginRules({ match: 'POST /login', username: 'body.username' });
      const attempt = (server: { port: number }, password: string) =>
        send(server, 'POST', '/login', form(`username=alice&password=${password}`));

      it('counts each redirected attempt (neither success nor failure): the pair locks after 5, with one warning', async () => {
        const limiter = await limiterOf(rules);
        const server = await start(framework.redirectLogin(limiter, false));
        const statuses: Array<number | undefined> = [];
        for (let i = 0; i < 7; i++) {
          statuses.push((await attempt(server, i === 3 ? 'correct-horse' : 'hunter2'))?.status);
          await settle();
        }
        expect(statuses).to.deep.equal([302, 302, 302, 302, 302, 429, 429]);
        const seen = await warnings.of(REDIRECT_OUTCOME_WARNING);
        expect(seen).to.have.length(1);
        expect(seen[0]).to.match(
          /redirect \(302\).*stays counted and nothing is reset.*limiter\.report.*isFailure/,
        );
      });

      it('the README pattern, reporting before redirecting: failures count, a success clears the pair, no warning', async () => {
        const limiter = await limiterOf(rules);
        const server = await start(framework.redirectLogin(limiter, true));
        const statuses: Array<number | undefined> = [];
        for (const password of ['a', 'b', 'c', 'd', 'correct-horse', 'e', 'f', 'g', 'h', 'i', 'j'])
          statuses.push((await attempt(server, password))?.status);
        expect(statuses).to.deep.equal([302, 302, 302, 302, 302, 302, 302, 302, 302, 302, 429]);
        expect(await warnings.of(REDIRECT_OUTCOME_WARNING)).to.deep.equal([]);
      });
    });

    const wired = async (wiring: Wiring | 'login', rules: Rule[]) =>
      start(framework.wired(wiring, await limiterOf(rules)));

    it('never runs the handler of a client gone before or during the decision; what was decided stays counted', async () => {
      const rules: Rule[] = [
        {
          name: 'sms',
          match: 'POST /sms',
          // Destroys the socket while the limiter decides, as a reset arriving during a store round trip.
          key: (req) => {
            if (req.headers['x-reset'] === 'during') held.socket?.destroy();
            return 'all';
          },
          limit: 10,
          window: minute,
        },
      ];
      const limiter = await limiterOf(rules);
      const server = await start(framework.wired('gone', limiter));
      held.handled = 0;
      const post = (reset?: string) =>
        send(server, 'POST', '/sms', json({}, reset === undefined ? {} : { 'x-reset': reset }));
      expect(await post('before')).to.equal(undefined);
      expect(await post('during')).to.equal(undefined);
      expect((await post())?.status).to.equal(200);
      expect(held.handled, 'handlers run').to.equal(1);
      expect((await limiter.status('sms', 'all')).count, 'before: not decided; during: counted').to.equal(2);
    });

    it('warns once, naming the rule, when the body parser comes after the limiter', async () => {
      const server = await wired('body-after', [
        { name: 'sms-minute', key: 'body.phone', limit: 1, window: minute },
      ]);
      for (let i = 0; i < 3; i++) await send(server, 'POST', '/sms', json({ phone: '+447800000000' }));
      const seen = await warnings.of(UNPARSED_BODY_WARNING);
      expect(seen).to.have.length(1);
      expect(seen[0]).to.match(
        /rule "sms-minute": keys on 'body\.phone'.*body was not parsed.*before the rate limiter/,
      );
    });

    it('limits by the body when the parser comes first, without a warning', async () => {
      const server = await wired('login', [
        { name: 'sms-minute', key: 'body.phone', limit: 1, window: minute },
      ]);
      const statuses: Array<number | undefined> = [];
      for (let i = 0; i < 2; i++)
        statuses.push((await send(server, 'POST', '/sms', json({ phone: '+447800000000' })))?.status);
      expect(statuses).to.deep.equal([200, 429]);
      expect(await warnings.of(UNPARSED_BODY_WARNING)).to.deep.equal([]);
    });

    const cases: Array<[Wiring, string, Rule, (server: { port: number }) => Promise<unknown>, RegExp]> = [
      [
        'mounted',
        'a mount prefix the rules leave out',
        { name: 'items', match: 'GET /items', key: 'ip', limit: 1, window: minute },
        (server) => send(server, 'GET', '/api/items'),
        /rule "items" matches GET \/items, .* reached the rate limiter as GET \/api\/items.*write rule paths as full URLs/,
      ],
      [
        'rewritten',
        'a URL rewrite after the limiter',
        { name: 'sms', match: 'POST /sms', key: 'ip', limit: 1, window: minute },
        (server) => send(server, 'POST', '/v1/sms', json({})),
        /rule "sms" matches POST \/sms, .* as POST \/v1\/sms.*put it before the rate limiter/,
      ],
      [
        'override',
        'a method override after the limiter',
        { name: 'delete', match: 'DELETE /items/:id', key: 'ip', limit: 1, window: minute },
        (server) => send(server, 'POST', '/items/7', { headers: { 'x-http-method-override': 'DELETE' } }),
        /rule "delete" matches DELETE \/items\/7, .* as POST \/items\/7.*method override before it/,
      ],
    ];
    for (const [wiring, label, rule, request, message] of cases) {
      if (!framework.wirings.includes(wiring)) continue; // cannot be wired so (see BypassFramework.wirings)
      it(`warns once when ${label} hides requests from a rule`, async () => {
        const server = await wired(wiring, [rule]);
        for (let i = 0; i < 3; i++) await request(server);
        const seen = await warnings.of(UNMATCHED_ROUTE_WARNING);
        expect(seen).to.have.length(1);
        expect(seen[0]).to.match(message);
      });
    }

    it('says nothing when the rules match the full URL the app routes', async () => {
      const server = await wired('login', [
        { name: 'items', match: 'GET /api/items', key: 'ip', limit: 5, window: minute },
        { name: 'sms', match: 'POST /sms', key: 'ip', limit: 5, window: minute },
      ]);
      await send(server, 'GET', '/api/items');
      await send(server, 'DELETE', '/items/7');
      await send(server, 'POST', '/login', json({ username: 'a' }));
      expect(await warnings.of(UNMATCHED_ROUTE_WARNING)).to.deep.equal([]);
    });

    it('refuses a template whose parts could be shifted into one another, before any request', () => {
      const apps = (key: string) =>
        framework.wired('login', createLimiter({ rules: [{ name: 't', key, limit: 1, window: minute }] }));
      expect(() => apps('{body.org}{body.user}')).to.throw(RateLimitConfigError, /no separator between them/);
      expect(() => apps('{body.org}x{body.user}')).to.throw(
        RateLimitConfigError,
        /no separator between them/,
      );
    });
  });
  if (framework.routePrefixed !== undefined)
    routePrefixSuite(framework.name, framework.routePrefixed, stores);
}

/**
 * Rules given to one route that the app mounts under a prefix (a router, a register prefix, app.route,
 * setGlobalPrefix), written as the route's own code names it: they apply to that route.
 */
export function routePrefixSuite(
  name: string,
  build: (limiter: Limiter) => Parameters<typeof serve>[0],
  stores: StoreFactory,
): void {
  describe(`${name} on the ${stores.name} store: rules given to a route under a prefix`, function () {
    this.timeout(60_000);
    const cleanup: Array<() => unknown> = [];
    let warnings: ReturnType<typeof recordWarnings>;
    beforeEach(() => {
      warnings = recordWarnings();
    });
    afterEach(async () => {
      warnings.stop();
      for (const step of cleanup.splice(0).reverse()) await step();
    });
    async function served(rules: Rule[]) {
      const limiter = createLimiter({ store: await stores.makeStore(Date.now), rules });
      const server = await serve(build(limiter));
      cleanup.push(() => limiter.close(), server.close);
      return server;
    }
    const guess = (server: { port: number }) =>
      send(server, 'POST', '/api/login', json({ username: 'alice', password: 'x' }));

    it("applies a route's rules written without the prefix: 5 of 20 guesses reach the handler", async () => {
      const server = await served([
        { name: 'login', match: 'POST /login', key: 'body.username', limit: 5, window: minute },
      ]);
      const statuses: Array<number | undefined> = [];
      for (let i = 0; i < 20; i++) statuses.push((await guess(server))?.status);
      expect(
        statuses.filter((s) => s === 401),
        'reached the handler',
      ).to.have.length(5);
      expect(statuses.slice(5).every((s) => s === 429)).to.equal(true);
      expect(await warnings.of(UNMATCHED_ROUTE_WARNING)).to.deep.equal([]);
    });

    it('limits the spellings the router decodes to that route (/api/%6Cogin): 5 of 20 reach the handler', async () => {
      const server = await served([
        { name: 'login', match: 'POST /login', key: 'body.username', limit: 5, window: minute },
      ]);
      const statuses: Array<number | undefined> = [];
      for (let i = 0; i < 20; i++) {
        const path = ['/api/%6Cogin', '/api/l%6Fgin', '/api/login'][i % 3] as string;
        statuses.push((await send(server, 'POST', path, json({ username: 'alice', password: 'x' })))?.status);
      }
      // 404: a framework that routes the escaped spelling nowhere (Express).
      expect(statuses.filter((s) => s === 401).length, 'reached the handler').to.equal(5);
      expect(statuses.filter((s) => s !== 401 && s !== 404 && s !== 429)).to.deep.equal([]);
    });

    it("warns once when none of a route's rules can match its path", async () => {
      const server = await served([
        { name: 'signin', match: 'POST /signin', key: 'body.username', limit: 5, window: minute },
      ]);
      for (let i = 0; i < 3; i++) expect((await guess(server))?.status).to.equal(401);
      const seen = await warnings.of(UNMATCHED_ROUTE_WARNING);
      expect(seen).to.have.length(1);
      expect(seen[0]).to.match(/attached to the route of POST \/api\/login has no rule whose match accepts/);
    });
  });
}
