// Operator calls on the keys of a rule, outside any request: status, the locked keys, reset, override, and the
// rule-wide limit (setLimit, limits).

import { SLOT_IDS_PER_MS } from '../algorithms/concurrency.js';
import {
  KEY_OVERRIDE_FIELDS,
  type KeyOverride,
  type OverrideOptions,
  overrideForMs,
} from '../calls/options.js';
import { assertKnownFields } from '../config/known-fields.js';
import { mustBe, refuse } from '../config/refuse.js';
import { LIMITER_DEFAULTS } from '../defaults.js';
import { identityOf } from '../keys/direct-key.js';
import type { CompiledRule } from '../rules/compile.js';
import { overrideLimit, ruleWideLimit } from '../rules/rule-index.js';
import { overrideWindowMs } from '../rules/window-choice.js';
import type { HeldSlot, OpResult, Store } from '../stores/store.js';
import type { LockInfo, RuleLimit, RuleStatus, SlotHolder } from '../types.js';
import type { DenyCache } from './decider.js';
import type { EventEmitter } from './event-emitter.js';
import type { LimiterEvents, UnlockEvent } from './events.js';
import type { FailurePolicy } from './failure-policy.js';
import type { Observers } from './observers.js';
import type { OpBuilder, OverrideProbe, RuleOp } from './op-builder.js';

/**
 * For direct calls on a rule with a limit function (see OpBuilder): the override in force for each op's
 * key, read from the store (a peek, as `status`), or undefined for a store without overrides.
 */
export function overrideProbe(policy: () => FailurePolicy, store: Store): OverrideProbe | undefined {
  if (store.override === undefined) return undefined;
  return async (ops: RuleOp[]) => {
    const { results } = await operatorCall(policy(), store, 'status', () => store.evaluate(ops, 'peek'));
    // A window-only override decides at the limit sent (unless a rule-wide one is in force): no limit of its own.
    return results.map((r, i) =>
      r.overridden && !(r.windowMs !== undefined && r.limit === ops[i]?.limit) ? r.limit : undefined,
    );
  };
}

/** The limiter's parts an operator call goes through. */
export interface KeyAdminParts {
  ops: OpBuilder;
  store: Store;
  policy: FailurePolicy;
  denyCache: DenyCache | undefined;
  /** Where 'unlock' goes: the limiter itself. */
  events: EventEmitter<LimiterEvents>;
  /** Told of the rule-wide limits set here. */
  observers: Observers;
}

/** The longest `for` of a rule-wide limit: past it, store clocks plus `for` leave exact integers. */
const MAX_FOR_MS = 100 * 365 * 86_400_000;

/** An operator call given up on before the store's first connection was ready: it is never sent. */
const GIVEN_UP = new Error('given up before the first connection was ready');

/**
 * An operator's store call, made by `send`, under the store's deadlines (`policy.call`). While the store's
 * first connection is being made it waits for it, as decisions do (a fail-fast client would refuse it):
 * sent once the connection is ready, within `storeMaxWait`, and never after the caller was given up on.
 */
export function operatorCall<T>(
  policy: FailurePolicy,
  store: Store,
  operation: string,
  send: () => Promise<T>,
): Promise<T> {
  const connecting = store.liveness?.connecting();
  if (connecting === undefined) return policy.call(operation, send());
  let givenUp = false;
  const call = policy.call(
    operation,
    connecting.then(() => (givenUp ? Promise.reject(GIVEN_UP) : send())),
  );
  call.catch(() => {
    givenUp = true;
  });
  return call;
}

/**
 * Reads and changes one rule's keys for operators and tools (the CLI, the console): each call is one
 * store call under `storeTimeout` (its failure is thrown, with its cause: there is no decision to fall
 * back to), waiting for a store still making its first connection as decisions do, and whatever changes
 * a key reaches the insurance store and the deny cache too.
 */
export class KeyAdmin {
  readonly #parts: KeyAdminParts;

  constructor(parts: KeyAdminParts) {
    this.#parts = parts;
  }

  /** Clears count, lock and escalation level of a rule for a key, in every process. */
  async reset(rule: string, key: string): Promise<void> {
    const { denyCache, events, ops, policy, store } = this.#parts;
    const compiled = ops.rule(rule);
    const identity = identityOf(key);
    denyCache?.delete(compiled.name, identity);
    const [wasLocked, wasLockedLocally] = await Promise.all([
      operatorCall(policy, store, 'reset', () => store.reset(compiled.store, identity)),
      policy.insurance?.reset(compiled.store, identity) ?? false,
    ]);
    if (wasLocked || wasLockedLocally)
      events.emit('unlock', { rule: compiled.name, key: identity } satisfies UnlockEvent);
  }

  /**
   * Sets the limit of one key of one rule in every process sharing the store, from their next
   * decision, over the rule's limit (number or function); `null` clears it. `for`: it expires then.
   * `reset` leaves it in place. A `KeyOverride` sets its window too, or only (from the key's next window).
   */
  async override(
    rule: string,
    key: string,
    limit: number | null | KeyOverride,
    options?: OverrideOptions,
  ): Promise<void> {
    const { denyCache, ops, policy, store } = this.#parts;
    const compiled = ops.rule(rule);
    const identity = identityOf(key);
    const [value, windowMs] = keyOverride(limit, compiled);
    const forMs = overrideForMs(options);
    const override = store.override;
    if (override === undefined) {
      refuse('ERR_OPTION', 'override', `the store (${store.constructor.name}) does not support overrides`);
    }
    denyCache?.delete(compiled.name, identity);
    await Promise.all([
      operatorCall(policy, store, 'override', () =>
        override.call(store, compiled.store, identity, value, forMs, windowMs),
      ),
      policy.insurance?.override?.(compiled.store, identity, value, forMs, windowMs),
    ]);
    // Again: a denial at the old limit, decided before the override and learnt while it was being set.
    denyCache?.delete(compiled.name, identity);
  }

