// The work-in-flight recipes of docs/recipes.md, as the example files hold them, through Express with supertest:
// the LLM endpoint (a day's tokens settled from the usage, or from what was streamed when the client went;
// requests per minute), the export endpoint (2 at once per user, 10 an hour) on the memory store and Redis,
// and outbound calls through wrap (50 at once, 500 a minute) on Redis, with hostile clients.
import { request as httpRequest } from 'node:http';
import type { AddressInfo } from 'node:net';
import { expect } from 'chai';
import type { Request } from 'express';
import supertest from 'supertest';
import { createExportApp } from '../../examples/export-endpoint.js';
import { type ChatChunk, type ChatClient, createLlmApp } from '../../examples/llm-endpoint.js';
import { providerClient } from '../../examples/provider-calls.js';
import { RateLimitExceededError } from '../../src/index.js';
import { getRedis } from '../support/redis.js';
import { until } from '../support/settle.js';
import { memoryStores, redisStores } from '../support/stores.js';

const byHeader = (req: Request) => {
  const id = req.get('x-user');
  return id ? { id } : undefined;
};

/** Rejects once `signal` aborts, as a real client's stream does. */
function aborted(signal: AbortSignal): Promise<never> {
  return new Promise((_, reject) => {
    const fail = () => reject(new DOMException('The operation was aborted.', 'AbortError'));
    if (signal.aborted) fail();
    else signal.addEventListener('abort', fail, { once: true });
  });
}

interface Script {
  /** Text chunks streamed. */
  chunks: string[];
  /** The usage chunk's total_tokens (none: no usage chunk). */
  total?: number;
  /** Streams `chunks`, then waits until the client goes (the stream is aborted). */
  hang?: boolean;
}

/** An OpenAI-style client streaming what `next()` scripts; remembers the bodies it was sent. */
function fakeModel(next: () => Script) {
  const sent: Array<{ max_tokens: number; messages: unknown[] }> = [];
  let abortedStreams = 0;
  const client: ChatClient = {
    chat: {
      completions: {
        async create(body, { signal }) {
          sent.push(body);
          const script = next();
          return (async function* (): AsyncGenerator<ChatChunk> {
            for (const content of script.chunks) yield { choices: [{ delta: { content } }] };
            if (script.hang) {
              try {
                await aborted(signal);
              } finally {
                abortedStreams++;
              }
            }
            if (script.total !== undefined)
              yield {
                choices: [],
                usage: { prompt_tokens: 0, completion_tokens: script.total, total_tokens: script.total },
              };
          })();
        },
      },
    },
  };
  return { client, sent, aborts: () => abortedStreams };
}

const chat = (content: string, maxTokens: number) => ({
  messages: [{ role: 'user', content }],
  max_tokens: maxTokens,
});
/** The recipe's estimate of a one-message prompt. */
const promptOf = (content: string) => Math.ceil(content.length / 4) + 4;

