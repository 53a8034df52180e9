// Work in flight for one app process on one store: an Express server whose streamed responses hold a
// concurrency slot (some clients abandon them mid-stream), acquire callers that wait for a slot, checks
// that hold one, and calls whose settled costs differ from their estimates. Each handler writes down
// when it ran (the audit counts handlers at once from these, not from the library).
import { once } from 'node:events';
import http, { type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import express from 'express';
import { rateLimit } from '../../adapters/express.js';
import {
  createLimiter,
  type Decision,
  type Limiter,
  RateLimitExceededError,
  type RuleStatus,
} from '../../src/index.js';
import type { Backend } from './backends.js';
import { type Ledger, recordingStore, type StoreName } from './ledger.js';
import { flightRules, SLOT_LEASES } from './rules.js';

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));
const pick = <T>(items: readonly T[]): T => items[Math.floor(Math.random() * items.length)] as T;
/**
 * An operator call made again until the store answers (30 s at most): `status` and `locked` have no
 * failure policy, and a loaded machine can keep one past storeTimeout now and then.
 */
export async function patiently<T>(call: () => Promise<T>, forMs = 30_000): Promise<T> {
  const deadline = Date.now() + forMs;
  for (;;) {
    try {
      return await call();
    } catch (error) {
      if (Date.now() > deadline) throw error;
      await sleep(200);
    }
  }
}

/** Mostly short, now and then past the lease: r³ spreads `max` over a long tail. */
const spread = (min: number, max: number) => min + (max - min) * Math.random() ** 3;

export interface FlightOptions {
  store: StoreName;
  backend: Backend;
  worker: number;
  ledger: Ledger;
  sessions: number;
  storeTimeoutMs: number;
  storeRetryMs: number;
  timed: (ms: number) => void;
}

/** A slot still held at the end: the rule, the key and what `status` said. */
export interface LeftHolder {
  store: StoreName;
  rule: string;
  key: string;
  count: number;
  holders: NonNullable<RuleStatus['holders']>;
}

export class FlightApp {
  readonly limiter: Limiter;
  readonly #o: FlightOptions;
  readonly #server: Server;
  /** The source each decision came from, as the observer heard it. */
  readonly #sources = new WeakMap<Decision, string>();
  readonly #slots = new Map<string, { held: number; released: number; lapsed: number }>();
  readonly #gaveUp = new Map<string, number>();
  /** Every rule and key a slot was asked for, for the check that none is still held at the end. */
  readonly #slotKeys = new Set<string>();
  #running = true;
  #loops: Promise<void> = Promise.resolve();
  #port = 0;
  readonly #openResponses = new Set<Promise<unknown>>();

  constructor(o: FlightOptions) {
    this.#o = o;
    const store = recordingStore(o.backend.store('sk-flt'), o.store, o.ledger, o.timed);
    this.limiter = createLimiter({
      store,
      rules: flightRules(),
      storeTimeout: o.storeTimeoutMs,
      storeRetryInterval: o.storeRetryMs,
    });
    this.limiter.on('storeError', () => {}); // the recording store wrote the failed call down
    this.limiter.observe({
      decision: (decision, info) => this.#sources.set(decision, info.source),
      slots: ({ rule, slots, change }) => {
        const counts = this.#slots.get(rule) ?? { held: 0, released: 0, lapsed: 0 };
        counts[change] += slots;
        this.#slots.set(rule, counts);
      },
    });
    const app = express();
    app.get('/stream', rateLimit(this.limiter), (req, res) => this.#stream(req, res));
    this.#server = http.createServer(app);
    this.#server.on('request', (_req, res) => {
      const closed = once(res, 'close').catch(() => undefined);
      this.#openResponses.add(closed);
      void closed.then(() => this.#openResponses.delete(closed));
    });
  }

  async start(): Promise<void> {
    this.#server.listen(0, '127.0.0.1');
    await once(this.#server, 'listening');
    this.#port = (this.#server.address() as AddressInfo).port;
    const loops: Array<Promise<void>> = [];
    for (let i = 0; i < this.#o.sessions; i++)
      loops.push(
        this.#loop(() => this.#streamCall()),
        this.#loop(() => this.#slotCall()),
        this.#loop(() => this.#settleCall()),
      );
    this.#loops = Promise.all(loops).then(() => undefined);
  }

  #loop(step: () => Promise<void>): Promise<void> {
    return (async () => {
      while (this.#running) {
        await step();
        await sleep(Math.random() * 60);
      }
    })();
  }

  #gaveUpOn(what: string): void {
    this.#gaveUp.set(what, (this.#gaveUp.get(what) ?? 0) + 1);
  }

