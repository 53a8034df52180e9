// The exactness audit: replays each key's admissions against its rule's window (windows.ts) and sorts
// what it finds: Redis over its own limit, the app admitted more outside an outage (both must be 0),
// how far outages went over; locks Redis placed against the locks `locked()` listed at the end.
import ms from 'ms';
import type { Rule } from '../../src/index.js';
import { admittedWhileLocked, compareLocks } from './audit-locks.js';
import { type KeyHistory, type Ledgers, loadLedgers } from './audit-units.js';
import type { FaultKind } from './config.js';
import type { StoreName } from './ledger.js';
import { apiRules, serviceRules } from './rules.js';
import { type Excess, receiptMismatch, type WindowSpec, windowExcess } from './windows.js';
import type { LockListing } from './worker.js';

/** A fault as the coordinator ran it: from its start until Redis was back (its end), on these stores. */
export interface FaultWindow {
  kind: FaultKind;
  stores: StoreName[];
  start: number;
  end: number;
  /** Writes may have been lost (a failover: replication is asynchronous). */
  dataLoss: boolean;
}

export interface AuditResult extends Omit<Ledgers, 'histories' | 'policyTimes'> {
  keys: number;
  /** Windows in which Redis itself counted more than the limit, outside any fault (must be 0) and during one. */
  redisOverOutsideFaults: number;
  redisOverDuringFaults: number;
  /** Store receipts contradicting the window model (must be 0). */
  receiptMismatches: number;
  /** App windows over the limit with no policy decision and no fault in them (must be 0), and their excess units. */
  overAdmissionsOutsideOutages: number;
  overUnitsOutsideOutages: number;
  /**
   * Windows touched by an outage that went over, the worst as a multiple of what the window allows,
   * and how many broke the bound: Redis's own limit, plus each process's insurance store admitting its
   * own limit (twice for a fixed window, which can overlap two of a process's insurance windows), plus
   * one limit more where a failover may have lost Redis's counts.
   */
  outageWindowsOver: number;
  worstOutageRatio: number;
  outageWindowsOverBound: number;
  /** Redis admissions while Redis held a lock on the key (must be 0). */
  admittedWhileLocked: number;
  locksListed: number;
  locksInForce: number;
  locksMissing: string[];
  locksExtra: string[];
  /** Per fault: ms from its end until the last decision of the policy on its stores before the next fault. */
  backOnRedisMs: number[];
  findings: string[];
}

const duration = (d: number | string) =>
  typeof d === 'number' ? d : (ms(d as Parameters<typeof ms>[0]) as number);

/** Each rule's window read from its definition. */
export function windowSpecs(rules: Rule[] = [...apiRules(), ...serviceRules()]): Map<string, WindowSpec> {
  const out = new Map<string, WindowSpec>();
  for (const rule of rules) {
    const w = rule.window;
    if (typeof rule.limit !== 'number' || typeof w === 'function' || w.type === 'concurrency') continue;
    const type = w.type === 'leaky-bucket' ? 'gcra' : w.type;
    const sizeMs = 'size' in w ? duration(w.size) : 0;
    const period =
      'unit' in w ? { minute: 60_000, hour: 3_600_000, day: 86_400_000 }[w.unit as string] : undefined;
    if (w.type === 'calendar' && (period === undefined || (w.timezone ?? 'UTC') !== 'UTC'))
      throw new Error(`the audit models calendar minutes, hours and days in UTC only (rule ${rule.name})`);
    const burst = 'burst' in w && w.burst !== undefined ? w.burst : rule.limit;
    const buckets =
      type === 'sliding' ? ('buckets' in w && w.buckets !== undefined ? w.buckets : 10) : (period ?? 0);
    out.set(rule.name, { type, limit: rule.limit, sizeMs, buckets, burst });
  }
  return out;
}

function outcomeEffect(rules: Rule[]) {
  const byName = new Map(rules.map((r) => [r.name, r]));
  return (name: string, outcome: 'success' | 'failure'): 'keep' | 'refund' | 'clear' => {
    const rule = byName.get(name);
    if (rule === undefined) return 'keep';
    if (outcome === 'success' && rule.resetOnSuccess) return 'clear';
    const countOn = rule.countOn ?? 'all';
    return countOn === 'all' || countOn === outcome ? 'keep' : 'refund';
  };
}

const overlaps = (a: [number, number], b: [number, number]) => a[0] < b[1] && b[0] < a[1];

/** One finding per window (a window is reported once, at its fullest). */
function perWindow(excess: Excess[]): Excess[] {
  const byWindow = new Map<string, Excess>();
  for (const e of excess) {
    const id = `${e.start}`;
    const seen = byWindow.get(id);
    if (seen === undefined || e.units - e.allowed > seen.units - seen.allowed) byWindow.set(id, e);
  }
  return [...byWindow.values()];
}

