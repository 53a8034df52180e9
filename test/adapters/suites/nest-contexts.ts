// The guard beyond HTTP: a GraphQL resolver (Apollo driver, Express platform) and a WebSocket gateway
// (@nestjs/platform-ws), each limited, on the memory store and on a real Redis.
import type { AddressInfo } from 'node:net';
import { ApolloDriver, type ApolloDriverConfig } from '@nestjs/apollo';
import { type INestApplication, UseGuards } from '@nestjs/common';
import { Args, GraphQLModule, Mutation, Query, Resolver } from '@nestjs/graphql';
import { WsAdapter } from '@nestjs/platform-ws';
import { Test } from '@nestjs/testing';
import { MessageBody, SubscribeMessage, WebSocketGateway } from '@nestjs/websockets';
import { expect } from 'chai';
import request from 'supertest';
import WebSocket from 'ws';
import { RateLimit, RateLimitGuard } from '../../../adapters/nest.js';
import { createLimiter, type Limiter, type Rule } from '../../../src/index.js';
import type { StoreFactory } from '../../support/stores.js';

const minute = { type: 'fixed', size: '1m' } as const;
const TYPE_DEFS = `
  type Query { hello: String }
  type Mutation { login(username: String!, password: String!): Boolean }
`;

function graphqlModule(limiter: Limiter, calls: { login: number }) {
  @Resolver()
  class LoginResolver {
    @Query()
    hello() {
      return 'hi';
    }

    @Mutation()
    @RateLimit(limiter)
    login(@Args('username') _username: string, @Args('password') _password: string) {
      calls.login++;
      return false;
    }
  }
  return {
    imports: [
      GraphQLModule.forRoot<ApolloDriverConfig>({
        driver: ApolloDriver,
        typeDefs: TYPE_DEFS,
        context: ({ req, res }: { req: unknown; res: unknown }) => ({ req, res }),
      }),
    ],
    providers: [LoginResolver],
  };
}

/** Counts what happened to the messages, and resolves `settled` once `expected` of them were handled or refused. */
function tally(expected: number) {
  let resolve: () => void = () => {};
  const settled = new Promise<void>((r) => {
    resolve = r;
  });
  const counts = { handled: 0, refused: 0 };
  const step = (kind: 'handled' | 'refused') => {
    counts[kind]++;
    if (counts.handled + counts.refused === expected) resolve();
  };
  return { counts, settled, step };
}

function gatewayModule(limiter: Limiter, seen: ReturnType<typeof tally>) {
  @WebSocketGateway()
  @UseGuards(new RateLimitGuard(limiter, { onLimited: () => seen.step('refused') }))
  class CodeGateway {
    @SubscribeMessage('code')
    code(@MessageBody() data: { phone?: string }) {
      seen.step('handled');
      return { event: 'sent', data: data.phone };
    }
  }
  return { providers: [CodeGateway] };
}

async function start(module: object, ws = false): Promise<INestApplication> {
  const ref = await Test.createTestingModule(module).compile();
  const app = ref.createNestApplication({ logger: false });
  if (ws) app.useWebSocketAdapter(new WsAdapter(app));
  await app.listen(0, '127.0.0.1');
  return app;
}

