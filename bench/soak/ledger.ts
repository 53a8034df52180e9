// What an app process writes down for the audit, outside the library: each call it made with the
// wall-clock bracket around it, and each call the library made to Redis (through a wrapper on the store).
import { AsyncLocalStorage } from 'node:async_hooks';
import { createWriteStream, type WriteStream } from 'node:fs';
import type {
  EvalMode,
  EvalResult,
  Refund,
  Settler,
  Store,
  StoreOp,
  StoreRule,
} from '../../src/stores/store.js';

/** Which Redis a record is about: the Cluster or the standalone server. */
export type StoreName = 'cluster' | 'standalone';

/** The app call a store call happens under (async context), so the audit can join them. */
export interface CallContext {
  id: number;
  /** Set when a store evaluation of this call settled successfully: the library had Redis's answer. */
  storeAnswered: boolean;
  /** Store evaluations started for this call. */
  storeCalls: number;
  /** For a report: the decision reported. */
  of?: number;
}

export const callContext = new AsyncLocalStorage<CallContext>();

/** One op as written: rule, key, cost; with the store's verdict when there is one. */
export type OpRecord = [rule: string, key: string, cost: number];
export type VerdictRecord = [
  rule: string,
  key: string,
  cost: number,
  allowed: 0 | 1,
  receipt: number,
  lockedUntil: number,
  lockedNow: 0 | 1,
];

export type LedgerRecord =
  /** An app call: decision (`ok`: admitted), source: 'store' | 'policy' (Redis did not answer in time) | 'none'. */
  | {
      t: 'D';
      s: StoreName;
      id: number;
      lo: number;
      hi: number;
      mode: string;
      ok: boolean;
      src: string;
      ops: OpRecord[];
    }
  /** A store evaluation: `now` is the time the store says it decided at, checked against lo..hi. */
  | {
      t: 'E';
      s: StoreName;
      id: number;
      lo: number;
      hi: number;
      mode: EvalMode;
      ok: boolean;
      now: number;
      ops: VerdictRecord[];
    }
  /** Store refunds (`of`: the decision reported) and clears (resetOnSuccess). */
  | {
      t: 'R' | 'C';
      s: StoreName;
      id: number;
      of: number;
      lo: number;
      hi: number;
      ok: boolean;
      ops: OpRecord[];
    }
  /** A lockout event (emitted inside the call `id`). */
  | { t: 'L'; s: StoreName; id: number; rule: string; key: string; until: number; dur: number; level: number }
  /**
   * An operator reset: count, lock and level cleared somewhere in lo..hi; one that failed (`ok` false)
   * may still run when a stalled Redis wakes up.
   */
  | { t: 'Z'; s: StoreName; lo: number; hi: number; ok: boolean; rule: string; key: string }
  /** An outcome the app reported for decision `of` (what the policy's own store refunds or clears). */
  | { t: 'O'; s: StoreName; of: number; lo: number; outcome: 'success' | 'failure' }
  /** A store error the limiter reported ('storeError'), with its cause. */
  | { t: 'X'; s: StoreName; at: number; op: string; error: string }
  /** Redis TIME read by the app (`server`, ms) between lo and hi: the clocks' agreement. */
  | { t: 'T'; s: StoreName; lo: number; hi: number; server: number };

/** Appends records as JSON lines to one file per process. */
export class Ledger {
  readonly #out: WriteStream;
  #nextId = 1;

  constructor(readonly file: string) {
    this.#out = createWriteStream(file, { flags: 'w' });
  }

  newId(): number {
    return this.#nextId++;
  }

  write(record: LedgerRecord): void {
    this.#out.write(`${JSON.stringify(record)}\n`);
  }

  close(): Promise<void> {
    return new Promise((resolve) => this.#out.end(resolve));
  }
}

const opRecord = (op: StoreOp): OpRecord => [op.rule.name, op.key, op.cost];

/**
 * The store as the limiter sees it, with every evaluation, refund and clear written to the ledger and
 * every evaluation's duration handed to `timed`. Everything else passes straight through.
 */
export function recordingStore(
  store: Store,
  s: StoreName,
  ledger: Ledger,
  timed: (ms: number) => void,
): Store {
  const evaluate = async (ops: readonly StoreOp[], mode: EvalMode): Promise<EvalResult> => {
    const ctx = callContext.getStore();
    if (ctx) ctx.storeCalls++;
    const lo = Date.now();
    const started = performance.now();
    const id = ctx?.id ?? 0;
    try {
      const result = await store.evaluate(ops, mode);
      timed(performance.now() - started);
      if (ctx) ctx.storeAnswered = true;
      const verdicts = ops.map((op, i): VerdictRecord => {
        const r = result.results[i];
        return [
          op.rule.name,
          op.key,
          op.cost,
          r?.allowed ? 1 : 0,
          r?.receipt ?? 0,
          r?.lockedUntil ?? 0,
          r?.lockedNow ? 1 : 0,
        ];
      });
      ledger.write({ t: 'E', s, id, lo, hi: Date.now(), mode, ok: true, now: result.nowMs, ops: verdicts });
      return result;
    } catch (error) {
      timed(performance.now() - started);
      const ops_ = ops.map((op): VerdictRecord => [...opRecord(op), 0, 0, 0, 0]);
      ledger.write({ t: 'E', s, id, lo, hi: Date.now(), mode, ok: false, now: 0, ops: ops_ });
      throw error;
    }
  };
  const settle = async (t: 'R' | 'C', ops: OpRecord[], work: Promise<unknown>) => {
    const ctx = callContext.getStore();
    const lo = Date.now();
    const base = { t, s, id: ctx?.id ?? 0, of: ctx?.of ?? 0, lo, ops };
    try {
      await work;
      ledger.write({ ...base, hi: Date.now(), ok: true });
    } catch (error) {
      ledger.write({ ...base, hi: Date.now(), ok: false });
      throw error;
    }
  };
  const refund = (refunds: readonly Refund[]) =>
    settle(
      'R',
      refunds.map((r) => opRecord(r.op)),
      store.refund(refunds),
    );
  const overrides: Partial<Store> = {
    evaluate,
    refund,
    clear: (rule: StoreRule, key: string) => settle('C', [[rule.name, key, 0]], store.clear(rule, key)),
  };
  // The settler forms the limiter prefers where a store has them (the Redis store) are recorded too.
  if (store.evaluateInto !== undefined)
    overrides.evaluateInto = (ops: readonly StoreOp[], mode: EvalMode, into: Settler<EvalResult>) => {
      evaluate(ops, mode).then(
        (result) => into.resolve(result),
        (error: unknown) => into.reject(error),
      );
    };
  if (store.refundInto !== undefined)
    overrides.refundInto = (refunds: readonly Refund[], into: Settler<void>) => {
      refund(refunds).then(
        () => into.resolve(),
        (error: unknown) => into.reject(error),
      );
    };
  return new Proxy(store, {
    get(target, prop) {
      if (prop in overrides) return overrides[prop as keyof Store];
      // The store itself as `this`: its private fields are not reachable through the proxy.
      const value = Reflect.get(target, prop);
      return typeof value === 'function' ? value.bind(target) : value;
    },
  });
}
