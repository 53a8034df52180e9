// DurableObjectStore: the Worker's side of the Cloudflare store. Each identity's ops go to the object named
// after it (one object request), and a request whose rules span several identities is all or nothing.
import { assertKnownFields, fieldsOf } from '../../config/known-fields.js';
import { mustBe, refuse } from '../../config/refuse.js';
import { DURABLE_OBJECT_STORE_DEFAULTS } from '../../defaults.js';
import { describe } from '../../errors.js';
import type { LockInfo } from '../../types.js';
import type {
  EvalMode,
  EvalResult,
  HeldSlot,
  OpResult,
  Refund,
  Store,
  StoreOp,
  StoreRule,
} from '../store.js';
import type { DurableObjectNamespaceLike } from './cloudflare-types.js';
import type { Answers, Call, Reply } from './protocol.js';

export interface DurableObjectStoreOptions {
  /**
   * Starts every object's name: `<prefix>:<identity>` decides an identity's rules, `<prefix>#locks:<rule>`
   * lists a rule's locks. Two stores on one namespace with different prefixes share no count.
   * @default 'rk'
   */
  prefix?: string;
  /**
   * Replaces the objects' clock (epoch ms), for tests: sent with every call, and the objects then set no
   * alarm (their expired rows are dropped when next read instead). @default each object's own `Date.now()`
   */
  clock?: () => number;
}

const FIELDS = fieldsOf<DurableObjectStoreOptions>({ prefix: true, clock: true });

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

  constructor(namespace: DurableObjectNamespaceLike, options: DurableObjectStoreOptions = {}) {
    const ns = namespace as Partial<DurableObjectNamespaceLike> | null;
    if (typeof ns?.idFromName !== 'function' || typeof ns.get !== 'function')
      refuse(
        'ERR_OPTION',
        'DurableObjectStore',
        mustBe('its first argument', 'a Durable Object namespace binding (env.RATE_LIMITER)', namespace),
      );
    assertKnownFields(options, FIELDS, 'DurableObjectStore');
    const prefix = options.prefix ?? DURABLE_OBJECT_STORE_DEFAULTS.prefix;
    if (typeof prefix !== 'string' || prefix.length === 0 || prefix.length > 200)
      refuse('ERR_OPTION', 'DurableObjectStore', mustBe('prefix', 'a string of 1 to 200 characters', prefix));
    if (options.clock !== undefined && typeof options.clock !== 'function')
      refuse(
        'ERR_OPTION',
        'DurableObjectStore',
        mustBe('clock', 'a function returning epoch ms', options.clock),
      );
    this.#namespace = namespace;
    this.#prefix = prefix;
    this.#clock = options.clock;
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
          await Promise.allSettled(groups.slice(0, g).map((done) => this.#undo(ops, done, results)));
          throw error;
        }
        if (!group.some((i) => denies(ops[i] as StoreOp, results[i] as OpResult))) continue;
        await Promise.all([
          ...groups.slice(0, g).map((done) => this.#undo(ops, done, results)),
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
    const answers = await this.#perIdentity<'refund'>(refunds, (group) => ({
      call: 'refund',
      refunds: group.map(({ op, receipt }) => ({ op, receipt })),
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
    const keepLock = options?.keepLock === true;
    const { answer } = await this.#call(this.#name(key), { call: 'reset', rule, key, keepLock });
    if (answer) await this.#call(this.#locks(rule.name), { call: 'unlist-lock', rule: rule.name, key });
    return answer;
  }

  /** A key's override (with its window: `overrideWindows`); no rule-wide form here. */
  async override(
    rule: StoreRule,
    key: string,
    limit: number | null,
    forMs?: number,
    windowMs?: number,
  ): Promise<void> {
    const call = {
      call: 'override',
      rule,
      key,
      limit,
      forMs: forMs ?? null,
      windowMs: windowMs ?? null,
    } as const;
    await this.#call(this.#name(key), call);
  }
  readonly overrideWindows = true;

  /** The rule's lock index: one object per rule, told of each lock as it is placed. */
  async locked(rule: StoreRule, limit: number): Promise<LockInfo[]> {
    return (await this.#call(this.#locks(rule.name), { call: 'locked', rule: rule.name, limit })).answer;
  }

  /** Nothing to end: the store holds no timer or connection of its own. */
  async close(): Promise<void> {}

  #name(key: string): string {
    return `${this.#prefix}:${key}`;
  }

  #identity(op: StoreOp): string {
    return this.#name(op.key);
  }

  #locks(rule: string): string {
    return `${this.#prefix}#locks:${rule}`;
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
  async #undo(ops: readonly StoreOp[], group: Group, results: OpResult[]): Promise<void> {
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
