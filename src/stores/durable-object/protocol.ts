// What the Worker sends a RateLimitObject and what it answers: one JSON message per object request, read back
// field by field, so a malformed message is refused whole (nothing decided, nothing written).
import { algorithms, windowKind } from '../../algorithms/index.js';
import { describe } from '../../errors.js';
import type { LockInfo, RuleLimit } from '../../types.js';
import type { EvalMode, HeldSlot, OpResult, StoreOp, StoreRule } from '../store.js';
import type { Change, RuleLimits } from './rule-settings.js';

/**
 * One call to an object. Identity objects take all but the lock index's three and the limits object's
 * three; a lock index takes its three, the limits object (`<prefix>#limits`) its own.
 */
export type Call =
  /**
   * `quiet`: decided as `check`, consuming nothing (another object of the request denied). `limits`: the
   * rule-wide limits the Worker holds a lease on (absent: none asked for).
   */
  | { call: 'evaluate'; mode: EvalMode; ops: StoreOp[]; quiet: boolean; limits?: RuleLimits | undefined }
  | { call: 'refund'; refunds: Receipted[]; limits?: RuleLimits | undefined }
  | { call: 'renew'; slots: Receipted[] }
  | { call: 'holders'; rule: StoreRule; key: string; limit: number }
  | { call: 'reset'; rule: StoreRule; key: string; keepLock: boolean }
  | {
      call: 'override';
      rule: StoreRule;
      key: string;
      limit: number | null;
      forMs: number | null;
      /** The key's window size (ms); absent or null: none. */
      windowMs?: number | null;
    }
  | { call: 'list-lock'; rule: string; key: string; untilMs: number; level: number }
  | { call: 'unlist-lock'; rule: string; key: string }
  | { call: 'locked'; rule: string; limit: number }
  /** The limits object: a lease on every rule's schedule for the Worker `holder`, `leaseMs` long. */
  | { call: 'lease-limits'; holder: string; leaseMs: number }
  /** Schedules a rule-wide limit (null: none; `forMs` null: no end), and leases the schedules again. */
  | {
      call: 'set-limit';
      holder: string;
      leaseMs: number;
      rule: string;
      limit: number | null;
      forMs: number | null;
    }
  | { call: 'rule-limits'; rules: string[] };

export interface Receipted {
  op: StoreOp;
  receipt: number;
}

/** A message: the call, and the time to decide at (the store's injected clock, for tests) or null (the object's). */
export interface Message {
  t: number | null;
  call: Call;
}

/** A refund's answer: whether it was still held, and the key's figures once it is given back. */
export interface RefundAnswer {
  held: boolean;
  remaining: number;
  resetMs: number;
  count: number;
}

/** Each call's answer, by call. */
export interface Answers {
  evaluate: OpResult[];
  refund: RefundAnswer[];
  renew: boolean[];
  holders: HeldSlot[];
  reset: boolean;
  override: null;
  'list-lock': null;
  'unlist-lock': null;
  locked: LockInfo[];
  'lease-limits': RuleLimits;
  /** When the change is in force (the limits object's clock), and the schedules leased again. */
  'set-limit': { fromMs: number; limits: RuleLimits };
  'rule-limits': RuleLimit[];
}

/**
 * The object's reply: its time, and the answer (status 200), or why the message was refused (status 400),
 * or (status 409) that the lease on the rule-wide limits it was sent with has ended: nothing decided.
 */
export type Reply<C extends Call['call'] = Call['call']> =
  | { nowMs: number; answer: Answers[C] }
  | { error: string }
  | { nowMs: number; stale: true };

/** A message the object refuses: its status is 400, and nothing of it was decided. */
export class ProtocolError extends Error {
  override readonly name = 'ProtocolError';
}

const MODES: readonly EvalMode[] = ['check', 'peek', 'record'];
/** Ops of one message, at most (a request has one per rule; a message past this is no store's). */
const MAX_ITEMS = 1000;

function fail(field: string, allowed: string, value: unknown): never {
  throw new ProtocolError(`${field} must be ${allowed}, got ${describe(value)}`);
}

function record(value: unknown, field: string): Record<string, unknown> {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) fail(field, 'an object', value);
  return value as Record<string, unknown>;
}