  /**
   * Sets the limit of every key of one rule (those without an override of their own) in every process
   * sharing the store, read inside each decision's store call; `null` returns to the configured limit.
   * It replaces a limit function's answers until cleared. `for`: it expires then (store clock).
   */
  async setLimit(rule: string, limit: number | null, options?: OverrideOptions): Promise<void> {
    const { denyCache, ops, policy, store } = this.#parts;
    const compiled = ops.rule(rule);
    const value = ruleWideLimit(limit, compiled.store);
    const forMs = overrideForMs(options, 'setLimit');
    if (forMs !== undefined && forMs > MAX_FOR_MS)
      refuse('ERR_OPTION', 'setLimit', mustBe('for', 'at most 100 years', forMs));
    const { override, limits } = store;
    if (override === undefined || limits === undefined) {
      refuse(
        'ERR_OPTION',
        'setLimit',
        `the store (${store.constructor.name}) does not support rule-wide limits`,
      );
    }
    denyCache?.deleteRule(compiled.name);
    await Promise.all([
      operatorCall(policy, store, 'setLimit', () => override.call(store, compiled.store, null, value, forMs)),
      policy.insurance?.override?.(compiled.store, null, value, forMs),
    ]);
    // Again: denials at the old limit, decided before the change and learnt while it was being made.
    denyCache?.deleteRule(compiled.name);
    this.#parts.observers.limitChange(
      forMs === undefined
        ? { rule: compiled.name, limit: value }
        : { rule: compiled.name, limit: value, forMs },
    );
  }

  /** The rule-wide limits in force (set with `setLimit`), with when each ends. */
  async limits(): Promise<RuleLimit[]> {
    const { ops, policy, store } = this.#parts;
    const limits = store.limits;
    if (limits === undefined) {
      refuse(
        'ERR_OPTION',
        'limits',
        `the store (${store.constructor.name}) does not support rule-wide limits`,
      );
    }
    const rules = ops.rules.map((r) => r.store);
    return operatorCall(policy, store, 'limits', () => limits.call(store, rules));
  }

  /** Count, remaining, the limit in force, lock and level of a rule for a key; changes nothing. */
  async status(rule: string, key: string): Promise<RuleStatus> {
    const { ops, policy, store } = this.#parts;
    const [op] = (await ops.direct([rule], key, 0)) as [RuleOp];
    // A concurrency rule's holders, read beside the count (the two reads may straddle a release).
    const holders = store.holders;
    const listing =
      op.compiled.facts.holdsSlots && holders !== undefined
        ? operatorCall(policy, store, 'status', () =>
            holders.call(store, op.rule, op.key, LIMITER_DEFAULTS.holdersListed),
          )
        : undefined;
    const [{ nowMs, results }, held] = await Promise.all([
      operatorCall(policy, store, 'status', () => store.evaluate([op], 'peek')),
      listing,
    ]);
    const r = results[0] as OpResult;
    const status: RuleStatus = {
      rule: op.rule.name,
      key: op.key,
      count: r.count,
      limit: r.limit,
      overridden: r.overridden,
      remaining: r.remaining,
      resetMs: Math.max(0, r.resetMs),
      locked: r.locked,
      lockRemainingMs: r.locked ? r.lockedUntil - nowMs : 0,
      level: r.level,
    };
    if (r.windowMs !== undefined) status.windowMs = r.windowMs;
    if (held !== undefined) status.holders = held.map((h) => holderOf(h, nowMs));
    return status;
  }

  /** Keys of a rule locked now, soonest unlock first. */
  async locked(rule: string, options: { limit?: number } = {}): Promise<LockInfo[]> {
    const { ops, policy, store } = this.#parts;
    const compiled = ops.rule(rule);
    assertKnownFields(options, ['limit'], 'locked');
    const limit = options.limit ?? LIMITER_DEFAULTS.lockedListLimit;
    if (!Number.isSafeInteger(limit) || limit < 1 || limit > 10_000) {
      refuse('ERR_OPTION', 'locked', mustBe('limit', 'an integer from 1 to 10000', limit));
    }
    return operatorCall(policy, store, 'locked', () => store.locked(compiled.store, limit));
  }
}

/**
 * An override's value: [the limit (null: none of its own, or cleared), the window size in ms]. A number or
 * null is the limit alone, as before windows; a `KeyOverride` sets either or both. Checked before anything is
 * stored.
 */
function keyOverride(value: unknown, compiled: CompiledRule): [number | null, number | undefined] {
  if (value === null || typeof value !== 'object') return [overrideLimit(value, compiled.store), undefined];
  assertKnownFields(value, KEY_OVERRIDE_FIELDS, 'override');
  const given = value as KeyOverride;
  if (given.limit === undefined && given.window === undefined)
    refuse(
      'ERR_LIMIT',
      `override: rule "${compiled.name}"`,
      mustBe('override', 'a limit, a window or both', value),
    );
  const limit = given.limit === undefined ? null : overrideLimit(given.limit, compiled.store);
  if (given.window === undefined) return [limit, undefined];
  const held = limit ?? (typeof compiled.limit === 'number' ? compiled.limit : undefined);
  return [limit, overrideWindowMs(given.window, compiled.store, held)];
}

/** A slot as `status` shows it: its id's high part is the ms it was taken (concurrency.ts). */
function holderOf(held: HeldSlot, nowMs: number): SlotHolder {
  const takenMs = Math.floor(held.slot / SLOT_IDS_PER_MS);
  return { ageMs: Math.max(0, nowMs - takenMs), leaseLeftMs: Math.max(0, held.untilMs - nowMs) };
}
