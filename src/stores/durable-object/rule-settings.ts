// Rule-wide limits on Durable Objects. One object per store prefix (`<prefix>#limits`) keeps each rule's
// value and hands the schedule of values to each Worker with a lease; the Worker sends the schedule with
// every decision and the identity's object reads the value in force at its own time, in the same call.
// A change is scheduled no sooner than the end of every lease another Worker holds on the schedule before
// it, so that no object decides on a schedule that lacks a change in force (docs/edge.md).
import type { RuleLimit } from '../../types.js';

/** One value of a rule-wide limit: in force from `fromMs`, until `untilMs` (null: no end); limit null: none. */
export interface Change {
  fromMs: number;
  limit: number | null;
  untilMs: number | null;
}

/** What a Worker sends with a decision: the schedule of each rule, and when its lease on it ends. */
export interface RuleLimits {
  /** Epoch ms (the limits object's clock) after which an object refuses to decide on it. */
  leaseUntil: number;
  rules: Record<string, Change[]>;
  /** Orders the leases one limits object handed out (a Worker keeps the latest); objects ignore it. */
  issued?: number;
}

/** The rule-wide limit in force at `nowMs` in a rule's schedule (changes in `fromMs` order); undefined: none. */
export function ruleLimitAt(schedule: readonly Change[] | undefined, nowMs: number): Change | undefined {
  if (schedule === undefined) return undefined;
  let current: Change | undefined;
  for (const change of schedule) if (change.fromMs <= nowMs) current = change;
  if (current === undefined || current.limit === null) return undefined;
  return current.untilMs !== null && current.untilMs <= nowMs ? undefined : current;
}

/** Storage rows of the limits object: `w<rule as JSON>` a rule's schedule, `W` when the leases handed out end. */
const FLOOR_ROW = 'W';

/**
 * The limits object's state: each rule's schedule, and each Worker's lease on it (a Worker is named by
 * a random id its store draws). Leases are kept in memory; the latest end of any lease handed out is
 * stored too, so that an object restarted (evicted, moved) schedules changes after the leases it
 * forgot.
 */
export class RuleSettings {
  readonly #rules = new Map<string, Change[]>();
  readonly #leases = new Map<string, number>();
  /** No lease handed out before this object last started ends later. */
  #floorMs = 0;
  /** The latest lease end handed out (stored as FLOOR_ROW). */
  #latestMs = 0;
  /** The last lease's order: past every one before, and (ms × 1024) past those of a previous start. */
  #issued = 0;
  /** Rows to write (a schedule, or the floor), by name; undefined: delete. */
  readonly changed = new Map<string, unknown>();

  /** Takes a stored row; false when it is not one of this object's. */
  load(name: string, row: unknown): boolean {
    if (name === FLOOR_ROW) {
      this.#floorMs = this.#latestMs = row as number;
      return true;
    }
    if (!name.startsWith('w')) return false;
    this.#rules.set(JSON.parse(name.slice(1)) as string, row as Change[]);
    return true;
  }

  get empty(): boolean {
    return this.#rules.size === 0 && this.#latestMs === 0;
  }

