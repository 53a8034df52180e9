// The limiter's events and its debug log: what it tells listeners and the log about decisions and store faults.

import { errorCode } from '../errors.js';
import type { OpResult, StoreOp } from '../stores/store.js';
import type { RuleResult } from '../types.js';
import type { EventEmitter } from './event-emitter.js';
import type { StoreErrorPolicy } from './options.js';

export interface LimitedEvent {
  rule: string;
  key: string;
  retryAfterMs: number;
  locked: boolean;
  /** True when answered from the local deny cache. */
  cached: boolean;
}
export interface LockoutEvent {
  rule: string;
  key: string;
  durationMs: number;
  lockedUntil: number;
  level: number;
}
export interface UnlockEvent {
  rule: string;
  key: string;
}
export interface StoreErrorEvent {
  error: Error;
  operation: string;
  policy: StoreErrorPolicy | 'none';
}

/** The events a limiter emits; none carries the request body. */
export interface LimiterEvents {
  limited: [LimitedEvent];
  lockout: [LockoutEvent];
  unlock: [UnlockEvent];
  storeError: [StoreErrorEvent];
}

type Emitter = EventEmitter<LimiterEvents>;

/** A denial, to 'limited' listeners; nothing is built when there are none. */
export function emitLimited(emitter: Emitter, r: RuleResult, cached: boolean): void {
  if (emitter.listenerCount('limited') === 0) return;
  emitter.emit('limited', {
    rule: r.rule,
    key: r.key,
    retryAfterMs: r.retryAfterMs ?? 0,
    locked: r.locked,
    cached,
  } satisfies LimitedEvent);
}

/** A lock this very evaluation placed, to 'lockout' listeners; returns the event. */
export function emitLockout(emitter: Emitter, op: StoreOp, r: OpResult, nowMs: number): LockoutEvent {
  const event: LockoutEvent = {
    rule: op.rule.name,
    key: op.key,
    durationMs: r.lockedUntil - nowMs,
    lockedUntil: r.lockedUntil,
    level: r.level,
  };
  emitter.emit('lockout', event);
  return event;
}

/** A store fault, to the debug log and to 'storeError' listeners; returns the fault as an Error. */
export function emitStoreError(
  emitter: Emitter,
  log: DebugLog,
  error: unknown,
  operation: string,
  policy: StoreErrorEvent['policy'],
): Error {
  const err = error instanceof Error ? error : new Error(String(error));
  if (log !== undefined) {
    const code = errorCode(err);
    const withCode = code === undefined || err.message.includes(code) ? '' : ` (code ${code})`;
    log(`store error during ${operation} (${policy}): ${err.message}${withCode}`);
  }
  if (emitter.listenerCount('storeError') > 0)
    emitter.emit('storeError', { error: err, operation, policy } satisfies StoreErrorEvent);
  return err;
}

/** Where debug lines go; undefined when debugging is off, so callers build no line. */
export type DebugLog = ((line: string) => void) | undefined;

/** Rules for the debug log; keys JSON-quoted, so a newline in an identity cannot forge a log line. */
export function logRules(rules: readonly RuleResult[]): string {
  return rules.map((r) => `${r.rule}[${JSON.stringify(r.key)}]=${r.remaining}/${r.limit}`).join(' ');
}
