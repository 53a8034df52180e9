// Client addresses on a Unix domain socket, whose peer has no address: behind a proxy the framework's
// setting trusts, each client is keyed by the X-Forwarded-For entry that setting believes; with no setting,
// no entry is believed and every client shares one bucket per rule. Real servers listening on socket paths.
import { randomBytes } from 'node:crypto';
import { rmSync } from 'node:fs';
import type { RequestListener } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { expect } from 'chai';
import { createLimiter, type Limiter, type Rule } from '../../../src/index.js';
import { recordWarnings, send, serve } from '../../fixtures/bypass-client.js';

/**
 * How the app trusts its proxy: `'hops'` one proxy by count (Express `trust proxy` 1, Koa `maxIpsCount`
 * 1, Fastify and Hono `trustProxy: 1`), `'loopback'` by address, `'none'` the framework's default.
 */
export type SocketTrust = 'hops' | 'loopback' | 'none';

export interface UnixSocketFramework {
  name: string;
  /** The settings this framework has, each named in its own words for the test's title. */
  settings: Partial<Record<SocketTrust, string>>;
  /** An app whose GET / is limited by `limiter`, trusting its proxy as `trust` says. */
  app(trust: SocketTrust, limiter: Limiter): Promise<{ listener: RequestListener; close(): Promise<void> }>;
}

const LIMIT = 3;
const rule: Rule = { name: 'per-client', key: 'ip', limit: LIMIT, window: { type: 'fixed', size: '1h' } };
const A = '203.0.113.1';
const B = '203.0.113.2';

export function unixSocketSuite(framework: UnixSocketFramework): void {
  describe(`${framework.name} on a Unix domain socket`, function () {
    this.timeout(60_000);
    const cleanup: Array<() => unknown> = [];
    afterEach(async () => {
      for (const step of cleanup.splice(0).reverse()) await step();
    });

    async function listening(trust: SocketTrust) {
      const path = join(tmpdir(), `rk-${randomBytes(6).toString('hex')}.sock`);
      const limiter = createLimiter({ rules: [rule] });
      const app = await framework.app(trust, limiter);
      const server = await serve(app.listener, path);
      cleanup.push(
        () => rmSync(path, { force: true }),
        () => limiter.close(),
        () => app.close(),
        server.close,
      );
      const get = async (forwarded?: string) => {
        const headers = forwarded === undefined ? {} : { 'x-forwarded-for': forwarded };
        return (await send({ socketPath: path }, 'GET', '/', { headers }))?.status;
      };
      const count = async (key: string) => (await limiter.status(rule.name, key)).count;
      return { get, count };
    }

    for (const trust of ['hops', 'loopback'] as const) {
      const setting = framework.settings[trust];
      if (setting === undefined) continue;
      it(`behind a proxy it trusts (${setting}), keys each client by the entry the proxy appended`, async () => {
        const app = await listening(trust);
        const a: Array<number | undefined> = [];
        for (let i = 0; i <= LIMIT; i++) a.push(await app.get(A));
        expect(a, 'client A').to.deep.equal([200, 200, 200, 429]);
        expect(await app.get(B), 'client B, on its first request').to.equal(200);
        // A client's own entries come first; the proxy appends the address it saw, which is the one read.
        expect(await app.get(`${B}, ${A}`), 'A, claiming to be B').to.equal(429);
        expect(await app.count(A)).to.equal(LIMIT);
        expect(await app.count(B)).to.equal(1);
        expect(await app.count('#unresolved-ip')).to.equal(0);
        // No entry at all: no client address, so the one shared bucket (never a bucket per request).
        expect(await app.get()).to.equal(200);
        expect(await app.count('#unresolved-ip')).to.equal(1);
      });
    }

    it(`trusting no proxy (${framework.settings.none}), believes no entry: every client shares one bucket`, async () => {
      const warnings = recordWarnings();
      cleanup.push(warnings.stop);
      const app = await listening('none');
      const a: Array<number | undefined> = [];
      for (let i = 0; i <= LIMIT; i++) a.push(await app.get(A));
      expect(a, 'client A').to.deep.equal([200, 200, 200, 429]);
      expect(await app.get(B), 'client B').to.equal(429);
      expect(await app.count('#unresolved-ip')).to.equal(LIMIT);
      expect(await app.count(A)).to.equal(0);
    });
  });
}