  #held(rule: string, key: string, d: Decision, a: number, aborted?: boolean): void {
    const slot = d.rules.find((r) => r.rule === rule)?.slot ?? 0;
    const src = this.#sources.get(d) ?? 'unknown';
    this.#o.ledger.write({
      t: 'H',
      s: this.#o.store,
      rule,
      key,
      a,
      b: Date.now(),
      src,
      slot,
      ...(aborted ? { aborted } : {}),
    });
  }

  /**
   * The handler: streams for `hold` ms, in one of three ways. Piped (`pipe`, `pipeline`), it is done
   * when its response finishes or closes (a client gone mid-stream stops the pipe, and nothing is left
   * to run); writing by hand, when it has written its last chunk, or seen its client gone, and ends the
   * response (docs/rules.md: end every response, or the slot stays held).
   */
  #stream(req: express.Request, res: express.Response): void {
    const a = Date.now();
    const decision = req.rateLimit as Decision;
    const key = String(req.headers['x-client']);
    const hold = Number(req.query.hold);
    const chunks = Math.max(1, Math.round(hold / 40));
    let ended = false;
    const end = (aborted: boolean) => {
      if (ended) return;
      ended = true;
      this.#held('stream-slots', key, decision, a, aborted);
    };
    res.setHeader('content-type', 'application/octet-stream');
    async function* body() {
      for (let i = 0; i < chunks; i++) {
        await sleep(hold / chunks);
        yield Buffer.alloc(512, i);
      }
    }
    const style = req.query.style;
    if (style === 'write') {
      void (async () => {
        for await (const chunk of body()) {
          if (res.destroyed) break;
          res.write(chunk);
        }
        end(res.destroyed); // written down before the end that frees the slot
        res.end();
      })();
      return;
    }
    res.once('finish', () => end(false));
    res.once('close', () => end(!res.writableFinished));
    if (style === 'pipeline') pipeline(Readable.from(body()), res).catch(() => {});
    else Readable.from(body()).pipe(res);
  }

  /** A client of the stream; a quarter of them go away mid-stream. */
  async #streamCall(): Promise<void> {
    const k = this.#o.worker;
    const key = pick(['f-hot', `w${k}-f0`, `w${k}-f1`]);
    this.#slotKeys.add(`stream-slots|${key}`);
    const hold = Math.round(spread(10, 2500));
    const style = pick(['pipeline', 'pipe', 'write']);
    const abortAfter = Math.random() < 0.25 ? Math.random() * hold : undefined;
    await new Promise<void>((resolve) => {
      const req = http.get(
        {
          host: '127.0.0.1',
          port: this.#port,
          path: `/stream?hold=${hold}&style=${style}`,
          headers: { 'x-client': key },
        },
        (res) => {
          if (res.statusCode !== 200) this.#gaveUpOn(`stream answered ${res.statusCode}`);
          else if (abortAfter !== undefined) setTimeout(() => req.destroy(), abortAfter);
          res.resume();
          res.once('close', () => resolve());
        },
      );
      req.once('error', () => resolve());
    });
  }

  /** A job that waits for its slot (acquire), or a call that takes one if free (check) and releases it. */
  async #slotCall(): Promise<void> {
    const k = this.#o.worker;
    if (Math.random() < 0.5) {
      const key = pick(['j-hot', `w${k}-j0`]);
      this.#slotKeys.add(`job-slots|${key}`);
      let turn: Awaited<ReturnType<Limiter['acquire']>>;
      try {
        turn = await this.limiter.acquire('job-slots', key, { maxWait: 4_000 });
      } catch (error) {
        this.#gaveUpOn(error instanceof RateLimitExceededError ? 'acquire past maxWait' : 'acquire failed');
        return;
      }
      const a = Date.now();
      await sleep(spread(5, 3_500));
      this.#held('job-slots', key, turn, a);
      await turn.release().catch(() => this.#gaveUpOn('release failed'));
      return;
    }
    const key = pick(['c-hot', `w${k}-c0`]);
    this.#slotKeys.add(`call-slots|${key}`);
    const d = await this.limiter.check({ method: 'POST', path: '/call', headers: {}, user: key });
    if (!d.allowed) return;
    const a = Date.now();
    await sleep(spread(5, 2_500));
    this.#held('call-slots', key, d, a);
    await this.limiter.release(d).catch(() => this.#gaveUpOn('release failed'));
  }

  /** A call reserved on its estimate, then settled at its actual cost (0 to twice the estimate). */
  async #settleCall(): Promise<void> {
    const k = this.#o.worker;
    const user = pick(['t-hot', `w${k}-t0`, `w${k}-t1`]);
    const est = 5 + Math.floor(Math.random() * 36);
    const lo = Date.now();
    const body = { max_tokens: est };
    const d = await this.limiter.check({ method: 'POST', path: '/v1/complete', headers: {}, user, body });
    const hi = Date.now();
    if (!d.allowed) return;
    await sleep(Math.random() * 600);
    const actual = Math.floor(Math.random() * (2 * est + 1));
    const src = this.#sources.get(d) ?? 'unknown';
    const ok = await this.limiter.settle(d, actual).then(
      () => true,
      () => false,
    );
    this.#o.ledger.write({ t: 'S', s: this.#o.store, key: user, lo, hi, src, est, actual, ok });
  }

  /** Stops the loops; resolves once every call and response in flight has ended. */
  async stop(): Promise<void> {
    this.#running = false;
    await this.#loops;
    while (this.#openResponses.size > 0) await Promise.all([...this.#openResponses]);
  }

  /**
   * After `stop`: waits out the longest lease (a release lost to a fault frees its slot when the lease
   * ends), then asks `status` for every key a slot was asked for; what is still held is a leak.
   */
  async leftHolders(): Promise<LeftHolder[]> {
    await sleep(Math.max(...SLOT_LEASES.values()) + this.#o.storeRetryMs);
    const out: LeftHolder[] = [];
    for (const id of this.#slotKeys) {
      const [rule, key] = id.split('|') as [string, string];
      const status = await patiently(() => this.limiter.status(rule, key));
      if (status.count > 0 || (status.holders?.length ?? 0) > 0)
        out.push({ store: this.#o.store, rule, key, count: status.count, holders: status.holders ?? [] });
    }
    return out;
  }

  /** Writes the observer's slot counts and the calls that gave up, then closes. */
  async close(): Promise<void> {
    for (const [rule, c] of this.#slots) this.#o.ledger.write({ t: 'M', s: this.#o.store, rule, ...c });
    for (const [what, n] of this.#gaveUp) this.#o.ledger.write({ t: 'G', s: this.#o.store, what, n });
    this.#server.closeAllConnections();
    await new Promise((resolve) => this.#server.close(resolve));
    await this.limiter.close();
  }
}