for (const stores of [memoryStores, redisStores]) {
  describe(`LLM endpoint recipe (${stores.name})`, () => {
    /** The recipe's app on a fresh store, its model streaming `script` for each request. */
    async function llmApp(script: Script, tokensPerDay: number) {
      const model = fakeModel(() => script);
      const { app, limiter } = createLlmApp({
        store: await stores.makeStore(Date.now),
        openai: model.client,
        authenticate: byHeader,
        tokensPerDay,
      });
      return { model, app, limiter };
    }

    it('reserves prompt + max_tokens on arrival and settles to the usage; a cap past the budget is 429 before the model runs', async () => {
      const { model, app, limiter } = await llmApp({ chunks: ['Hel', 'lo'], total: 120 }, 1000);
      try {
        const first = await supertest(app)
          .post('/v1/chat')
          .set('x-user', 'alice')
          .send(chat('hi there', 500));
        expect(first.status).to.equal(200);
        expect(first.headers['content-type']).to.match(/text\/event-stream/);
        expect(first.text).to.equal('data: {"text":"Hel"}\n\ndata: {"text":"lo"}\n\ndata: [DONE]\n\n');
        // Headers are sent on arrival: what is left after the estimate.
        expect(first.headers['ratelimit-policy']).to.equal(
          '"llm-tokens";q=1000;w=86400, "llm-requests";q=20;w=60',
        );
        expect(first.headers.ratelimit).to.match(
          new RegExp(
            `^"llm-tokens";r=${1000 - promptOf('hi there') - 500};t=\\d+, "llm-requests";r=19;t=\\d+$`,
          ),
        );
        // Settled before the response ended: the usage stands, the estimate is gone.
        expect((await limiter.status('llm-tokens', 'alice')).count).to.equal(120);
        // 4096 fits the request's cap, not what is left of the budget: refused before the model is called.
        const big = await supertest(app).post('/v1/chat').set('x-user', 'alice').send(chat('hi', 4096));
        expect(big.status).to.equal(429);
        expect(Number(big.headers['retry-after'])).to.be.greaterThan(0);
        expect(model.sent).to.have.length(1);
        // Another user's budget is their own.
        const bob = await supertest(app).post('/v1/chat').set('x-user', 'bob').send(chat('hi', 800));
        expect(bob.status).to.equal(200);
        expect(model.sent[1]?.max_tokens).to.equal(800);
      } finally {
        await limiter.close();
      }
    });

    it('a usage above the estimate is a debt: the next request is refused until the day ends', async () => {
      const { model, app, limiter } = await llmApp({ chunks: ['x'], total: 1500 }, 1000);
      try {
        expect(
          (await supertest(app).post('/v1/chat').set('x-user', 'carol').send(chat('a', 100))).status,
        ).to.equal(200);
        expect((await limiter.status('llm-tokens', 'carol')).count).to.equal(1500);
        const next = await supertest(app).post('/v1/chat').set('x-user', 'carol').send(chat('a', 1));
        expect(next.status).to.equal(429);
        expect(model.sent).to.have.length(1);
      } finally {
        await limiter.close();
      }
    });

    it('a client that goes mid-stream pays for the prompt and what was streamed, and the model is stopped', async () => {
      const { model, app, limiter } = await llmApp({ chunks: ['one', 'two', 'three'], hang: true }, 10_000);
      const server = app.listen(0, '127.0.0.1');
      try {
        await new Promise((resolve) => server.once('listening', resolve));
        const { port } = server.address() as AddressInfo;
        const body = JSON.stringify(chat('summarise this', 2000));
        await new Promise<void>((resolve, reject) => {
          const req = httpRequest(
            {
              port,
              host: '127.0.0.1',
              method: 'POST',
              path: '/v1/chat',
              headers: { 'x-user': 'dave', 'content-type': 'application/json' },
            },
            (res) => {
              let text = '';
              res.on('data', (data: Buffer) => {
                text += data.toString();
                // The three chunks arrived: the client goes.
                if (text.split('data:').length > 3) {
                  req.destroy();
                  resolve();
                }
              });
            },
          );
          req.once('close', () => resolve());
          req.on('error', reject);
          req.end(body);
        });
        const expected = promptOf('summarise this') + 3;
        await until('the aborted stream is settled', async () => {
          return (await limiter.status('llm-tokens', 'dave')).count === expected;
        });
        expect(model.aborts()).to.equal(1);
      } finally {
        server.close();
        await limiter.close();
      }
    });

    it('attacks: a forged usage in the body, a bad body, a huge or non-number max_tokens, no user, 21 requests a minute', async () => {
      const { model, app, limiter } = await llmApp({ chunks: ['ok'], total: 50 }, 100_000);
      try {
        const as = (body: unknown) =>
          supertest(app)
            .post('/v1/chat')
            .set('x-user', 'eve')
            .send(body as object);
        // The usage is the provider's; what the client says is not read.
        expect((await as({ ...chat('hi', 10), usage: { total_tokens: 0 } })).status).to.equal(200);
        expect((await limiter.status('llm-tokens', 'eve')).count).to.equal(50);
        for (const body of [
          chat('hi', 1e12),
          chat('hi', 0),
          { ...chat('hi', 10), max_tokens: '10' },
          { messages: 'hi' },
          { messages: [{ role: 'root', content: 'x' }] },
          { messages: [{ role: 'user', content: { $gt: '' } }] },
          { messages: [] },
        ]) {
          const res = await as(body);
          expect(res.status, JSON.stringify(body)).to.equal(400);
        }
        // Nothing reserved or charged for them; each counted once a minute.
        expect((await limiter.status('llm-tokens', 'eve')).count).to.equal(50);
        expect(model.sent).to.have.length(1);
        expect((await supertest(app).post('/v1/chat').send(chat('hi', 10))).status).to.equal(401);
        for (let i = 0; i < 12; i++) expect((await as(chat('hi', 10))).status).to.equal(200);
        const over = await as(chat('hi', 10));
        expect(over.status).to.equal(429);
        expect(over.headers.ratelimit).to.match(/"llm-requests";r=0/);
      } finally {
        await limiter.close();
      }
    });
  });

  describe(`export endpoint recipe (${stores.name})`, () => {
    /** runExport whose calls wait for the test; `running` counts the exports at work now. */
    function exports() {
      const waiting: Array<{ user: string; finish(fail?: boolean): void }> = [];
      let running = 0;
      let most = 0;
      return {
        waiting,
        running: () => running,
        most: () => most,
        async runExport(user: string) {
          running++;
          most = Math.max(most, running);
          try {
            await new Promise<void>((resolve, reject) => {
              waiting.push({ user, finish: (fail) => (fail ? reject(new Error('disk full')) : resolve()) });
            });
            return { url: `/files/${user}.csv` };
          } finally {
            running--;
          }
        },
      };
    }

    /** The recipe's app on a fresh store, running `work`'s exports, listening on a free port. */
    async function exportServer(work: ReturnType<typeof exports>) {
      const { app, limiter } = createExportApp({
        store: await stores.makeStore(Date.now),
        authenticate: byHeader,
        runExport: work.runExport,
      });
      const server = app.listen(0, '127.0.0.1');
      await new Promise((resolve) => server.once('listening', resolve));
      return { limiter, server };
    }

    it('runs 2 exports per user at once: the third is 429 with Retry-After 1; another user is not held', async () => {
      const work = exports();
      const { limiter, server } = await exportServer(work);
      try {
        const post = (user: string) => supertest(server).post('/exports').set('x-user', user);
        const first = post('alice').then((r) => r);
        const second = post('alice').then((r) => r);
        await until('two exports running', () => work.running() === 2);
        const third = await post('alice');
        expect(third.status).to.equal(429);
        expect(third.headers['retry-after']).to.equal('1');
        expect(third.headers['ratelimit-policy']).to.equal(
          '"exports";q=2;qu="concurrent-requests", "exports-hourly";q=10;w=3600',
        );
        const bob = post('bob').then((r) => r);
        await until('bob runs', () => work.running() === 3);
        for (const w of work.waiting.splice(0)) w.finish();
        expect((await first).status).to.equal(201);
        expect((await second).body).to.deep.equal({ url: '/files/alice.csv' });
        expect((await bob).status).to.equal(201);
        // The slots are back once the responses ended.
        await until('slots released', async () => (await limiter.status('exports', 'alice')).count === 0);
        const again = post('alice').then((r) => r);
        await until('a new export runs', () => work.running() === 1);
        for (const w of work.waiting.splice(0)) w.finish();
        expect((await again).status).to.equal(201);
      } finally {
        server.close();
        await limiter.close();
      }
    });

    it('attacks: clients that abort free nothing while their exports work; a failing export (500) frees its slot; the 11th in an hour is 429', async () => {
      const work = exports();
      const { limiter, server } = await exportServer(work);
      try {
        const { port } = server.address() as AddressInfo;
        // Ten requests, each client gone at once: two exports run, the rest are refused or never start.
        const clients = Array.from({ length: 10 }, () => {
          const req = httpRequest({
            port,
            host: '127.0.0.1',
            method: 'POST',
            path: '/exports',
            headers: { 'x-user': 'mallory' },
          });
          req.on('error', () => {});
          req.end();
          return req;
        });
        await until('two exports running', () => work.running() === 2);
        for (const req of clients) req.destroy();
        // The clients are gone; the two handlers still work, so their slots stay taken.
        const meanwhile = await supertest(server).post('/exports').set('x-user', 'mallory');
        expect(meanwhile.status).to.equal(429);
        expect(work.most()).to.equal(2);
        // One fails (500), one finishes: both slots come back.
        work.waiting.shift()?.finish(true);
        work.waiting.shift()?.finish();
        await until('slots released', async () => (await limiter.status('exports', 'mallory')).count === 0);
        // Admitted so far this hour: the two that ran. Eight more, one after the other, then the 11th is refused.
        for (let i = 0; i < 8; i++) {
          const res = supertest(server)
            .post('/exports')
            .set('x-user', 'mallory')
            .then((r) => r);
          await until('the export runs', () => work.waiting.length === 1);
          work.waiting.shift()?.finish();
          expect((await res).status).to.equal(201);
        }
        const eleventh = await supertest(server).post('/exports').set('x-user', 'mallory');
        expect(eleventh.status).to.equal(429);
        expect(Number(eleventh.headers['retry-after'])).to.be.greaterThan(60);
        expect(work.most()).to.equal(2);
      } finally {
        server.close();
        await limiter.close();
      }
    });
  });
}

