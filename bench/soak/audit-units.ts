// The audit's input: each app process's ledger turned into, per store, rule and key, the units Redis
// counted, the units the app was admitted (by Redis or by the failure policy), the locks Redis placed,
// and the moments Redis's answer was lost.
import { createReadStream } from 'node:fs';
import { createInterface } from 'node:readline';
import type { LedgerRecord, StoreName } from './ledger.js';
import { giveBack, type Unit, type WindowSpec } from './windows.js';

export interface KeyHistory {
  store: StoreName;
  rule: string;
  key: string;
  /** What Redis counted: every evaluation it answered that admitted the request. */
  redis: Unit[];
  /** What the app was admitted: the Redis units it used, and the policy's. */
  app: Unit[];
  /** Locks Redis placed (from its answers), [start, end) in its time. */
  locks: Array<{ start: number; end: number }>;
  /** Brackets of evaluations that got no answer (Redis may or may not have counted them and locked). */
  unknown: Array<[number, number]>;
  /**
   * Clears (resetOnSuccess: Redis's count only) and operator resets (Redis's and the policy's): each
   * ran somewhere in [at, hi] (one that failed may have run when Redis woke up, or not at all).
   */
  emptied: Array<{ at: number; hi: number; policyToo: boolean; certain: boolean }>;
}

export interface Ledgers {
  histories: Map<string, KeyHistory>;
  decisions: number;
  admissions: number;
  policyDecisions: number;
  evaluations: number;
  unanswered: number;
  /** TIME samples and the worst distance of the server's time from the app's bracket around it, ms. */
  clockSamples: number;
  clockDeviationMs: number;
  /** Evaluations whose store time lies outside the app's bracket around the call (must be 0). */
  storeTimesOutside: number;
  /** Policy decisions per store, [lo, hi], for the time back on Redis after each fault. */
  policyTimes: Record<StoreName, Array<[number, number]>>;
  /** Store errors the limiters reported, by store and cause. */
  storeErrors: Map<string, number>;
}

async function* records(file: string): AsyncGenerator<LedgerRecord> {
  for await (const line of createInterface({ input: createReadStream(file), crlfDelay: Infinity })) {
    if (line !== '') yield JSON.parse(line) as LedgerRecord;
  }
}

