// One app's limiters on one store (a Redis Cluster, a standalone Redis, PostgreSQL), each call written to
// the ledger, and what an operator does beside the traffic: unlocking keys, reading the server's clock,
// probing whether the store decides.
import { createLimiter, type Decision, type Limiter, type RequestInfo } from '../../src/index.js';
import { type Backend, connectBackend, type StoreTarget } from './backends.js';
import {
  type CallContext,
  callContext,
  type Ledger,
  type OpRecord,
  recordingStore,
  type StoreName,
} from './ledger.js';
import { apiRules, serviceRules } from './rules.js';

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

export interface AppOptions {
  store: StoreName;
  target: StoreTarget;
  worker: number;
  ledger: Ledger;
  storeTimeoutMs: number;
  storeRetryMs: number;
  /** Each store evaluation's duration, ms. */
  timed: (ms: number) => void;
}

/** The limiters of one app process on one store, and the calls it makes, each written to the ledger. */
export class SoakApp {
  readonly backend: Backend;
  readonly api: Limiter;
  readonly service: Limiter;
  decisions = 0;
  admitted = 0;
  readonly #o: AppOptions;
  /** The ledger id of each decision, for its report. */
  readonly #ids = new WeakMap<Decision, number>();
  /** Recently locked keys of the 'guard' rule, for operator resets. */
  readonly #locked: string[] = [];
  #probes = 0;

  constructor(o: AppOptions) {
    this.#o = o;
    this.backend = connectBackend(o.target, o.storeTimeoutMs);
    const limiter = (prefix: string, rules: ReturnType<typeof apiRules>) => {
      const store = recordingStore(this.backend.store(prefix), o.store, o.ledger, o.timed);
      const made = createLimiter({
        store,
        rules,
        storeTimeout: o.storeTimeoutMs,
        storeRetryInterval: o.storeRetryMs,
      });
      made.on('lockout', (e) => {
        o.ledger.write({
          t: 'L',
          s: o.store,
          id: callContext.getStore()?.id ?? 0,
          rule: e.rule,
          key: e.key,
          until: e.lockedUntil,
          dur: e.durationMs,
          level: e.level,
        });
        if (e.rule === 'guard') this.#locked.push(e.key);
      });
      made.on('storeError', (e) => {
        const error = `${e.error.name}: ${e.error.message}`;
        o.ledger.write({ t: 'X', s: o.store, at: Date.now(), op: e.operation, error });
      });
      return made;
    };
    this.api = limiter('sk-api', apiRules());
    this.service = limiter('sk-svc', serviceRules());
  }

  /** Resolves once the store is connected (the README: before that, the policy decides every request). */
  ready(): Promise<void> {
    return this.backend.ready();
  }

  /** One app call under its own context, written down with the wall-clock bracket around it. */
  async #call(
    mode: string,
    ops: (d: Decision) => OpRecord[],
    run: () => Promise<Decision>,
  ): Promise<Decision> {
    const ctx: CallContext = { id: this.#o.ledger.newId(), storeAnswered: false, storeCalls: 0 };
    const lo = Date.now();
    const decision = await callContext.run(ctx, run);
    const src = ctx.storeAnswered ? 'store' : ctx.storeCalls > 0 || decision.allowed ? 'policy' : 'none';
    this.#o.ledger.write({
      t: 'D',
      s: this.#o.store,
      id: ctx.id,
      lo,
      hi: Date.now(),
      mode,
      ok: decision.allowed,
      src,
      ops: ops(decision),
    });
    this.decisions++;
    if (decision.allowed) this.admitted++;
    this.#ids.set(decision, ctx.id);
    return decision;
  }

  /** `check` on the HTTP-shaped limiter. */
  check(req: RequestInfo): Promise<Decision> {
    const ops = (d: Decision): OpRecord[] => d.rules.map((r) => [r.rule, r.key, 1]);
    return this.#call('check', ops, () => this.api.check(req));
  }

  /** `report` of a decision made by `check`. */
  async report(decision: Decision, outcome: 'success' | 'failure'): Promise<void> {
    const of = this.#ids.get(decision) ?? 0;
    this.#o.ledger.write({ t: 'O', s: this.#o.store, of, lo: Date.now(), outcome });
    const ctx: CallContext = { id: this.#o.ledger.newId(), storeAnswered: false, storeCalls: 0, of };
    await callContext.run(ctx, () => this.api.report(decision, outcome));
  }

  /** `consume` on the service limiter. */
  consume(rule: string, key: string, cost: number): Promise<Decision> {
    return this.#call(
      'consume',
      () => [[rule, key, cost]],
      () => this.service.consume(rule, key, cost),
    );
  }

  /** An operator unlocking a key of 'guard' that this process saw locked. */
  async unlockOne(): Promise<void> {
    const key = this.#locked.splice(0, this.#locked.length).pop();
    if (key === undefined) return;
    const lo = Date.now();
    const done = (ok: boolean) =>
      this.#o.ledger.write({ t: 'Z', s: this.#o.store, lo, hi: Date.now(), ok, rule: 'guard', key });
    // Redis down: reset throws (operator calls have no policy), and may still run once Redis wakes.
    await this.service.reset('guard', key).then(
      () => done(true),
      () => done(false),
    );
  }

  /** The server's clock against this process's. */
  async clockSample(): Promise<void> {
    const lo = Date.now();
    try {
      const server = await this.backend.serverTime();
      this.#o.ledger.write({ t: 'T', s: this.#o.store, lo, hi: Date.now(), server });
    } catch {
      // a fault: no sample
    }
  }

  /** Ms until a fresh key consumed once reads back as count 1 from Redis (decided by Redis again). */
  async probe(maxMs = 60_000): Promise<number> {
    const start = performance.now();
    while (performance.now() - start < maxMs) {
      const key = `probe-w${this.#o.worker}-${this.#probes++}`;
      await this.consume('probe', key, 1);
      const count = await this.service.status('probe', key).then(
        (s) => s.count,
        () => -1,
      );
      if (count === 1) return performance.now() - start;
      await sleep(25);
    }
    throw new Error(`${this.#o.store}: decisions did not come from Redis again within ${maxMs} ms`);
  }

  async close(): Promise<void> {
    await Promise.all([this.api.close(), this.service.close()]);
    await this.backend.close();
  }
}
