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
  /**
   * The earliest a refund may have given it back or a clear or reset emptied its key (it counts until
   * then); Infinity: never. Such a call runs somewhere in its bracket (a call that got no answer may
   * have run, or not), so `refundedBy` is the latest it may have happened: a stretch of time holds the
   * refund when it may have, from refundedAt to refundedBy.
   */
  refundedAt: number;
  refundedBy: number;
}

/** Gives `unit` back somewhere in [at, by] (the earliest and latest of every give-back it may have had). */
export function giveBack(unit: Unit, at: number, by: number): void {
  unit.refundedAt = Math.min(unit.refundedAt, at);
  unit.refundedBy = unit.refundedBy === Infinity ? by : Math.max(unit.refundedBy, by);
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
      // v may have been given back before u was decided (as late as u.tMax): it does not count.
      if (v.refundedAt <= u.tMax || !together(v, u)) continue;
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
 * Rate types: in any stretch [x, T], the units admitted less the units given back (refunds, which
 * refill the bucket when they happen) may be at most burst + refill over T - x: the bucket holds at
 * most `burst` at x, and nothing else puts units in. Times are known within brackets, so each stretch
 * counts what surely lies in it and every give-back that may: an admission decided somewhere in
 * [t, tMax] (a later Cluster group) starts stretches at t and ends them at tMax; a give-back known to
 * lie in [refundedAt, refundedBy] is in every stretch that ends after refundedAt and starts before
 * refundedBy.
 */
function rateExcess(spec: WindowSpec, units: Unit[]): Excess[] {
  const perMs = spec.limit / spec.sizeMs;
  type Kind = 'admitFrom' | 'admitBy' | 'backFrom' | 'backBy';
  type Event = { at: number; unit: Unit; kind: Kind };
  const given = units.filter((u) => u.refundedAt !== Infinity);
  const events: Event[] = [
    ...units.map((unit): Event => ({ at: unit.t, unit, kind: 'admitFrom' })),
    ...units.map((unit): Event => ({ at: unit.tMax, unit, kind: 'admitBy' })),
    ...given.map((unit): Event => ({ at: unit.refundedAt, unit, kind: 'backFrom' })),
    ...given.map((unit): Event => ({ at: unit.refundedBy, unit, kind: 'backBy' })),
  ].sort((a, b) => a.at - b.at);
  const out: Excess[] = [];
  // Prefix sums: `ends` counts admissions at their latest and give-backs at their earliest (what a
  // stretch ending then holds), `starts` admissions at their earliest and give-backs at their latest
  // (what lies before a stretch starting then). ends(T) - starts(x) <= burst + perMs (T - x)
  // <=>  ends(T) - perMs T <= burst + min over x <= T of (starts(x) - perMs x).
  const ends = { units: 0, policy: 0 };
  const starts = { units: 0, policy: 0 };
  let best = Infinity;
  let bestAt = 0;
  let bestPolicy = 0;
  for (let i = 0; i < events.length; ) {
    const at = (events[i] as Event).at;
    // Events at one time all count inside a stretch that starts or ends then (the order within a
    // millisecond is not known): the lenient reading.
    if (starts.units - perMs * at < best) {
      best = starts.units - perMs * at;
      bestAt = at;
      bestPolicy = starts.policy;
    }
    let ending = false;
    for (; i < events.length && (events[i] as Event).at === at; i++) {
      const { unit, kind } = events[i] as Event;
      const sum = kind === 'admitFrom' || kind === 'backBy' ? starts : ends;
      const sign = kind === 'admitFrom' || kind === 'admitBy' ? 1 : -1;
      sum.units += sign * unit.cost;
      if (unit.policy) sum.policy += sign * unit.cost;
      if (kind === 'admitBy') ending = true;
    }
    if (!ending) continue;
    const slack = spec.burst + best - (ends.units - perMs * at);
    if (slack < -1e-6) {
      const allowed = spec.burst + perMs * (at - bestAt);
      out.push({
        start: bestAt,
        end: at,
        units: allowed - slack,
        allowed,
        policyUnits: ends.policy - bestPolicy,
      });
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