export function nestContextSuite(stores: StoreFactory): void {
  describe(`NestJS guard beyond HTTP, on the ${stores.name} store`, function () {
    this.timeout(60_000);
    const open: Array<() => Promise<unknown>> = [];
    afterEach(async () => {
      for (const close of open.splice(0).reverse()) await close();
    });
    async function limiterOf(rules: Rule[]): Promise<Limiter> {
      const limiter = createLimiter({ store: await stores.makeStore(Date.now), rules });
      open.push(() => limiter.close());
      return limiter;
    }

    it('limits a GraphQL mutation per resolver call: 5 of 20 guesses, aliases in one request counted one by one', async () => {
      const limiter = await limiterOf([{ name: 'gql-login', key: 'ip', limit: 5, window: minute }]);
      const calls = { login: 0 };
      const app = await start(graphqlModule(limiter, calls));
      open.push(() => app.close());
      const mutation = (n: number) =>
        `mutation { ${Array.from({ length: n }, (_, i) => `a${i}: login(username: "alice", password: "x${i}")`).join(' ')} }`;
      const server = app.getHttpServer();
      const one = await request(server)
        .post('/graphql')
        .send({ query: mutation(1) });
      expect(one.status).to.equal(200);
      expect(one.body.data).to.deep.equal({ a0: false });
      const batch = await request(server)
        .post('/graphql')
        .send({ query: mutation(19) });
      expect(calls.login, 'reached the resolver').to.equal(5);
      const errors = (batch.body.errors ?? []) as Array<{
        message: string;
        extensions?: { status?: number };
      }>;
      expect(errors).to.have.length(15);
      expect(errors[0]?.message).to.equal('Too Many Requests');
      expect((await limiter.status('gql-login', '127.0.0.1')).count).to.equal(5);
      const query = await request(server).post('/graphql').send({ query: '{ hello }' });
      expect(query.body.data).to.deep.equal({ hello: 'hi' });
    });

    it('limits WebSocket messages by the client address: 3 of 10 codes sent', async () => {
      const limiter = await limiterOf([
        { name: 'ws-code', match: { method: 'WS', path: '/code' }, key: 'ip', limit: 3, window: minute },
      ]);
      const seen = tally(10);
      const app = await start(gatewayModule(limiter, seen), true);
      open.push(() => app.close());
      const port = (app.getHttpServer().address() as AddressInfo).port;
      const socket = new WebSocket(`ws://127.0.0.1:${port}`);
      await new Promise((resolve, reject) => socket.once('open', resolve).once('error', reject));
      const replies: Array<{ event: string; data: unknown }> = [];
      const allReplies = new Promise<void>((resolve) =>
        socket.on('message', (raw) => {
          replies.push(JSON.parse(String(raw)) as { event: string; data: unknown });
          if (replies.length === 10) resolve();
        }),
      );
      for (let i = 0; i < 10; i++)
        socket.send(JSON.stringify({ event: 'code', data: { phone: `+44770090010${i}` } }));
      await seen.settled;
      await allReplies;
      socket.close();
      expect(seen.counts).to.deep.equal({ handled: 3, refused: 7 });
      const sent = replies.filter((r) => r.event === 'sent').map((r) => r.data);
      expect(sent).to.have.members(['+447700900100', '+447700900101', '+447700900102']);
      const refused = replies.filter((r) => r.event === 'exception').map((r) => r.data);
      expect(refused).to.have.length(7);
      expect(refused[0]).to.deep.equal({ status: 'error', message: 'Too Many Requests', retryAfter: 60 });
      expect((await limiter.status('ws-code', '127.0.0.1')).count).to.equal(3);
    });

    it('refuses a WebSocket message whose key field is an array or an object, naming the field; the handler never runs', async () => {
      const limiter = await limiterOf([
        {
          name: 'ws-phone',
          match: { method: 'WS', path: '/code' },
          key: 'body.phone',
          limit: 3,
          window: minute,
        },
      ]);
      const seen = tally(1);
      const app = await start(gatewayModule(limiter, seen), true);
      open.push(() => app.close());
      const port = (app.getHttpServer().address() as AddressInfo).port;
      const socket = new WebSocket(`ws://127.0.0.1:${port}`);
      await new Promise((resolve, reject) => socket.once('open', resolve).once('error', reject));
      const replies: Array<{ event: string; data: unknown }> = [];
      const allReplies = new Promise<void>((resolve) =>
        socket.on('message', (raw) => {
          replies.push(JSON.parse(String(raw)) as { event: string; data: unknown });
          if (replies.length === 3) resolve();
        }),
      );
      for (const phone of [['+447700900100'], { $ne: '' }, '+447700900100'])
        socket.send(JSON.stringify({ event: 'code', data: { phone } }));
      await seen.settled;
      await allReplies;
      socket.close();
      expect(seen.counts).to.deep.equal({ handled: 1, refused: 0 });
      const refused = replies.filter((r) => r.event === 'exception').map((r) => r.data);
      expect(refused).to.deep.equal(
        Array(2).fill({
          status: 'error',
          statusCode: 400,
          error: 'Bad Request',
          message: 'body.phone must be a string, a number or a boolean',
          field: 'body.phone',
        }),
      );
      expect((await limiter.status('ws-phone', '+447700900100')).count).to.equal(1);
    });
  });
}
