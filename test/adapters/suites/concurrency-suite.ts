// Concurrency rules through one framework's app: a slot is held while the handler works, also after its client
// went (an attacker opening and aborting requests never gets more handlers than the limit), and freed when the
// response ends. Run by test/concurrency/frameworks.test.ts for each framework and by nest-concurrency.ts for each Nest platform.
import { once } from 'node:events';
import { createServer, request, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { expect } from 'chai';
import { createLimiter, type Limiter } from '../../../src/index.js';
import { until } from '../../support/settle.js';

/** One handler at a time per client address. */
export const ONE = { name: 'one', key: 'ip', limit: 1, window: { type: 'concurrency' } } as const;

export type Listener = Parameters<typeof createServer>[1];

/**
 * Builds the app under test: its one route (GET /) runs the limiter's rules, awaits `work()`, then answers
 * 200 "done".
 */
export type ConcurrencyApp = (limiter: Limiter, work: () => Promise<void>) => Promise<Listener>;

/** The handler: tells that it started, then works until the test lets it answer. */
interface Gate {
  entered: Promise<void>;
  open(): void;
  work(): Promise<void>;
}
function gate(): Gate {
  let enter = () => {};
  let open = () => {};
  const entered = new Promise<void>((resolve) => {
    enter = resolve;
  });
  const opened = new Promise<void>((resolve) => {
    open = resolve;
  });
  return {
    entered,
    open: () => open(),
    work: () => {
      enter();
      return opened;
    },
  };
}

/** A GET whose status comes back, or which the test aborts. */
function get(server: Server): { status: Promise<number>; abort(): void } {
  const { port } = server.address() as AddressInfo;
  const req = request({ port, path: '/', agent: false });
  const status = new Promise<number>((resolve, reject) => {
    req.once('response', (res) => {
      res.resume();
      resolve(res.statusCode ?? 0);
    });
    req.once('error', reject);
  });
  status.catch(() => {});
  req.end();
  return { status, abort: () => req.destroy() };
}

/** The handler-slot cases under `title`, against the app that `make` builds for each case. */
export function concurrencySuite(title: string, make: ConcurrencyApp): void {
  describe(title, () => {
    let server: Server;
    let limiter: Limiter;
    let gates: Gate[];
    beforeEach(async () => {
      limiter = createLimiter({ rules: [ONE] });
      gates = [];
      server = createServer(await make(limiter, () => (gates[gates.push(gate()) - 1] as Gate).work()));
      server.listen(0, '127.0.0.1');
      await once(server, 'listening');
    });
    afterEach(async () => {
      for (const g of gates) g.open();
      server.closeAllConnections();
      server.close();
      await limiter.close();
    });
    const held = async () => (await limiter.status('one', '127.0.0.1')).count;

    it('holds the slot while the handler works, frees it when the response ends', async () => {
      const first = get(server);
      await until('the handler started', () => gates.length === 1);
      await gates[0]?.entered;
      expect(await get(server).status).to.equal(429);
      gates[0]?.open();
      expect(await first.status).to.equal(200);
      await until('the slot is released', async () => (await held()) === 0);
      const again = get(server);
      await until('the next handler started', () => gates.length === 2);
      gates[1]?.open();
      expect(await again.status).to.equal(200);
    });

    it('a client that goes frees nothing while its handler works; the handler finishing frees it', async () => {
      const first = get(server);
      await until('the handler started', () => gates.length === 1);
      await gates[0]?.entered;
      first.abort();
      // The connection is gone; the handler is still working: the next request is refused.
      expect(await get(server).status).to.equal(429);
      expect(await held()).to.equal(1);
      gates[0]?.open();
      await until('the slot is released', async () => (await held()) === 0);
      const again = get(server);
      await until('the next handler started', () => gates.length === 2);
      gates[1]?.open();
      expect(await again.status).to.equal(200);
    });
  });
}