describe('outbound calls recipe (Redis)', () => {
  it('never has more than 50 calls at the provider from 3 workers, and 500 a minute; a caller waits for a slot, no listener per waiting call on the shared signal', async function () {
    this.timeout(60_000);
    const server = await getRedis();
    const redis = server.client();
    await redis.del(...(await redis.keys('provider:*')), 'provider:none');
    const shutdown = new AbortController();
    let running = 0;
    let most = 0;
    let calls = 0;
    const finishers: Array<() => void> = [];
    const send = async (charge: { customer: string; amount: number }) => {
      running++;
      calls++;
      most = Math.max(most, running);
      await new Promise<void>((resolve) => finishers.push(resolve));
      running--;
      return { id: `ch_${charge.customer}` };
    };
    // 10 calls wait on one shutdown signal: no listener per call (Node would warn past 10).
    const warnings: string[] = [];
    const onWarning = (warning: Error) => warnings.push(warning.name);
    process.on('warning', onWarning);
    // Three workers: three limiters on one Redis.
    const workers = [0, 1, 2].map(() => providerClient({ redis, send, signal: shutdown.signal }));
    try {
      const pending = Array.from({ length: 60 }, (_, i) =>
        (workers[i % 3] as (typeof workers)[number]).charge({ customer: `c${i}`, amount: 100 }),
      );
      await until('50 calls at the provider', () => running === 50);
      // The other 10 wait for a slot: none reaches the provider while 50 are there.
      expect(calls).to.equal(50);
      for (const finish of finishers.splice(0, 10)) finish();
      await until('10 more started', () => calls === 60);
      for (const finish of finishers.splice(0)) finish();
      const done = await Promise.all(pending);
      expect(done.map((r) => r.id)).to.deep.equal(Array.from({ length: 60 }, (_, i) => `ch_c${i}`));
      expect(most).to.equal(50);
      expect(warnings).to.not.include('MaxListenersExceededWarning');
      // Every slot released when its call settled.
      expect((await workers[0]?.limiter.status('payments-concurrent', 'payments'))?.count).to.equal(0);
      expect((await workers[0]?.limiter.status('payments-minute', 'payments'))?.count).to.equal(60);
      // A call that throws frees its slot too.
      const failing = providerClient({
        redis,
        send: async () => {
          throw new Error('card declined');
        },
        signal: shutdown.signal,
      });
      workers.push(failing);
      let failed: unknown;
      await failing.charge({ customer: 'x', amount: 1 }).catch((error: unknown) => {
        failed = error;
      });
      expect((failed as Error).message).to.equal('card declined');
      expect((await failing.limiter.status('payments-concurrent', 'payments')).count).to.equal(0);
      // The minute's 500: the 501st waits past maxWait (30 s) and is refused at once.
      await redis.del(...(await redis.keys('provider:*')));
      const quick = providerClient({
        redis,
        send: async (c) => ({ id: c.customer }),
        signal: shutdown.signal,
      });
      workers.push(quick);
      for (let i = 0; i < 5; i++)
        await Promise.all(Array.from({ length: 100 }, () => quick.charge({ customer: 'q', amount: 1 })));
      let refused: unknown;
      await quick.charge({ customer: 'q', amount: 1 }).catch((error: unknown) => {
        refused = error;
      });
      expect(refused).to.be.instanceOf(RateLimitExceededError);
    } finally {
      process.off('warning', onWarning);
      shutdown.abort();
      for (const w of workers) await w.limiter.close();
    }
  });
});
