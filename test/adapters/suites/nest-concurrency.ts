// Concurrency rules under the Nest guard: over HTTP (Express and Fastify platform) a slot is held while the
// handler works, also after its client went, and freed when the response ends; a WebSocket message's slot
// (a guard sees no end of a gateway's handler) is held for the rule's lease, then freed. Legacy decorators.
import type { AddressInfo } from 'node:net';
import { Controller, Get, UseGuards } from '@nestjs/common';
import { WsAdapter } from '@nestjs/platform-ws';
import { Test } from '@nestjs/testing';
import { MessageBody, SubscribeMessage, WebSocketGateway } from '@nestjs/websockets';
import { expect } from 'chai';
import WebSocket from 'ws';
import { RateLimitGuard } from '../../../adapters/nest.js';
import type { NestPlatform } from '../../../examples/nest-app.js';
import { createLimiter } from '../../../src/index.js';
import { until } from '../../support/settle.js';
import type { StoreFactory } from '../../support/stores.js';
import { concurrencySuite } from './concurrency-suite.js';
import { testingApp } from './nest-harness.js';

export function nestConcurrencySuite(platform: NestPlatform): void {
  concurrencySuite(`concurrency rules under the Nest guard (${platform})`, async (limiter, work) => {
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
    return listener;
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