/** The latest a call that failed at `hi` may still run: a stalled server runs what it holds when it wakes. */
export function stalledUntilOf(faults: FaultWindow[], storeRetryMs: number) {
  return (store: StoreName, hi: number): number =>
    faults
      .filter((f) => f.stores.includes(store) && f.start <= hi && f.end + storeRetryMs >= hi)
      .reduce((latest, f) => Math.max(latest, f.end + storeRetryMs), hi);
}

export async function audit(input: {
  files: string[];
  faults: FaultWindow[];
  listings: LockListing[];
  processes: number;
  storeRetryMs: number;
}): Promise<AuditResult> {
  const rules = [...apiRules(), ...serviceRules()];
  const specs = windowSpecs(rules);
  const stalledUntil = stalledUntilOf(input.faults, input.storeRetryMs);
  const { histories, policyTimes, ...ledger } = await loadLedgers(
    input.files,
    outcomeEffect(rules),
    specs,
    stalledUntil,
  );
  const result: AuditResult = {
    ...ledger,
    keys: histories.size,
    redisOverOutsideFaults: 0,
    redisOverDuringFaults: 0,
    receiptMismatches: 0,
    overAdmissionsOutsideOutages: 0,
    overUnitsOutsideOutages: 0,
    outageWindowsOver: 0,
    worstOutageRatio: 0,
    outageWindowsOverBound: 0,
    admittedWhileLocked: 0,
    locksListed: 0,
    locksInForce: 0,
    locksMissing: [],
    locksExtra: [],
    backOnRedisMs: [],
    findings: [],
  };
  const note = (line: string) => {
    if (result.findings.length < 30) result.findings.push(line);
  };
  // A fault's effects last until the policy's skip interval after its end has passed.
  const faultSpans = (h: KeyHistory) =>
    input.faults
      .filter((f) => f.stores.includes(h.store))
      .map((f) => ({
        span: [f.start, f.end + input.storeRetryMs] as [number, number],
        dataLoss: f.dataLoss,
      }));

  for (const h of histories.values()) {
    const spec = specs.get(h.rule) as WindowSpec;
    const faults = faultSpans(h);
    for (const unit of h.redis) {
      if (!receiptMismatch(spec, unit)) continue;
      result.receiptMismatches++;
      note(
        `${h.store} ${h.rule}[${h.key}]: unit at ${unit.t} outside the window its receipt ${unit.receipt} names`,
      );
    }
    for (const e of perWindow(windowExcess(spec, h.redis))) {
      const duringFault = faults.some((f) => overlaps([e.start, e.end], f.span));
      if (duringFault) result.redisOverDuringFaults++;
      else {
        result.redisOverOutsideFaults++;
        note(
          `${h.store} ${h.rule}[${h.key}]: Redis counted ${e.units} > ${e.allowed} in [${e.start}, ${e.end})`,
        );
      }
    }
    for (const e of perWindow(windowExcess(spec, h.app))) {
      const span: [number, number] = [e.start, e.end];
      const fault = faults.filter((f) => overlaps(span, f.span));
      const outage = e.policyUnits > 0 || h.unknown.some((u) => overlaps(span, u)) || fault.length > 0;
      if (!outage) {
        result.overAdmissionsOutsideOutages++;
        result.overUnitsOutsideOutages += e.units - e.allowed;
        note(
          `${h.store} ${h.rule}[${h.key}]: admitted ${e.units} > ${e.allowed} in [${e.start}, ${e.end}) outside any outage`,
        );
        continue;
      }
      result.outageWindowsOver++;
      const ratio = e.units / e.allowed;
      result.worstOutageRatio = Math.max(result.worstOutageRatio, ratio);
      const bound =
        (spec.type === 'fixed' ? 2 : 1) * input.processes + 1 + (fault.some((f) => f.dataLoss) ? 1 : 0);
      if (ratio > bound) {
        result.outageWindowsOverBound++;
        note(`${h.store} ${h.rule}[${h.key}]: ${e.units} in an outage window allowing ${e.allowed}`);
      }
    }
    const inLock = admittedWhileLocked(h);
    if (inLock.length > 0) {
      result.admittedWhileLocked += inLock.length;
      note(`${h.store} ${h.rule}[${h.key}]: ${inLock.length} admitted by Redis inside a lock it held`);
    }
  }
  compareLocks(result, histories, input.listings);
  // The policy decided from a fault's start until Redis answered again: the last policy decision of the
  // stretch that starts with the fault (decisions less than two skip intervals apart) ends it.
  for (const f of input.faults) {
    let back = 0;
    for (const store of f.stores) {
      let last = f.end;
      for (const [lo, hi] of policyTimes[store].filter(([lo]) => lo >= f.start).sort((a, b) => a[0] - b[0])) {
        if (lo > last + 2 * input.storeRetryMs) break;
        last = Math.max(last, hi);
      }
      back = Math.max(back, last - f.end);
    }
    result.backOnRedisMs.push(back);
  }
  return result;
}
