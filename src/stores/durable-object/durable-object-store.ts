// DurableObjectStore: the Worker's side of the Cloudflare store. Each identity's ops go to the object named
// after it (one object request), and a request whose rules span several identities is all or nothing.
import { describe } from '../../errors.js';
import type { LockInfo, RuleLimit } from '../../types.js';
import { Leases } from '../leasing/leases.js';
import type {
  EvalMode,
  EvalResult,
  HeldSlot,
  OpResult,
  Refund,
  Store,
  StoreChangeListener,
  StoreOp,
  StoreRule,
} from '../store.js';
import type { DurableObjectNamespaceLike } from './cloudflare-types.js';
import { type DurableObjectStoreOptions, readStoreOptions } from './durable-object-store-options.js';
import type { Answers, Call, Reply } from './protocol.js';
import { LimitLease, type RuleLimits } from './rule-settings.js';

export type { DurableObjectStoreOptions } from './durable-object-store-options.js';

/** An object found the lease on the rule-wide limits a decision was sent with ended: nothing decided. */
class StaleLimits extends Error {}

/** The indexes of the ops of one request that share an identity (one object), in the order first met. */
type Group = number[];

/**
 * The exact store on Cloudflare Workers: state in Durable Objects of the `RateLimitObject` class, one per
 * identity, reached through the namespace binding the Worker was given.
 *
 * @example
 * import { createLimiter } from 'ratekeeper';
 * import { DurableObjectStore } from 'ratekeeper/cloudflare';
 * const limiter = createLimiter({ store: new DurableObjectStore(env.RATE_LIMITER), rules });
 */
export class DurableObjectStore implements Store {
  readonly local = false;
  readonly #namespace: DurableObjectNamespaceLike;
  readonly #prefix: string;
  readonly #clock: (() => number) | undefined;
  /** Last time handed out: the store's clock never runs backwards. */
  #lastNow = 0;
  readonly #limitsLeaseMs: number;
  /** The rule-wide limits this Worker holds a lease on, sent with each decision; undefined when off. */
  readonly #limits: LimitLease | undefined;
  /** This store's name to the limits object: drawn on first use (Workers draw nothing at startup). */
  #holder: string | undefined;
  /** Blocks of hot keys' units (the `leasing` option); undefined when off. */
  readonly #leases: Leases | undefined;
  /**
   * With `leasing` only: a decision of hot keys answered from their blocks in the same call, while the
   * lease on the rule-wide limits is fresh; undefined otherwise (the limiter then calls `evaluate`).
   */
  readonly evaluateSync?: (ops: readonly StoreOp[], mode: EvalMode) => EvalResult | undefined;
  /**
   * With `ruleLimits` only: hears the rule-wide limits changed (`'reset'`, the rule, an empty key), by any
   * Worker, when this Worker's lease on them shows it (at its next decision that calls an object). Resets
   * and overrides of keys made elsewhere, and slots freed elsewhere, are not heard (docs/edge.md).
   */
  readonly onChange?: (listener: StoreChangeListener) => Promise<void>;
  readonly #listeners = new Set<StoreChangeListener>();
  /** With `ruleLimits` only: the rule-wide limits in force among `rules` (one request to the limits object). */
  readonly limits?: (rules: readonly StoreRule[]) => Promise<RuleLimit[]>;

