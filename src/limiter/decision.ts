// Decisions: per-rule store results folded into the one answer a request gets.
import type { OpResult } from '../stores/store.js';
import type { Decision, RuleResult } from '../types.js';

/** The last reservation id handed out in this process (see `RuleResult.reservation`). */
let lastReservation = 0;

/**
 * The reservation id of `decision`: the one a rule of it has already (the outcome's and the actual
 * cost's reservations of one decision share it), else a new one.
 */
export function reservationOf(decision: Decision): number {
  for (const r of decision.rules) if (r.reservation !== undefined) return r.reservation;
  return ++lastReservation;
}

/** The reservation id a decision, or a copy of it, carries; undefined when it reserved nothing. */
export function reservationIn(decision: Decision): number | undefined {
  const rules = decision?.rules;
  if (!Array.isArray(rules)) return undefined;
  for (const r of rules) if (typeof r?.reservation === 'number') return r.reservation;
  return undefined;
}

export function ruleResult(
  rule: string,
  key: string,
  limit: number,
  dryRun: boolean,
  r: OpResult,
): RuleResult {
  const out: RuleResult = {
    rule,
    key,
    allowed: r.allowed,
    limit,
    remaining: r.remaining,
    count: r.count,
    resetMs: Math.max(0, r.resetMs),
    locked: r.locked,
  };
  if (!r.allowed) out.retryAfterMs = Math.max(1, r.retryAfterMs);
  if (dryRun) out.dryRun = true;
  return out;
}

/**
 * The request is denied when an enforced rule denies: the first such rule (rule order) gives the
 * figures, and `retryAfterMs` is the longest wait among the denying rules, since all must admit.
 * When allowed, the figures are those of the rule with the least remaining.
 */
export function decide(results: RuleResult[]): Decision {
  if (results.length === 0)
    return { allowed: true, limit: 0, remaining: 0, count: 0, resetMs: 0, locked: false, rules: results };
  let denying: RuleResult | undefined;
  let retryAfterMs = 0;
  let tightest: RuleResult | undefined;
  let dryRunDenied = false;
  for (const r of results) {
    if (!r.allowed) {
      if (r.dryRun) dryRunDenied = true;
      else {
        denying ??= r;
        retryAfterMs = Math.max(retryAfterMs, r.retryAfterMs ?? 0);
      }
    }
    if (tightest === undefined || r.remaining < tightest.remaining) tightest = r;
  }
  const top = (denying ?? tightest) as RuleResult;
  const decision: Decision = {
    allowed: denying === undefined,
    limit: top.limit,
    remaining: top.remaining,
    count: top.count,
    resetMs: top.resetMs,
    rule: top.rule,
    locked: denying?.locked ?? false,
    rules: results,
  };
  if (denying !== undefined) decision.retryAfterMs = retryAfterMs;
  if (dryRunDenied) decision.dryRun = true;
  return decision;
}
