// The audit's own model of each window type, written from the README's definitions (not from the
// library's code): given one key's admissions, the windows in which more was admitted than the limit.

/** A rule as the audit reads it from its definition. */
export interface WindowSpec {
  type: 'fixed' | 'calendar' | 'sliding-log' | 'sliding' | 'token-bucket' | 'gcra';
  limit: number;
  sizeMs: number;
  /** Sliding counter: buckets; calendar: the period length (UTC minute or day). */
  buckets: number;
  /** Token bucket and GCRA capacity. */
  burst: number;
}

/** Units admitted at one time for one key of one rule. */
export interface Unit {
  /**
   * When it was decided: the store's time (checked against the caller's bracket), or the bracket's
   * middle for the policy's units. On a Cluster a request over several slots is decided slot by slot,
   * so an op may be decided up to `tMax` (the end of the caller's bracket).
   */
  t: number;
  tMax: number;
  cost: number;
  /** The store's receipt (fixed: window end; calendar: period end; sliding: bucket index); NaN for policy units. */
  receipt: number;
  /** Decided by the failure policy (not counted in Redis). */
  policy: boolean;
  /** When a refund gave it back or a clear or reset emptied its key (it counts until then); Infinity: never. */
  refundedAt: number;
}

/** A window that held more than its limit: its span, the units in it, and whether policy units were among them. */
export interface Excess {
  start: number;
  end: number;
  units: number;
  /** What the window may hold: limit, or burst + refill for the rate types. */
  allowed: number;
  policyUnits: number;
}

/**
 * Counting windows: at each unit, the live units of its window (those before it or in the same ms that
 * still count) against the limit. `windowOf(u)` is u's window; `together(v, u)`: v counts in u's window.
 */
function countingExcess(
  spec: WindowSpec,
  units: Unit[],
  windowOf: (u: Unit) => [number, number],
  together: (v: Unit, u: Unit) => boolean,
): Excess[] {
  const out: Excess[] = [];
  for (let i = 0; i < units.length; i++) {
    const u = units[i] as Unit;
    const [start, end] = windowOf(u);
    let last = i;
    while (last + 1 < units.length && (units[last + 1] as Unit).t === u.t) last++;
    let total = 0;
    let policyUnits = 0;
    // Units are sorted by `t`, which may run up to a bracket's length early: look a second further back.
    for (let j = last; j >= 0 && (units[j] as Unit).t >= start - 1000; j--) {
      const v = units[j] as Unit;
      if (v.refundedAt <= u.t || !together(v, u)) continue;
      total += v.cost;
      if (v.policy) policyUnits += v.cost;
    }
    if (total > spec.limit) out.push({ start, end, units: total, allowed: spec.limit, policyUnits });
  }
  return out;
}

/**
 * Fixed windows start at a key's first counted hit: the store's receipts say where each window ends.
 * Units the policy decided (no receipt) belong to the store window they fall in, else to windows of
 * their own, started at the first of them as the store would have.
 */
function fixedWindows(spec: WindowSpec, units: Unit[]): (u: Unit) => [number, number] {
  const ends = [...new Set(units.filter((u) => !u.policy).map((u) => u.receipt))].sort((a, b) => a - b);
  const own = new Map<Unit, number>();
  let virtualEnd = -Infinity;
  for (const u of units) {
    if (!u.policy) continue;
    const storeEnd = ends.find((end) => u.t >= end - spec.sizeMs && u.t < end);
    if (storeEnd !== undefined) own.set(u, storeEnd);
    else {
      if (u.t >= virtualEnd) virtualEnd = u.t + spec.sizeMs;
      own.set(u, virtualEnd);
    }
  }
  return (u) => {
    const end = u.policy ? (own.get(u) as number) : u.receipt;
    return [end - spec.sizeMs, end];
  };
}

/**
 * Rate types: in any stretch [t_i, t_j], the units admitted less the units given back (refunds, which
 * refill the bucket at the time they happen) may be at most burst + refill over t_j - t_i: the bucket
 * holds at most `burst` at t_i, and nothing else puts units in.
 */
