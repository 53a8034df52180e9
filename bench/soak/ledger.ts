// What an app process writes down for the audit, outside the library: each call it made with the
// wall-clock bracket around it, and each call the library made to its store (through a wrapper on the store).
import { AsyncLocalStorage } from 'node:async_hooks';
import { createWriteStream, type WriteStream } from 'node:fs';
import type { EvalMode, EvalResult, Refund, Store, StoreOp, StoreRule } from '../../src/stores/store.js';

/** Which store a record is about: the Redis Cluster, the standalone Redis or the PostgreSQL server. */
export type StoreName = 'cluster' | 'standalone' | 'postgres';

export const STORE_NAMES: readonly StoreName[] = ['cluster', 'standalone', 'postgres'];

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
  /**
   * Store refunds (`of`: the decision reported or settled; a concurrency rule's: the slots released,
   * `rc` their receipts) and clears (resetOnSuccess).
   */
  | {
      t: 'R' | 'C';
      s: StoreName;
      id: number;
      of: number;
      lo: number;
      hi: number;
      ok: boolean;
      ops: OpRecord[];
      rc?: number[];
      held?: boolean[];
    }
  /** Concurrency slots renewed (`rc`: each one's first slot id) and, answered, which were still held. */
  | {
      t: 'N';
      s: StoreName;
      lo: number;
      hi: number;
      ok: boolean;
      ops: OpRecord[];
      rc: number[];
      held: boolean[];
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

/** What the work in flight writes down beside its store calls (its own ledger file per process). */
export type FlightRecord =
  /**
   * A handler that held a concurrency slot: it started at `a` and ended at `b` (epoch ms, its own
   * clock), admitted by `src` ('store', 'insurance', 'policy'...); `aborted`: its client went mid-stream.
   */
  | {
      t: 'H';
      s: StoreName;
      rule: string;
      key: string;
      a: number;
      b: number;
      src: string;
      slot: number;
      aborted?: boolean;
    }
  /** An app decision of the settled-cost rules (`src` as in 'D'), and its settle: estimate, actual cost. */
  | {
      t: 'S';
      s: StoreName;
      key: string;
      lo: number;
      hi: number;
      src: string;
      est: number;
      actual: number;
      ok: boolean;
    }
  /** The slot changes this process's observer counted per rule, at the end. */
  | { t: 'M'; s: StoreName; rule: string; held: number; released: number; lapsed: number }
  /** Calls that gave up: acquire past maxWait, requests refused, client errors (by kind). */
  | { t: 'G'; s: StoreName; what: string; n: number };

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

  write(record: LedgerRecord | FlightRecord): void {
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
  // A refund's answer (per refund: whether it was still held, for a concurrency slot) is passed on as is,
  // and written down as `held` when there is one.
  const settle = async <T>(t: 'R' | 'C', ops: OpRecord[], work: Promise<T>, rc?: number[]): Promise<T> => {
    const ctx = callContext.getStore();
    const lo = Date.now();
    const base = { t, s, id: ctx?.id ?? 0, of: ctx?.of ?? 0, lo, ops, ...(rc === undefined ? {} : { rc }) };
    try {
      const answer = await work;
      const held = Array.isArray(answer) ? { held: answer as boolean[] } : {};
      ledger.write({ ...base, hi: Date.now(), ok: true, ...held });
      return answer;
    } catch (error) {
      ledger.write({ ...base, hi: Date.now(), ok: false });
      throw error;
    }
  };
  const refund = (refunds: readonly Refund[]) =>
    settle(
      'R',
      refunds.map((r) => opRecord(r.op)),
      store.refund(refunds) as Promise<unknown>,
      refunds.map((r) => r.receipt),
    );
  const renew = async (slots: readonly Refund[]): Promise<boolean[]> => {
    const lo = Date.now();
    const base = {
      t: 'N' as const,
      s,
      lo,
      ops: slots.map((r) => opRecord(r.op)),
      rc: slots.map((r) => r.receipt),
    };
    try {
      const held = await (store.renew as NonNullable<Store['renew']>)(slots);
      ledger.write({ ...base, hi: Date.now(), ok: true, held });
      return held;
    } catch (error) {
      ledger.write({ ...base, hi: Date.now(), ok: false, held: [] });
      throw error;
    }
  };
  const overrides: Partial<Store> = {
    evaluate,
    refund: refund as Store['refund'],
    // Counts cleared (resetOnSuccess) are recorded; an operator's reset is not.
    reset: (rule: StoreRule, key: string, options?: { keepLock?: boolean }) =>
      options?.keepLock === true
        ? settle('C', [[rule.name, key, 0]], store.reset(rule, key, options))
        : store.reset(rule, key, options),
  };
  if (store.renew !== undefined) overrides.renew = renew;
  return new Proxy(store, {
    get(target, prop) {
      if (prop in overrides) return overrides[prop as keyof Store];
      // The store itself as `this`: its private fields are not reachable through the proxy.
      const value = Reflect.get(target, prop);
      return typeof value === 'function' ? value.bind(target) : value;
    },
  });
}