  constructor(namespace: DurableObjectNamespaceLike, options: DurableObjectStoreOptions = {}) {
    const { prefix, clock, limitsLeaseMs: leaseMs, leasing } = readStoreOptions(namespace, options);
    this.#namespace = namespace;
    this.#prefix = prefix;
    this.#clock = clock;
    this.#limitsLeaseMs = leaseMs ?? 0;
    this.#limits =
      leaseMs === undefined
        ? undefined
        : new LimitLease(
            leaseMs,
            async () =>
              (await this.#call(this.#settingsName(), { call: 'lease-limits', ...this.#asHolder() })).answer,
            () => this.now(),
            // A rule whose limit changed: its blocks end (their units were counted on the old limit),
            // and the limiters' deny caches forget its keys.
            (rule) => {
              this.#leases?.forget(rule, '');
              for (const listener of this.#listeners) listener('reset', rule, '');
            },
          );
    if (leaseMs !== undefined) {
      this.limits = (rules) => this.#ruleLimits(rules);
      this.onChange = async (listener) => {
        this.#listeners.add(listener);
      };
    }
    this.#leases =
      leasing &&
      new Leases(
        {
          evaluate: (ops, mode) => this.#decide(ops, mode),
          refund: (refunds) => this.refund(refunds),
          now: () => this.now(),
        },
        leasing,
        // No change feed: resets and overrides made elsewhere end no block here (docs/edge.md).
        () => undefined,
      );
    const leases = this.#leases;
    if (leases !== undefined)
      this.evaluateSync = (ops, mode) =>
        this.#limits !== undefined && this.#limits.fresh() === undefined
          ? undefined
          : leases.answer(ops, mode);
  }

  /** The Worker's clock (or the injected one): calendar periods are computed on it; objects decide on theirs. */
  now(): number {
    const now = this.#clock === undefined ? Date.now() : this.#clock();
    if (now > this.#lastNow) this.#lastNow = now;
    return this.#lastNow;
  }

  /**
   * One object request when every op shares an identity. Several identities: `peek` and `record` ask each
   * object at once; `check` asks them one by one in op order, and when one denies, what the ones before
   * consumed is refunded and the ones after decide without consuming (their lockouts still lock).
   */
  async evaluate(ops: readonly StoreOp[], mode: EvalMode): Promise<EvalResult> {
    if (this.#leases === undefined) return this.#decide(ops, mode);
    // Units of a block are admitted only on a fresh lease of the rule-wide limits (a change ends them).
    await this.#limits?.current();
    return this.#leases.evaluate(ops, mode);
  }

  /** One decision; an object that found the lease on the rule-wide limits ended: once more, on a new one. */
  async #decide(ops: readonly StoreOp[], mode: EvalMode): Promise<EvalResult> {
    try {
      return await this.#evaluate(ops, mode, await this.#limits?.current());
    } catch (error) {
      if (!(error instanceof StaleLimits)) throw error;
      this.#limits?.drop();
      return this.#evaluate(ops, mode, await this.#limits?.current());
    }
  }

  async #evaluate(ops: readonly StoreOp[], mode: EvalMode, limits?: RuleLimits): Promise<EvalResult> {
    const groups = byIdentity(ops.map((op) => op.key));
    const results: OpResult[] = new Array(ops.length);
    let nowMs = 0;
    const decide = async (group: Group, quiet: boolean) => {
      const sent = group.map((i) => ops[i] as StoreOp);
      const reply = await this.#call(this.#identity(sent[0] as StoreOp), {
        call: 'evaluate',
        mode,
        ops: sent,
        quiet,
        limits,
      });
      nowMs ||= reply.nowMs;
      group.forEach((i, k) => {
        results[i] = reply.answer[k] as OpResult;
      });
    };
    if (mode !== 'check' || groups.length === 1) await Promise.all(groups.map((g) => decide(g, false)));
    else {
      for (let g = 0; g < groups.length; g++) {
        const group = groups[g] as Group;
        try {
          await decide(group, false);
        } catch (error) {
          // What the objects before consumed goes back before the fault reaches the failure policy.
          await Promise.allSettled(groups.slice(0, g).map((done) => this.#undo(ops, done, results, limits)));
          throw error;
        }
        if (!group.some((i) => denies(ops[i] as StoreOp, results[i] as OpResult))) continue;
        await Promise.all([
          ...groups.slice(0, g).map((done) => this.#undo(ops, done, results, limits)),
          ...groups.slice(g + 1).map((later) => decide(later, true)),
        ]);
        break;
      }
    }
    await this.#listLocks(ops, results);
    return { nowMs: nowMs || this.now(), results };
  }

  /** Gives reservations back (releases slots): one request per object, at once. */
  async refund(refunds: readonly Refund[]): Promise<boolean[]> {
    const limits = await this.#limits?.current();
    const answers = await this.#perIdentity<'refund'>(refunds, (group) => ({
      call: 'refund',
      refunds: group.map(({ op, receipt }) => ({ op, receipt })),
      limits,
    }));
    return answers.map((answer) => answer.held);
  }

