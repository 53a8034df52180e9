// Observers: metrics hooks on every decision and every shared-store call, free when nothing observes.

import { assertKnownFields, fieldsOf } from '../config/known-fields.js';
import { mustBe, refuse } from '../config/refuse.js';
import { describe } from '../errors.js';
import type { EvalMode } from '../stores/store.js';
import type { Decision } from '../types.js';
import { OBSERVER_ERROR_WARNING, warnOnce } from '../warnings.js';
import type { LockoutEvent } from './events.js';

/**
 * Where a decision's figures came from: the configured store, the per-process insurance store
 * (`onStoreError: 'insurance'` while the store fails), the local deny cache, or the failure policy's
 * 'allow' / 'deny' (nothing stored anywhere).
 */
export type DecisionSource = 'store' | 'insurance' | 'deny_cache' | 'policy';

/** What `LimiterObserver.decision` is told besides the decision. */
export interface DecisionInfo {
  readonly mode: EvalMode;
  readonly source: DecisionSource;
}

/** One call to a shared store (not the memory store): which, how long, and its error when it failed. */
export interface StoreCallInfo {
  /** `'check'`, `'peek'`, `'record'`, `'report'`, `'reset'`, `'override'`, `'status'`, `'locked'` or `'ping'`. */
  operation: string;
  /** Wall time of the call, timeouts included. */
  seconds: number;
  error?: Error;
}

/**
 * A change in the concurrency slots this process holds, per rule: `held` by an admitted decision,
 * `released` (by `release`, an adapter, `wrap`, `acquire`'s release) once the store answered that it
 * still held them, or `lapsed`: no longer held when the store was asked (a release or a renewal found
 * them gone: this process stalled longer than a lease, or an operator reset the key), or lost without a
 * release (it failed until the lease ran out, or the limiter closed while holding them, and they lapse
 * in the store a lease later).
 */
export interface SlotEvent {
  readonly rule: string;
  /** Slots (units of cost) concerned. */
  readonly slots: number;
  readonly change: 'held' | 'released' | 'lapsed';
}

/** A rule-wide limit set (`limit` null: cleared) through this limiter's `setLimit`, once the store took it. */
export interface LimitChangeEvent {
  readonly rule: string;
  readonly limit: number | null;
  /** Ms it holds (`for`); absent: until cleared. */
  readonly forMs?: number;
}

/**
 * Hooks for metrics (see `limiter.observe`). Called synchronously on the decision path: keep them
 * cheap. A hook that throws is reported once as a process warning and never fails a decision.
 */
export interface LimiterObserver {
  /** Every decision of a request that matched a rule (`check`, `peek`, `consume`, `record` ...). */
  decision?(decision: Decision, info: DecisionInfo): void;
  /** Every call to a shared store, ended or failed. */
  storeCall?(info: StoreCallInfo): void;
  /** A lock a decision placed (the same figures as the limiter's 'lockout' event), whichever store decided. */
  lockout?(event: LockoutEvent): void;
  /** Concurrency slots this process took, released or lost (see `SlotEvent`): the slots in flight here. */
  slots?(event: SlotEvent): void;
  /** A rule-wide limit this limiter set or cleared (`setLimit`). */
  limitChange?(event: LimitChangeEvent): void;
}

const OBSERVER_FIELDS = fieldsOf<LimiterObserver>({
  decision: true,
  storeCall: true,
  lockout: true,
  slots: true,
  limitChange: true,
});

/** One frozen info per (mode, source): telling an observer allocates nothing. */
const INFOS = Object.fromEntries(
  (['check', 'peek', 'record'] as const).map((mode) => [
    mode,
    Object.fromEntries(
      (['store', 'insurance', 'deny_cache', 'policy'] as const).map((source) => [
        source,
        Object.freeze({ mode, source }),
      ]),
    ),
  ]),
) as Record<EvalMode, Record<DecisionSource, DecisionInfo>>;