  /** Every schedule, and a lease on them for `holder` that ends `leaseMs` from now. */
  lease(holder: string, leaseMs: number, nowMs: number): RuleLimits {
    const leaseUntil = nowMs + leaseMs;
    this.#leases.set(holder, Math.max(this.#leases.get(holder) ?? 0, leaseUntil));
    if (leaseUntil > this.#latestMs) {
      this.#latestMs = leaseUntil;
      this.changed.set(FLOOR_ROW, leaseUntil);
    }
    for (const [id, untilMs] of this.#leases) if (untilMs <= nowMs) this.#leases.delete(id);
    const rules: Record<string, Change[]> = {};
    for (const rule of [...this.#rules.keys()]) {
      const schedule = this.#prune(rule, nowMs);
      if (schedule !== undefined) rules[rule] = schedule;
    }
    this.#issued = Math.max(this.#issued + 1, nowMs * 1024);
    return { leaseUntil, rules, issued: this.#issued };
  }

  /**
   * Schedules `limit` (null: none) for `rule` from the moment every other Worker's lease has ended (now,
   * when none holds one), and no sooner than a change scheduled before it; answers that moment.
   */
  set(holder: string, rule: string, limit: number | null, forMs: number | null, nowMs: number): number {
    let fromMs = Math.max(nowMs, this.#floorMs);
    for (const [id, untilMs] of this.#leases) if (id !== holder) fromMs = Math.max(fromMs, untilMs);
    const schedule = this.#prune(rule, nowMs) ?? [];
    const last = schedule[schedule.length - 1];
    if (last !== undefined) fromMs = Math.max(fromMs, last.fromMs);
    const untilMs = limit === null || forMs === null ? null : fromMs + forMs;
    const kept = schedule.filter((change) => change.fromMs < fromMs);
    kept.push({ fromMs, limit, untilMs });
    this.#store(rule, kept);
    return fromMs;
  }

  /** The rule-wide limits in force now among `rules`. */
  inForce(rules: readonly string[], nowMs: number): RuleLimit[] {
    const out: RuleLimit[] = [];
    for (const rule of rules) {
      const change = ruleLimitAt(this.#prune(rule, nowMs), nowMs);
      if (change === undefined) continue;
      const { limit, untilMs } = change as { limit: number; untilMs: number | null };
      out.push(untilMs === null ? { rule, limit } : { rule, limit, untilMs });
    }
    return out;
  }

  /** A rule's schedule less the changes that no longer matter at `nowMs` (undefined: nothing left). */
  #prune(rule: string, nowMs: number): Change[] | undefined {
    const schedule = this.#rules.get(rule);
    if (schedule === undefined) return undefined;
    let first = 0;
    for (let i = 1; i < schedule.length; i++) if ((schedule[i] as Change).fromMs <= nowMs) first = i;
    const kept = schedule.slice(first);
    const only = kept[0] as Change;
    const over = kept.length === 1 && only.fromMs <= nowMs && ruleLimitAt(kept, nowMs) === undefined;
    if (over) this.#store(rule, []);
    else if (first > 0) this.#store(rule, kept);
    return over ? undefined : kept;
  }

  #store(rule: string, schedule: Change[]): void {
    const name = `w${JSON.stringify(rule)}`;
    if (schedule.length === 0) this.#rules.delete(rule);
    else this.#rules.set(rule, schedule);
    this.changed.set(name, schedule.length === 0 ? undefined : schedule);
  }
}

/** The part of a lease that is used: a Worker asks again once half has passed, and waits once 90% has. */
const RENEW_AT = 0.5;
const EXPIRE_AT = 0.9;

/**
 * The Worker's lease on the rule-wide limits: the schedules it sends with each decision, asked for again
 * once half the lease has passed (in the background) and before any decision once 90% has (so a message
 * reaches its object before the lease ends there, but for a delay over a tenth of the lease). Time is the
 * store's clock; `changed` hears each rule whose schedule a new lease changed.
 */
export class LimitLease {
  readonly #leaseMs: number;
  readonly #ask: () => Promise<RuleLimits>;
  readonly #now: () => number;
  readonly #changed: (rule: string) => void;
  #limits: RuleLimits | undefined;
  #sentAt = 0;
  #asking: Promise<RuleLimits> | undefined;
  /** Changes coming into force up to this time (store clock) were told to `changed`. */
  #toldUntil = 0;

  constructor(
    leaseMs: number,
    ask: () => Promise<RuleLimits>,
    now: () => number,
    changed: (rule: string) => void,
  ) {
    this.#leaseMs = leaseMs;
    this.#ask = ask;
    this.#now = now;
    this.#changed = changed;
  }

  /** The lease in hand while under 90% of it has passed; undefined: ask (`current`). */
  fresh(): RuleLimits | undefined {
    if (this.#limits === undefined) return undefined;
    const now = this.#now();
    this.#tell(this.#limits, now);
    const age = now - this.#sentAt;
    if (age >= this.#leaseMs * EXPIRE_AT) return undefined;
    if (age >= this.#leaseMs * RENEW_AT) this.#renew().catch(() => undefined);
    return this.#limits;
  }

  /** The lease in hand when fresh, else a new one (one request, shared by the decisions that wait for it). */
  current(): RuleLimits | Promise<RuleLimits> {
    return this.fresh() ?? this.#renew();
  }

  /** Forgets the lease (an object found it ended): the next decision asks for a new one. */
  drop(): void {
    this.#limits = undefined;
  }

  /** Keeps `limits` (asked for at `sentAt`) unless a lease handed out after it is in hand. */
  take(limits: RuleLimits, sentAt: number): void {
    const old = this.#limits;
    if (old !== undefined && (old.issued ?? 0) > (limits.issued ?? 0)) return;
    this.#limits = limits;
    this.#sentAt = Math.max(this.#sentAt, sentAt);
    if (old === undefined) return;
    for (const rule of new Set([...Object.keys(old.rules), ...Object.keys(limits.rules)]))
      if (JSON.stringify(old.rules[rule]) !== JSON.stringify(limits.rules[rule])) this.#changed(rule);
  }

  /** Tells `changed` of each rule whose scheduled change (or `for`) came into force since it was last told. */
  #tell(limits: RuleLimits, now: number): void {
    const since = this.#toldUntil;
    if (now <= since) return;
    this.#toldUntil = now;
    if (since === 0) return;
    for (const [rule, schedule] of Object.entries(limits.rules)) {
      const at = (ms: number | null) => ms !== null && ms > since && ms <= now;
      if (schedule.some((change) => at(change.fromMs) || at(change.untilMs))) this.#changed(rule);
    }
  }

  #renew(): Promise<RuleLimits> {
    if (this.#asking !== undefined) return this.#asking;
    const sentAt = this.#now();
    const asking = this.#ask().then(
      (limits) => {
        this.#asking = undefined;
        this.take(limits, sentAt);
        return limits;
      },
      (error: unknown) => {
        this.#asking = undefined;
        throw error;
      },
    );
    this.#asking = asking;
    return asking;
  }
}
