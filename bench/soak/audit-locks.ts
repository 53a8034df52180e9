// The audit's lock checks: Redis admitted nothing for a key while it held a lock on it, and `locked()`
// listed at the end exactly the locks then in force (the latest Redis placed per key, not reset since).
import type { AuditResult } from './audit.js';
import type { KeyHistory } from './audit-units.js';
import type { LockListing } from './worker.js';

/** Units Redis admitted inside one of its own locks on the key. */
export function admittedWhileLocked(h: KeyHistory): KeyHistory['redis'] {
  const out: KeyHistory['redis'] = [];
  for (const lock of h.locks) {
    // An operator reset whose call overlaps the lock may have cleared it: what follows its start is excused.
    const resets = h.emptied.filter((x) => x.policyToo && x.hi >= lock.start && x.at < lock.end);
    const clearedFrom = Math.min(Infinity, ...resets.map((x) => x.at));
    out.push(...h.redis.filter((u) => u.t > lock.start && u.t < lock.end && u.t < clearedFrom));
  }
  return out;
}

/** The locks in force at the end (the latest Redis placed per key, not reset since) against `locked()`. */
export function compareLocks(
  result: AuditResult,
  histories: Map<string, KeyHistory>,
  listings: LockListing[],
): void {
  for (const listing of listings) {
    const listed = new Map(listing.locks.map((l) => [l.key, l.lockedUntil]));
    result.locksListed += listed.size;
    for (const key of listed.keys())
      if (!histories.has(`${listing.store}|${listing.rule}|${key}`))
        result.locksExtra.push(`${listing.store} ${listing.rule}[${key}] listed, never seen`);
    for (const h of histories.values()) {
      if (h.store !== listing.store || h.rule !== listing.rule) continue;
      const latest = h.locks.reduce<{ start: number; end: number } | undefined>(
        (a, b) => (a && a.start >= b.start ? a : b),
        undefined,
      );
      // A reset after the lock surely removed it; one whose call overlaps the lock's start (or that
      // failed, and may have run later) leaves it undecided.
      const resets = latest === undefined ? [] : h.emptied.filter((x) => x.policyToo && x.hi >= latest.start);
      const reset = resets.some((x) => x.certain && x.at > (latest?.start ?? 0));
      const inForce = latest !== undefined && !reset && resets.length === 0 && latest.end > listing.hi;
      const ambiguous =
        latest !== undefined &&
        !reset &&
        (resets.length > 0 || (latest.end >= listing.lo && latest.end <= listing.hi));
      const lostAnswer = h.unknown.length > 0;
      if (inForce) result.locksInForce++;
      const until = listed.get(h.key);
      if (inForce && until !== latest?.end) {
        result.locksMissing.push(
          `${h.store} ${h.rule}[${h.key}] until ${latest?.end} (listed: ${until ?? 'no'})`,
        );
      } else if (!inForce && !ambiguous && until !== undefined && !lostAnswer) {
        result.locksExtra.push(`${h.store} ${h.rule}[${h.key}] listed until ${until}`);
      }
    }
  }
}