  renew(slots: readonly Refund[]): Promise<boolean[]> {
    return this.#perIdentity<'renew'>(slots, (group) => ({
      call: 'renew',
      slots: group.map(({ op, receipt }) => ({ op, receipt })),
    }));
  }

  async holders(rule: StoreRule, key: string, limit: number): Promise<HeldSlot[]> {
    return (await this.#call(this.#name(key), { call: 'holders', rule, key, limit })).answer;
  }

  /** One request to the identity's object; a lock it cleared is taken off the rule's lock index (one more). */
  async reset(rule: StoreRule, key: string, options?: { keepLock?: boolean }): Promise<boolean> {
    this.#leases?.forget(rule.name, key);
    const keepLock = options?.keepLock === true;
    const { answer } = await this.#call(this.#name(key), { call: 'reset', rule, key, keepLock });
    if (answer) await this.#call(this.#locks(rule.name), { call: 'unlist-lock', rule: rule.name, key });
    return answer;
  }

  /**
   * One key's limit (and its window, `windowMs`): one request to its object. `key` null, the rule-wide
   * limit: one request to the limits object, which schedules it once every other Worker's lease on the
   * limits has ended; resolves when it is in force (this Worker's decisions carry it from then on).
   */
  async override(
    rule: StoreRule,
    key: string | null,
    limit: number | null,
    forMs?: number,
    windowMs?: number,
  ): Promise<void> {
    this.#leases?.forget(rule.name, key ?? '');
    if (key !== null) {
      const [until, size] = [forMs ?? null, windowMs ?? null];
      await this.#call(this.#name(key), { call: 'override', rule, key, limit, forMs: until, windowMs: size });
      return;
    }
    const lease = this.#limits;
    if (lease === undefined) throw new Error('DurableObjectStore: rule-wide limits are off (ruleLimits)');
    const sentAt = this.now();
    const { nowMs, answer } = await this.#call(this.#settingsName(), {
      call: 'set-limit',
      ...this.#asHolder(),
      rule: rule.name,
      limit,
      forMs: forMs ?? null,
    });
    lease.take(answer.limits, sentAt);
    const waitMs = answer.fromMs - nowMs;
    // An injected clock does not run by itself: its tests move it.
    if (waitMs > 0 && this.#clock === undefined) await new Promise((resolve) => setTimeout(resolve, waitMs));
  }

  /** The rule-wide limits in force among `rules`: one request to the limits object. */
  async #ruleLimits(rules: readonly StoreRule[]): Promise<RuleLimit[]> {
    const call = { call: 'rule-limits', rules: rules.map((r) => r.name) } as const;
    return (await this.#call(this.#settingsName(), call)).answer;
  }

  /** The rule's lock index: one object per rule, told of each lock as it is placed. */
  async locked(rule: StoreRule, limit: number): Promise<LockInfo[]> {
    return (await this.#call(this.#locks(rule.name), { call: 'locked', rule: rule.name, limit })).answer;
  }

  /** Gives the unused units of blocks back; the store holds no other timer or connection. */
  async close(): Promise<void> {
    await this.#leases?.close();
  }

  #name(key: string): string {
    return `${this.#prefix}:${key}`;
  }

  #identity(op: StoreOp): string {
    return this.#name(op.key);
  }

  #locks(rule: string): string {
    return `${this.#prefix}#locks:${rule}`;
  }

  #settingsName(): string {
    return `${this.#prefix}#limits`;
  }

  #asHolder(): { holder: string; leaseMs: number } {
    this.#holder ??= crypto.randomUUID();
    return { holder: this.#holder, leaseMs: this.#limitsLeaseMs };
  }

  /** One call to the named object: its reply, or a fault naming the object and the cause. */
  async #call<C extends Call>(name: string, call: C): Promise<{ nowMs: number; answer: Answers[C['call']] }> {
    const t = this.#clock === undefined ? null : this.now();
    const body = JSON.stringify({ t, call });
    let reply: Reply<C['call']>;
    try {
      const stub = this.#namespace.get(this.#namespace.idFromName(name));
      const request = new Request('https://ratekeeper.invalid/', {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body,
      });
      const response = await stub.fetch(request);
      reply = (await response.json()) as Reply<C['call']>;
    } catch (cause) {
      throw new Error(`DurableObjectStore: the call to object ${describe(name)} failed: ${String(cause)}`, {
        cause,
      });
    }
    if (typeof reply !== 'object' || reply === null)
      throw new Error(`DurableObjectStore: object ${describe(name)} answered ${describe(reply)}`);
    if ('error' in reply) throw new Error(`DurableObjectStore: ${reply.error}`);
    if ('stale' in reply) throw new StaleLimits(`object ${describe(name)}: the limits' lease has ended`);
    if (typeof reply.nowMs !== 'number' || reply.answer === undefined)
      throw new Error(
        `DurableObjectStore: object ${describe(name)} answered no decision (is it a RateLimitObject?)`,
      );
    return reply;
  }

  /** Refunds, renewals: one request per object at once; the answers back in the items' order. */
  async #perIdentity<C extends 'refund' | 'renew'>(
    items: readonly Refund[],
    build: (group: Refund[]) => Extract<Call, { call: C }>,
  ): Promise<Answers[C]> {
    const out = new Array(items.length) as Answers[C];
    await Promise.all(
      byIdentity(items.map((item) => item.op.key)).map(async (group) => {
        const sent = group.map((i) => items[i] as Refund);
        const { answer } = await this.#call(this.#identity((sent[0] as Refund).op), build(sent));
        group.forEach((i, k) => {
          out[i] = answer[k] as never;
        });
      }),
    );
    return out;
  }

  /** Refunds what an admitted group consumed and reports its state as it is now (receipt 0). */
  async #undo(
    ops: readonly StoreOp[],
    group: Group,
    results: OpResult[],
    limits?: RuleLimits,
  ): Promise<void> {
    const consumed = group.filter((i) => {
      const result = results[i] as OpResult;
      return result.allowed && !result.locked && (ops[i] as StoreOp).cost > 0;
    });
    if (consumed.length === 0) return;
    const refunds = consumed.map((i) => ({
      op: ops[i] as StoreOp,
      receipt: (results[i] as OpResult).receipt,
    }));
    const { answer } = await this.#call(this.#identity(ops[consumed[0] as number] as StoreOp), {
      call: 'refund',
      refunds,
      limits,
    });
    consumed.forEach((i, k) => {
      const { remaining, resetMs, count } = answer[k] as Answers['refund'][number];
      results[i] = { ...(results[i] as OpResult), remaining, resetMs, count, receipt: 0 };
    });
  }

  /**
   * Each lock this decision placed is listed in its rule's index (one request per lock, at once). The
   * decision stands whatever the index answers: a listing that failed leaves the lock in force, only
   * missing from `locked()`.
   */
  async #listLocks(ops: readonly StoreOp[], results: readonly OpResult[]): Promise<void> {
    const listings: Promise<unknown>[] = [];
    results.forEach((result, i) => {
      if (!result.lockedNow) return;
      const { rule, key } = ops[i] as StoreOp;
      const call = {
        call: 'list-lock',
        rule: rule.name,
        key,
        untilMs: result.lockedUntil,
        level: result.level,
      } as const;
      listings.push(this.#call(this.#locks(rule.name), call));
    });
    if (listings.length > 0) await Promise.allSettled(listings);
  }
}

/** Indexes grouped by key, groups in the order their key first appears. */
function byIdentity(keys: readonly string[]): Group[] {
  const groups = new Map<string, Group>();
  keys.forEach((key, i) => {
    const group = groups.get(key);
    if (group === undefined) groups.set(key, [i]);
    else group.push(i);
  });
  return [...groups.values()];
}

/** An enforced op that denies (dry-run ops never do). */
function denies(op: StoreOp, result: OpResult): boolean {
  return !result.allowed && !op.rule.dryRun;
}
