// Concurrency rules under the Nest guard: over HTTP (Express and Fastify platform) a slot is held while the
// handler works, also after its client went, and freed when the response ends; a WebSocket message's slot
// (a guard sees no end of a gateway's handler) is held for the rule's lease, then freed. Legacy decorators.
import { once } from 'node:events';
import { createServer, request, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Controller, Get, UseGuards } from '@nestjs/common';
import { WsAdapter } from '@nestjs/platform-ws';
import { Test } from '@nestjs/testing';
import { MessageBody, SubscribeMessage, WebSocketGateway } from '@nestjs/websockets';
import { expect } from 'chai';
import WebSocket from 'ws';
import { RateLimitGuard } from '../../../adapters/nest.js';
import type { NestPlatform } from '../../../examples/nest-app.js';
import { createLimiter, type Limiter } from '../../../src/index.js';
import { until } from '../../support/settle.js';
import type { StoreFactory } from '../../support/stores.js';
import { testingApp } from './nest-harness.js';

/** One handler at a time per client address. */
const ONE = { name: 'one', key: 'ip', limit: 1, window: { type: 'concurrency' } } as const;

/** A handler's work: `entered` once it started, it finishes when the test calls `open`. */
function gate() {
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

export function nestConcurrencySuite(platform: NestPlatform): void {
  describe(`concurrency rules under the Nest guard (${platform})`, () => {
    let server: Server;
    let limiter: Limiter;
    let gates: Array<ReturnType<typeof gate>>;
    beforeEach(async () => {
      limiter = createLimiter({ rules: [ONE] });
      gates = [];
      const work = () => (gates[gates.push(gate()) - 1] as ReturnType<typeof gate>).work();
      @Controller()
      @UseGuards(new RateLimitGuard(limiter))
      class WorkController {
        @Get()
        async run(): Promise<string> {
          await work();
          return 'done';
        }
      }
      const { listener, app } = testingApp(platform, { controllers: [WorkController] }, () => {});
      await app;
      server = createServer(listener).listen(0, '127.0.0.1');
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

export function nestWsConcurrencySuite(stores: StoreFactory): void {
  describe(`concurrency rules on Nest WebSocket messages, ${stores.name} store`, function () {
    this.timeout(30_000);
    it('a message holds its slot for the lease, not for ever: 2 of 5 handled, then 2 more once the lease ran out', async () => {
      const limiter = createLimiter({
        store: await stores.makeStore(Date.now),
        rules: [
          {
            name: 'ws-slots',
            match: { method: 'WS', path: '/job' },
            key: 'ip',
            limit: 2,
            window: { type: 'concurrency', lease: '1s' },
          },
        ],
      });
      let handled = 0;
      @WebSocketGateway()
      @UseGuards(new RateLimitGuard(limiter))
      class JobGateway {
        @SubscribeMessage('job')
        job(@MessageBody() data: number) {
          handled++;
          return { event: 'done', data };
        }
      }
      const ref = await Test.createTestingModule({ providers: [JobGateway] }).compile();
      const app = ref.createNestApplication({ logger: false });
      app.useWebSocketAdapter(new WsAdapter(app));
      await app.listen(0, '127.0.0.1');
      const port = (app.getHttpServer().address() as AddressInfo).port;
      const socket = new WebSocket(`ws://127.0.0.1:${port}`);
      await new Promise((resolve, reject) => socket.once('open', resolve).once('error', reject));
      const replies: string[] = [];
      let expected = 0;
      let done = () => {};
      socket.on('message', (raw) => {
        replies.push((JSON.parse(String(raw)) as { event: string }).event);
        if (replies.length === expected) done();
      });
      const send = async (count: number) => {
        expected += count;
        const all = new Promise<void>((resolve) => {
          done = resolve;
        });
        for (let i = 0; i < count; i++) socket.send(JSON.stringify({ event: 'job', data: i }));
        await all;
      };
      try {
        await send(5);
        expect(handled).to.equal(2);
        expect(replies.filter((r) => r === 'exception')).to.have.length(3);
        // Held for the lease (a guard sees no end of the handler), then freed: never held for ever.
        await until(
          'the slots are freed',
          async () => (await limiter.status('ws-slots', '127.0.0.1')).count === 0,
        );
        await send(2);
        expect(handled).to.equal(4);
      } finally {
        socket.close();
        await app.close();
        await limiter.close();
      }
    });
  });
}
