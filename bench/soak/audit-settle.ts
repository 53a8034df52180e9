// The audit of settled costs (docs/rules.md, "Settled costs"): per key and period, what the store charged
// (estimates admitted, differences added, differences given back) within the limit plus what the
// requests still in flight at the period's last admission settled above their estimates.
import type { FaultWindow } from './audit.js';
import { flightRecords } from './audit-slots.js';
import type { StoreName } from './ledger.js';
import { flightRules, SETTLE_PERIODS } from './rules.js';

export interface SettleAudit {
  settles: number;
  /** Settles above the estimate, below it, and that failed (the estimate stands). */
  above: number;
  below: number;
  failed: number;
  periods: number;
  /** Periods charged past the bound with no outage in them (must be 0), the worst excess of those. */
  overBoundOutsideOutages: number;
  /** Periods with an outage in them, and the worst charge there against the bound (a multiple). */
  outagePeriods: number;
  worstOutageRatio: number;
  /** Periods that went past the limit (debts), all within the bound when the check holds. */
  overLimit: number;
  findings: string[];
}

interface Period {
  charged: number;
  lastAdmission: number;
  /** Differences added (record mode): when the store added them, and how much. */
  debts: Array<{ t: number; cost: number }>;
  outage: boolean;
}

const LIMITS = new Map(flightRules().map((r) => [r.name, r.limit as number]));

export async function auditSettle(input: {
  files: string[];
  faults: FaultWindow[];
  storeRetryMs: number;
  stalledUntil: (store: StoreName, hi: number) => number;
}): Promise<SettleAudit> {
  const out: SettleAudit = {
    settles: 0,
    above: 0,
    below: 0,
    failed: 0,
    periods: 0,
    overBoundOutsideOutages: 0,
    outagePeriods: 0,
    worstOutageRatio: 0,
    overLimit: 0,
    findings: [],
  };
  const periods = new Map<string, Period>();
  /** Spans in which a call of a key got no answer or went to the failure policy. */
  const unknown = new Map<string, Array<[number, number]>>();
  const mark = (id: string, span: [number, number]) => {
    const list = unknown.get(id) ?? [];
    list.push(span);
    unknown.set(id, list);
  };
  const end = (rule: string, t: number) => {
    const size = SETTLE_PERIODS.get(rule) as number;
    return (Math.floor(t / size) + 1) * size;
  };
  const period = (s: StoreName, rule: string, key: string, periodEnd: number): Period => {
    const id = `${s}|${rule}|${key}|${periodEnd}`;
    let p = periods.get(id);
    if (p === undefined) {
      p = { charged: 0, lastAdmission: Number.NEGATIVE_INFINITY, debts: [], outage: false };
      periods.set(id, p);
    }
    return p;
  };
  for (const file of input.files) {
    /** The period end each admission's receipt stands for, per store, rule and key. */
    const receipts = new Map<string, number>();
    const refunds: Array<{
      s: StoreName;
      rule: string;
      key: string;
      receipt: number;
      lo: number;
      cost: number;
    }> = [];
    for await (const r of flightRecords(file)) {
      if (r.t === 'S') {
        out.settles++;
        if (!r.ok) out.failed++;
        else if (r.actual > r.est) out.above++;
        else if (r.actual < r.est) out.below++;
        if (r.src !== 'store')
          for (const rule of SETTLE_PERIODS.keys()) mark(`${r.s}|${rule}|${r.key}`, [r.lo, r.hi]);
      } else if (r.t === 'E') {
        const ops = r.ops.filter(([rule]) => SETTLE_PERIODS.has(rule));
        if (ops.length === 0) continue;
        if (!r.ok) {
          for (const [rule, key] of ops) mark(`${r.s}|${rule}|${key}`, [r.lo, input.stalledUntil(r.s, r.hi)]);
          continue;
        }
        const admitted = r.mode === 'check' && r.ops.every((op) => op[3] === 1);
        if (r.mode === 'record') {
          for (const [rule, key, cost] of ops) {
            const p = period(r.s, rule, key, end(rule, r.now));
            p.charged += cost;
            p.debts.push({ t: r.now, cost });
          }
        } else if (admitted) {
          for (const [rule, key, cost, , receipt] of ops) {
            const periodEnd = end(rule, r.now);
            const p = period(r.s, rule, key, periodEnd);
            p.charged += cost;
            p.lastAdmission = Math.max(p.lastAdmission, r.now);
            receipts.set(`${r.s}|${rule}|${key}|${receipt}`, periodEnd);
          }
        }
      } else if (r.t === 'R' && r.rc !== undefined) {
        r.ops.forEach(([rule, key, cost], i) => {
          if (SETTLE_PERIODS.has(rule))
            refunds.push({ s: r.s, rule, key, receipt: r.rc?.[i] as number, lo: r.lo, cost });
        });
      }
    }
    // A difference given back goes to the period that holds the estimate, while it lasts; a refund that
    // started before that period ended may have reached it (counted as given back: the audit's benefit of the doubt).
    for (const f of refunds) {
      const periodEnd = receipts.get(`${f.s}|${f.rule}|${f.key}|${f.receipt}`);
      if (periodEnd === undefined || f.lo >= periodEnd) continue;
      period(f.s, f.rule, f.key, periodEnd).charged -= f.cost;
    }
  }
  for (const [id, p] of periods) {
    out.periods++;
    const [s, rule, key, endText] = id.split('|') as [StoreName, string, string, string];
    const periodEnd = Number(endText);
    const span: [number, number] = [periodEnd - (SETTLE_PERIODS.get(rule) as number), periodEnd];
    const hit = ([lo, hi]: [number, number]) => lo < span[1] && span[0] < hi;
    p.outage =
      input.faults.some((f) => f.stores.includes(s) && hit([f.start, f.end + input.storeRetryMs])) ||
      (unknown.get(`${s}|${rule}|${key}`) ?? []).some(hit);
    const limit = LIMITS.get(rule) as number;
    // Differences added after the last admission were in flight then: the documented excess.
    const excess = p.debts.filter((d) => d.t >= p.lastAdmission).reduce((sum, d) => sum + d.cost, 0);
    const bound = limit + excess;
    if (p.charged > limit) out.overLimit++;
    if (p.outage) {
      out.outagePeriods++;
      out.worstOutageRatio = Math.max(out.worstOutageRatio, p.charged / bound);
    } else if (p.charged > bound) {
      out.overBoundOutsideOutages++;
      if (out.findings.length < 20)
        out.findings.push(
          `${id}: charged ${p.charged} > limit ${limit} + ${excess} settled after the last admission`,
        );
    }
  }
  return out;
}