function rateExcess(spec: WindowSpec, units: Unit[]): Excess[] {
  const perMs = spec.limit / spec.sizeMs;
  // Admissions, and the refunds of units given back. Events at one time all count inside a stretch that
  // starts or ends then (the order within a millisecond is not known): the lenient reading.
  const events = [
    ...units.map((u) => ({ at: u.t, unit: u, delta: u.cost })),
    ...units
      .filter((u) => u.refundedAt !== Infinity)
      .map((u) => ({ at: u.refundedAt, unit: u, delta: -u.cost })),
  ].sort((a, b) => a.at - b.at);
  const out: Excess[] = [];
  // Prefix sums: S_j - S_(i-1) <= burst + perMs (t_j - t_i)  <=>  S_j - perMs t_j <= burst + min_i (S_(i-1) - perMs t_i).
  let sum = 0;
  let best = Infinity;
  let bestAt = 0;
  let bestPolicy = 0;
  let policySum = 0;
  for (let i = 0; i < events.length; ) {
    const at = (events[i] as { at: number }).at;
    if (sum - perMs * at < best) {
      best = sum - perMs * at;
      bestAt = at;
      bestPolicy = policySum;
    }
    let end = at;
    let admitted = false;
    for (; i < events.length && (events[i] as { at: number }).at === at; i++) {
      const { unit, delta } = events[i] as (typeof events)[number];
      sum += delta;
      if (unit.policy) policySum += delta;
      // The stretch ends as late as its last unit may have been decided.
      if (delta > 0) {
        admitted = true;
        end = Math.max(end, unit.tMax);
      }
    }
    if (!admitted) continue;
    const slack = spec.burst + best - (sum - perMs * end);
    if (slack < -1e-6) {
      const allowed = spec.burst + perMs * (end - bestAt);
      out.push({ start: bestAt, end, units: allowed - slack, allowed, policyUnits: policySum - bestPolicy });
    }
  }
  return out;
}

/** The windows of one key that held more than they may, by the rule's own definition. */
export function windowExcess(spec: WindowSpec, unsorted: Unit[]): Excess[] {
  const units = [...unsorted].sort((a, b) => a.t - b.t);
  switch (spec.type) {
    case 'fixed': {
      const windowOf = fixedWindows(spec, units);
      return countingExcess(spec, units, windowOf, (v, u) => windowOf(v)[1] === windowOf(u)[1]);
    }
    case 'calendar': {
      // The store's receipt is the end of the period it counted in.
      const period = spec.buckets;
      const index = (u: Unit) => (u.policy ? Math.floor(u.t / period) : u.receipt / period - 1);
      return countingExcess(
        spec,
        units,
        (u) => [index(u) * period, (index(u) + 1) * period],
        (v, u) => index(v) === index(u),
      );
    }
    case 'sliding-log':
      return countingExcess(
        spec,
        units,
        (u) => [u.t - spec.sizeMs + 1, u.t + spec.sizeMs],
        (v, u) => v.t > u.t - spec.sizeMs,
      );
    case 'sliding': {
      // A hit in bucket j counts while the current bucket index is at most j + buckets.
      // The store's receipt is the bucket it counted in.
      const width = spec.sizeMs / spec.buckets;
      const index = (u: Unit) => (u.policy ? Math.floor(u.t / width) : u.receipt);
      return countingExcess(
        spec,
        units,
        (u) => [(index(u) - spec.buckets) * width, (index(u) + 1) * width],
        (v, u) => index(v) >= index(u) - spec.buckets,
      );
    }
    default:
      return rateExcess(spec, units);
  }
}

/** Where the store's own receipt contradicts the model: no time the op may have been decided at fits it. */
export function receiptMismatch(spec: WindowSpec, u: Unit): boolean {
  if (u.policy) return false;
  switch (spec.type) {
    case 'fixed':
      return u.tMax < u.receipt - spec.sizeMs || u.t >= u.receipt;
    case 'calendar':
      return u.receipt % spec.buckets !== 0 || u.tMax < u.receipt - spec.buckets || u.t >= u.receipt;
    case 'sliding': {
      const width = spec.sizeMs / spec.buckets;
      return u.receipt < Math.floor(u.t / width) || u.receipt > Math.floor(u.tMax / width);
    }
    case 'sliding-log':
      return u.receipt < u.t || u.receipt > u.tMax;
    default:
      return false;
  }
}