function integer(value: unknown, field: string, min = 0): number {
  if (!Number.isSafeInteger(value) || (value as number) < min)
    fail(field, `an integer of at least ${min}`, value);
  return value as number;
}

function time(value: unknown, field: string): number {
  if (typeof value !== 'number' || !Number.isFinite(value) || value < 0)
    fail(field, 'a time in epoch ms', value);
  return value;
}

function text(value: unknown, field: string): string {
  if (typeof value !== 'string') fail(field, 'a string', value);
  return value;
}

function list(value: unknown, field: string): unknown[] {
  if (!Array.isArray(value) || value.length > MAX_ITEMS)
    fail(field, `an array of at most ${MAX_ITEMS} items`, value);
  return value;
}

export function readRule(value: unknown, field: string): StoreRule {
  const rule = record(value, field);
  const type = rule.type;
  if (typeof type !== 'string' || !Object.hasOwn(algorithms, type))
    fail(`${field}.type`, 'a window type', type);
  const fields = windowKind(type as StoreRule['type']).fields;
  // A calendar period has no size; a sliding counter has buckets (read from the registry's kinds).
  const calendar = fields.includes('unit');
  const lockout = rule.lockout === undefined ? undefined : record(rule.lockout, `${field}.lockout`);
  const escalate = lockout?.escalate;
  if (lockout !== undefined && (typeof escalate !== 'number' || !(escalate >= 1) || escalate > 1e6))
    fail(`${field}.lockout.escalate`, 'a number from 1 to 1000000', escalate);
  return {
    name: text(rule.name, `${field}.name`),
    type: type as StoreRule['type'],
    sizeMs: integer(rule.sizeMs, `${field}.sizeMs`, calendar ? 0 : 1),
    buckets: integer(rule.buckets, `${field}.buckets`, fields.includes('buckets') ? 1 : 0),
    burst: integer(rule.burst, `${field}.burst`),
    lockout:
      lockout === undefined
        ? undefined
        : {
            durationMs: integer(lockout.durationMs, `${field}.lockout.durationMs`, 1),
            escalate: escalate as number,
            maxDurationMs: integer(lockout.maxDurationMs, `${field}.lockout.maxDurationMs`),
            forgetAfterMs: integer(lockout.forgetAfterMs, `${field}.lockout.forgetAfterMs`),
          },
    dryRun: rule.dryRun === true,
  };
}

export function readOp(value: unknown, field: string): StoreOp {
  const op = record(value, field);
  const rule = readRule(op.rule, `${field}.rule`);
  const base = {
    rule,
    key: text(op.key, `${field}.key`),
    cost: integer(op.cost, `${field}.cost`),
    limit: integer(op.limit, `${field}.limit`, 1),
  };
  if (!windowKind(rule.type).fields.includes('unit')) return base;
  const periodEndMs = time(op.periodEndMs, `${field}.periodEndMs`);
  const nextPeriodEndMs = time(op.nextPeriodEndMs, `${field}.nextPeriodEndMs`);
  if (nextPeriodEndMs <= periodEndMs) fail(`${field}.nextPeriodEndMs`, 'after periodEndMs', nextPeriodEndMs);
  return { ...base, periodEndMs, nextPeriodEndMs };
}

function readReceipted(value: unknown, field: string): Receipted[] {
  return list(value, field).map((item, i) => {
    const entry = record(item, `${field}[${i}]`);
    return {
      op: readOp(entry.op, `${field}[${i}].op`),
      receipt: integer(entry.receipt, `${field}[${i}].receipt`),
    };
  });
}

/** Rules of one message's rule-wide limits, at most; changes of one rule's schedule, at most. */
const MAX_RULES = 1000;
const MAX_CHANGES = 100;

function readRuleLimits(value: unknown, field: string): RuleLimits | undefined {
  if (value === undefined) return undefined;
  const limits = record(value, field);
  const rules = record(limits.rules, `${field}.rules`);
  const names = Object.keys(rules);
  if (names.length > MAX_RULES) fail(`${field}.rules`, `at most ${MAX_RULES} rules`, names.length);
  const read: Record<string, Change[]> = {};
  for (const name of names) {
    const schedule = list(rules[name], `${field}.rules[${describe(name)}]`);
    if (schedule.length > MAX_CHANGES) fail(`${field}.rules`, `at most ${MAX_CHANGES} changes a rule`, name);
    read[name] = schedule.map((item, i) => {
      const at = `${field}.rules[${describe(name)}][${i}]`;
      const change = record(item, at);
      return {
        fromMs: time(change.fromMs, `${at}.fromMs`),
        limit: change.limit === null ? null : integer(change.limit, `${at}.limit`, 1),
        untilMs: change.untilMs === null ? null : time(change.untilMs, `${at}.untilMs`),
      };
    });
  }
  return { leaseUntil: time(limits.leaseUntil, `${field}.leaseUntil`), rules: read };
}