/** Reads every process's ledger; `specs` says which rules count which outcomes. */
export async function loadLedgers(
  files: string[],
  countsOutcome: (rule: string, outcome: 'success' | 'failure') => 'keep' | 'refund' | 'clear',
  specs: Map<string, WindowSpec>,
  /** The latest a call that failed at `hi` may still run: a stalled server runs what it holds when it wakes. */
  stalledUntil: (store: StoreName, hi: number) => number,
): Promise<Ledgers> {
  const out: Ledgers = {
    histories: new Map(),
    decisions: 0,
    admissions: 0,
    policyDecisions: 0,
    evaluations: 0,
    unanswered: 0,
    clockSamples: 0,
    clockDeviationMs: 0,
    storeTimesOutside: 0,
    policyTimes: { cluster: [], standalone: [], postgres: [] },
    storeErrors: new Map(),
  };
  const history = (store: StoreName, rule: string, key: string): KeyHistory => {
    const id = `${store}|${rule}|${key}`;
    let h = out.histories.get(id);
    if (h === undefined) {
      h = { store, rule, key, redis: [], app: [], locks: [], unknown: [], emptied: [] };
      out.histories.set(id, h);
    }
    return h;
  };

  const skews: number[] = [];
  for (const file of files) {
    // Per decision id of this process: its Redis units (by rule and key) and its policy units.
    const redisUnits = new Map<number, Map<string, Unit>>();
    const policyUnits = new Map<number, Array<{ rule: string; unit: Unit; h: KeyHistory }>>();
    const ownPolicy = new Set<Unit>();
    const decisions: Array<Extract<LedgerRecord, { t: 'D' }>> = [];
    const later: LedgerRecord[] = [];
    for await (const r of records(file)) {
      if (r.t === 'E') {
        out.evaluations++;
        if (!r.ok) {
          out.unanswered++;
          for (const [rule, key] of r.ops)
            history(r.s, rule, key).unknown.push([r.lo, stalledUntil(r.s, r.hi)]);
          continue;
        }
        skews.push(Math.max(r.lo - r.now, r.now - r.hi));
        for (const [rule, key, , , , lockedUntil, lockedNow] of r.ops)
          if (lockedNow === 1) history(r.s, rule, key).locks.push({ start: r.now, end: lockedUntil });
        if (r.mode !== 'check' || r.ops.some((op) => op[3] === 0)) continue;
        const units = new Map<string, Unit>();
        // On a Cluster the ops of other slots are decided after the first group's time, by the end of
        // the call; ops of one key share a slot, so one script call decides them all at its time.
        // PostgreSQL reads its clock once per call, before it waits for the rows' locks: a key that
        // another call wrote meanwhile is decided at that call's later time (time never runs backwards
        // in an algorithm), so at the latest by the end of the call (a sliding log's entry shows it).
        const oneKey = r.ops.every((op) => op[1] === r.ops[0]?.[1]);
        const tMax = (r.s === 'cluster' && !oneKey) || r.s === 'postgres' ? Math.max(r.now, r.hi) : r.now;
        for (const [rule, key, cost, , receipt] of r.ops) {
          const spec = specs.get(rule);
          if (cost === 0 || spec === undefined) continue;
          const unit: Unit = {
            t: r.now,
            tMax,
            cost,
            receipt,
            policy: false,
            refundedAt: Infinity,
            refundedBy: Infinity,
          };
          // A sliding log's receipt is the time of its entry: the op's own time.
          if (spec.type === 'sliding-log' && receipt >= r.now && receipt <= tMax)
            unit.t = unit.tMax = receipt;
          history(r.s, rule, key).redis.push(unit);
          units.set(`${rule}|${key}`, unit);
        }
        if (r.id !== 0) redisUnits.set(r.id, units);
      } else if (r.t === 'D') {
        decisions.push(r);
      } else if (r.t === 'X') {
        const cause = `${r.s}: ${r.error.replace(/\d+/g, 'N')}`;
        out.storeErrors.set(cause, (out.storeErrors.get(cause) ?? 0) + 1);
      } else if (r.t === 'T') {
        out.clockSamples++;
        out.clockDeviationMs = Math.max(out.clockDeviationMs, r.lo - r.server, r.server - r.hi);
      } else {
        later.push(r);
      }
    }
    for (const d of decisions) {
      out.decisions++;
      if (d.src === 'policy') {
        out.policyDecisions++;
        out.policyTimes[d.s].push([d.lo, d.hi]);
      }
      if (!d.ok) continue;
      out.admissions++;
      const used = d.src === 'store' ? redisUnits.get(d.id) : undefined;
      for (const [rule, key, cost] of d.ops) {
        if (!specs.has(rule) || cost === 0) continue;
        const h = history(d.s, rule, key);
        if (used !== undefined) {
          const unit = used.get(`${rule}|${key}`);
          if (unit !== undefined) h.app.push(unit);
          continue;
        }
        const t = (d.lo + d.hi) / 2;
        const unit: Unit = {
          t,
          tMax: t,
          cost,
          receipt: Number.NaN,
          policy: true,
          refundedAt: Infinity,
          refundedBy: Infinity,
        };
        h.app.push(unit);
        ownPolicy.add(unit);
        const list = policyUnits.get(d.id) ?? [];
        list.push({ rule, unit, h });
        policyUnits.set(d.id, list);
      }
    }
    for (const r of later) {
      // A refund or clear runs somewhere in its bracket; one that got no answer may have run (later,
      // if Redis was stalled) or not: it counts as given back wherever it may have been.
      const hi = r.t === 'R' || r.t === 'C' || r.t === 'Z' ? (r.ok ? r.hi : stalledUntil(r.s, r.hi)) : 0;
      if (r.t === 'R') {
        for (const [rule, key] of r.ops) {
          const unit = redisUnits.get(r.of)?.get(`${rule}|${key}`);
          if (unit !== undefined) giveBack(unit, r.lo, hi);
        }
      } else if (r.t === 'C') {
        for (const [rule, key] of r.ops)
          history(r.s, rule, key).emptied.push({ at: r.lo, hi, policyToo: false, certain: r.ok });
      } else if (r.t === 'Z') {
        history(r.s, r.rule, r.key).emptied.push({ at: r.lo, hi, policyToo: true, certain: r.ok });
      } else if (r.t === 'O') {
        // The policy's own store refunds or clears as the outcome says, in this process, when the
        // outcome is reported: model it on the policy's units.
        for (const { rule, unit, h } of policyUnits.get(r.of) ?? []) {
          const effect = countsOutcome(rule, r.outcome);
          if (effect === 'refund') giveBack(unit, r.lo, r.lo);
          if (effect === 'clear')
            for (const other of h.app)
              if (ownPolicy.has(other) && other.t <= r.lo) giveBack(other, r.lo, r.lo);
        }
      }
    }
  }
  // A clear or reset empties the key: what was counted before it stops counting then. It ran somewhere
  // in [at, hi]: a unit decided before `at` is given back in that span, one decided during the call
  // may have been emptied right after it was decided.
  for (const h of out.histories.values()) {
    for (const { at, hi, policyToo } of h.emptied) {
      const units = policyToo ? new Set([...h.app, ...h.redis]) : h.redis;
      for (const unit of units) if (unit.t <= hi) giveBack(unit, Math.max(at, unit.t), hi);
    }
  }
  // The same host runs Redis and the apps: its time must fall inside each call's bracket.
  out.storeTimesOutside = skews.filter((skew) => skew > 1 + out.clockDeviationMs).length;
  return out;
}