interface Watcher {
  observer: LimiterObserver;
  warn: (message: string) => void;
}

/**
 * A limiter's observers. The decision path reads `decisions` / `storeCalls` / `lockouts` and does nothing
 * more when false.
 */
export class Observers {
  /** Some observer has a `decision` hook. */
  decisions = false;
  /** Some observer has a `storeCall` hook. */
  storeCalls = false;
  /** Some observer has a `lockout` hook. */
  lockouts = false;
  /** Some observer has a `slots` hook. */
  slotChanges = false;
  #watchers: Watcher[] = [];

  /** Adds an observer; returns the function that removes it. */
  add(observer: LimiterObserver): () => void {
    if (observer === null || typeof observer !== 'object') {
      refuse(
        'ERR_OPTION',
        'observe',
        `expects an object with decision, storeCall, lockout, slots and/or limitChange functions, got ${describe(observer)}`,
      );
    }
    assertKnownFields(observer, OBSERVER_FIELDS, 'observe');
    for (const hook of OBSERVER_FIELDS) {
      const fn = (observer as Record<string, unknown>)[hook];
      if (fn !== undefined && typeof fn !== 'function')
        refuse('ERR_OPTION', 'observe', mustBe(hook, 'a function', fn));
    }
    const watcher = { observer, warn: warnOnce(OBSERVER_ERROR_WARNING) };
    this.#watchers = [...this.#watchers, watcher];
    this.#update();
    return () => {
      this.#watchers = this.#watchers.filter((w) => w !== watcher);
      this.#update();
    };
  }

  decision(decision: Decision, mode: EvalMode, source: DecisionSource): void {
    const info = INFOS[mode][source];
    for (const { observer, warn } of this.#watchers) {
      try {
        observer.decision?.(decision, info);
      } catch (error) {
        warn(`an observer's decision hook threw: ${(error as Error)?.message ?? error}`);
      }
    }
  }

  /** A shared-store call that began at `startedMs` (performance.now()) has ended, or failed with `error`. */
  storeCall(operation: string, startedMs: number, error?: unknown): void {
    const info: StoreCallInfo = { operation, seconds: (performance.now() - startedMs) / 1000 };
    if (error !== undefined) info.error = error instanceof Error ? error : new Error(String(error));
    for (const { observer, warn } of this.#watchers) {
      try {
        observer.storeCall?.(info);
      } catch (thrown) {
        warn(`an observer's storeCall hook threw: ${(thrown as Error)?.message ?? thrown}`);
      }
    }
  }

  lockout(event: LockoutEvent): void {
    for (const { observer, warn } of this.#watchers) {
      try {
        observer.lockout?.(event);
      } catch (error) {
        warn(`an observer's lockout hook threw: ${(error as Error)?.message ?? error}`);
      }
    }
  }

  slot(rule: string, slots: number, change: SlotEvent['change']): void {
    const event: SlotEvent = { rule, slots, change };
    for (const { observer, warn } of this.#watchers) {
      try {
        observer.slots?.(event);
      } catch (error) {
        warn(`an observer's slots hook threw: ${(error as Error)?.message ?? error}`);
      }
    }
  }

  limitChange(event: LimitChangeEvent): void {
    for (const { observer, warn } of this.#watchers) {
      try {
        observer.limitChange?.(event);
      } catch (error) {
        warn(`an observer's limitChange hook threw: ${(error as Error)?.message ?? error}`);
      }
    }
  }

  #update(): void {
    this.decisions = this.#watchers.some((w) => typeof w.observer.decision === 'function');
    this.storeCalls = this.#watchers.some((w) => typeof w.observer.storeCall === 'function');
    this.lockouts = this.#watchers.some((w) => typeof w.observer.lockout === 'function');
    this.slotChanges = this.#watchers.some((w) => typeof w.observer.slots === 'function');
  }
}
