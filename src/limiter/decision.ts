// Decisions: per-rule store results folded into the one answer a request gets.
import type { OpResult } from '../stores/store.js';
import type { Decision, RuleResult } from '../types.js';

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