/** A Worker's id and its lease's length (ms, 1 to 10 minutes). */
function holderOf(call: Record<string, unknown>): { holder: string; leaseMs: number } {
  const holder = text(call.holder, 'call.holder');
  if (holder.length === 0 || holder.length > 100)
    fail('call.holder', 'a string of 1 to 100 characters', holder);
  const leaseMs = integer(call.leaseMs, 'call.leaseMs', 1);
  if (leaseMs > 600_000) fail('call.leaseMs', 'at most 600000', leaseMs);
  return { holder, leaseMs };
}

/** A message as sent by DurableObjectStore, every field checked; a ProtocolError names the first one wrong. */
export function readMessage(value: unknown): Message {
  const message = record(value, 'message');
  const t = message.t === null ? null : time(message.t, 'message.t');
  const call = record(message.call, 'message.call');
  const name = call.call;
  switch (name) {
    case 'evaluate': {
      const mode = call.mode as EvalMode;
      if (!MODES.includes(mode)) fail('call.mode', "'check', 'peek' or 'record'", mode);
      const ops = list(call.ops, 'call.ops').map((op, i) => readOp(op, `call.ops[${i}]`));
      const limits = readRuleLimits(call.limits, 'call.limits');
      const read = { call: name, mode, ops, quiet: call.quiet === true } as const;
      return { t, call: limits === undefined ? read : { ...read, limits } };
    }
    case 'refund': {
      const limits = readRuleLimits(call.limits, 'call.limits');
      const read = { call: name, refunds: readReceipted(call.refunds, 'call.refunds') } as const;
      return { t, call: limits === undefined ? read : { ...read, limits } };
    }
    case 'lease-limits':
      return { t, call: { call: name, ...holderOf(call) } };
    case 'set-limit': {
      const limit = call.limit === null ? null : integer(call.limit, 'call.limit', 1);
      const forMs = call.forMs === null ? null : integer(call.forMs, 'call.forMs', 1);
      return { t, call: { call: name, ...holderOf(call), rule: text(call.rule, 'call.rule'), limit, forMs } };
    }
    case 'rule-limits': {
      const rules = list(call.rules, 'call.rules').map((rule, i) => text(rule, `call.rules[${i}]`));
      return { t, call: { call: name, rules } };
    }
    case 'renew':
      return { t, call: { call: name, slots: readReceipted(call.slots, 'call.slots') } };
    case 'holders':
    case 'reset':
    case 'override': {
      const rule = readRule(call.rule, 'call.rule');
      const key = text(call.key, 'call.key');
      if (name === 'holders')
        return { t, call: { call: name, rule, key, limit: integer(call.limit, 'call.limit') } };
      if (name === 'reset') return { t, call: { call: name, rule, key, keepLock: call.keepLock === true } };
      const limit = call.limit === null ? null : integer(call.limit, 'call.limit');
      const forMs = call.forMs === null ? null : integer(call.forMs, 'call.forMs', 1);
      const windowMs = call.windowMs == null ? null : integer(call.windowMs, 'call.windowMs', 1);
      return { t, call: { call: name, rule, key, limit, forMs, windowMs } };
    }
    case 'list-lock':
      return {
        t,
        call: {
          call: name,
          rule: text(call.rule, 'call.rule'),
          key: text(call.key, 'call.key'),
          untilMs: time(call.untilMs, 'call.untilMs'),
          level: integer(call.level, 'call.level', 1),
        },
      };
    case 'unlist-lock':
      return { t, call: { call: name, rule: text(call.rule, 'call.rule'), key: text(call.key, 'call.key') } };
    case 'locked':
      return {
        t,
        call: { call: name, rule: text(call.rule, 'call.rule'), limit: integer(call.limit, 'call.limit') },
      };
    default:
      return fail('call.call', 'a call the object knows', name);
  }
}
