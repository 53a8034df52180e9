// Slowing down instead of refusing: slowDown's options, the delay a decision earns, and the pacing the request
// sequence (adapters/exchange.ts) runs for it: a wait the client's leaving cancels, bounded per key.
import { assertKnownFields, fieldsOf } from '../src/config/known-fields.js';
import { mustBe, refuse } from '../src/config/refuse.js';
import { SLOW_DOWN_DEFAULTS } from '../src/defaults.js';
import { describe, RateLimitRequestError } from '../src/errors.js';
import type { Decision, Duration, HeadersMode, Limiter, ResetFormat, Rule, RuleFacts } from '../src/index.js';
import { parseDuration } from '../src/rules/duration.js';
import { createSetup, limiterOf, type Pacing, type Setup } from './common.js';

/** The longest wait a Node timer takes (about 24.8 days): the most `maxDelay` may be. */
export const MAX_DELAY_MS = 2 ** 31 - 1;

/**
 * How long a request over a rule's limit waits: ms per request over the limit (a number, or a `Duration`
 * such as `'500ms'`), so the first request over waits it once and the fifth five times; or a function of
 * how many requests over the limit this one is (`over`, 1 for the first) and the decision, returning ms.
 */
export type SlowDownDelay = Duration | ((over: number, decision: Decision) => number);

/** Options of `slowDown` in every framework; `Req` is the framework's request. */
export interface SlowDownOptions<Req> {
  /** The delay of a request over a rule's limit (see `SlowDownDelay`). Required. */
  delay: SlowDownDelay;
  /**
   * The longest delay, in ms or a `Duration`, at most about 24.8 days (2^31 - 1 ms, a Node timer's most).
   * @default '30s' (below the 60 s after which common proxies answer 504 themselves)
   */
  maxDelay?: Duration;
  /**
   * The most requests of one key (per rule, in this process) waiting at once: the next one over the limit
   * is refused as `rateLimit` refuses it (429, the rate-limit headers and `Retry-After`), rather than held.
   * @default 100
   */
  maxWaiting?: number;
  /** Which rate-limit fields to send, as `rateLimit`'s option; `Retry-After` only with a refusal. @default 'legacy' */
  headers?: HeadersMode;
  /** Unit of `X-RateLimit-Reset`. @default 'epoch-seconds' */
  reset?: ResetFormat;
  /** Requests for which this returns true pass at once (no headers, nothing counted). @default none */
  skip?: (req: Req) => boolean | Promise<boolean>;
  /** Epoch-ms clock for `X-RateLimit-Reset` in `'epoch-seconds'`. @default Date.now */
  clock?: () => number;
  /** Called before a request waits, with the delay in ms and the decision. For logging and metrics. @default none */
  onDelayed?: (delayMs: number, decision: Decision, req: Req) => void;
}

const SLOW_DOWN_FIELDS = fieldsOf<SlowDownOptions<unknown>>({
  delay: true,
  maxDelay: true,
  maxWaiting: true,
  headers: true,
  reset: true,
  skip: true,
  clock: true,
  onDelayed: true,
});

/** The request sequence's setup for slowDown: `pacing` set; `owned`: slowDown built the limiter (closed with the app). */
export type SlowDownSetup<Req> = Setup<Req> & { pacing: SlowDownPacing<Req>; owned: boolean };

/**
 * Resolves slowDown's arguments once; a framework takes its own options out first, so any field
 * `SlowDownOptions` does not have is refused as a typo (ERR_UNKNOWN_FIELD). Rules with a lockout or
 * counting outcomes are refused: slowDown counts every request and refuses only past `maxWaiting`.
 */
export function slowDownSetup<Req>(
  rulesOrLimiter: Rule[] | Limiter,
  options: SlowDownOptions<Req>,
): SlowDownSetup<Req> {
  if (options === null || typeof options !== 'object')
    refuse(
      'ERR_OPTION',
      'slowDown',
      `expects options with a delay, such as { delay: '500ms' }, got ${describe(options)}`,
    );
  assertKnownFields(options, SLOW_DOWN_FIELDS, 'slowDown');
  const { delay, maxDelay, maxWaiting, onDelayed, headers, reset, skip, clock } = options;
  const perRequestMs = typeof delay === 'function' ? undefined : delayOf(delay);
  const capMs = maxDelay === undefined ? SLOW_DOWN_DEFAULTS.maxDelayMs : maxDelayOf(maxDelay);
  const most = maxWaiting === undefined ? SLOW_DOWN_DEFAULTS.maxWaiting : maxWaitingOf(maxWaiting);
  const { limiter, owned } = limiterOf(rulesOrLimiter, 'slowDown', (rules) => {
    for (const rule of rules) acceptRule(rule);
  });
  const facts = new Map(limiter.ruleFacts.map((rule) => [rule.name, rule]));
  const delayMs = (decision: Decision): number => {
    const over = overLimit(decision, facts);
    if (over === 0) return 0;
    const ms =
      perRequestMs === undefined
        ? (delay as (o: number, d: Decision) => number)(over, decision)
        : perRequestMs * over;
    if (typeof ms !== 'number' || !(ms >= 0))
      throw new RateLimitRequestError(
        'ERR_DELAY',
        `slowDown: the delay function must return a number of ms, 0 or more, got ${describe(ms)}`,
      );
    return Math.min(Math.ceil(ms), capMs);
  };
  const pacing = createPacing(delayMs, most, onDelayed);
  const setup = createSetup(limiter, dropUndefined({ headers, reset, skip, clock }), [], pacing);
  return Object.assign(setup, { pacing, owned });
}

/**
 * slowDown counts every request as it arrives and never locks a key: rules with a lockout, counting outcomes,
 * holding slots (concurrency) or settling their cost are refused.
 */
function acceptRule(rule: RuleFacts): void {
  if (rule.hasLockout)
    refuse(
      'ERR_OPTION',
      'slowDown',
      `rule "${rule.name}" has a lockout, which refuses requests; slowDown only delays them`,
    );
  if (rule.countsOutcomes)
    refuse(
      'ERR_OPTION',
      'slowDown',
      `rule "${rule.name}" counts outcomes (countOn, resetOnSuccess); slowDown counts every request`,
    );
  if (rule.holdsSlots || rule.settles)
    refuse(
      'ERR_OPTION',
      'slowDown',
      `rule "${rule.name}" holds slots or settles its cost; slowDown counts requests as they arrive`,
    );
}

/** `delay` as ms per request over the limit: a number of ms (0 or more) or a duration string. */
function delayOf(delay: unknown): number {
  if (typeof delay === 'number' && Number.isFinite(delay) && delay >= 0) return delay;
  if (typeof delay === 'string') {
    const ms = parseDuration(delay);
    if (ms !== undefined) return ms;
  }
  const allowed = "ms per request over the limit (500, '500ms') or (over, decision) => ms";
  if (delay === undefined) refuse('ERR_OPTION', 'slowDown', `delay is required: ${allowed}`);
  return refuse('ERR_OPTION', 'slowDown', mustBe('delay', allowed, delay));
}

/** `maxDelay` in ms: a duration of 1 ms up to a Node timer's longest. */
function maxDelayOf(maxDelay: unknown): number {
  const ms = parseDuration(maxDelay as Duration);
  if (ms !== undefined && ms <= MAX_DELAY_MS) return ms;
  const allowed = `a duration such as '10s' or 10000, at most ${MAX_DELAY_MS} ms (about 24.8 days)`;
  return refuse('ERR_OPTION', 'slowDown', mustBe('maxDelay', allowed, maxDelay));
}

/** `maxWaiting`: a whole number of requests, 1 or more. */
function maxWaitingOf(maxWaiting: unknown): number {
  if (typeof maxWaiting === 'number' && Number.isSafeInteger(maxWaiting) && maxWaiting >= 1)
    return maxWaiting;
  const allowed = 'a whole number of requests waiting at once per key, 1 or more, such as 100';
  return refuse('ERR_OPTION', 'slowDown', mustBe('maxWaiting', allowed, maxWaiting));
}

/** The fields that are set: options of `exactOptionalPropertyTypes` types take no explicit undefined. */
function dropUndefined<T extends object>(value: T): { [K in keyof T]?: Exclude<T[K], undefined> } {
  return Object.fromEntries(Object.entries(value).filter(([, v]) => v !== undefined)) as {
    [K in keyof T]?: Exclude<T[K], undefined>;
  };
}

/**
 * How many units over its capacity the most exceeded enforced rule is after this request (a recorded
 * decision counts past the limit): 0 when none is over. A rule's capacity is a bucket's burst, else its
 * limit (`RuleFacts.capacity`). A rule over its limit whose count is unknown (the failure policy answered
 * `'deny'`) counts as 1 over.
 */
export function overLimit(decision: Decision, facts: ReadonlyMap<string, RuleFacts>): number {
  let over = 0;
  for (const r of decision.rules) {
    if (r.allowed || r.dryRun) continue;
    const capacity = facts.get(r.rule)?.capacity(r.limit) ?? r.limit;
    over = Math.max(over, 1, r.count - capacity);
  }
  return over;
}

/** slowDown's pacing, with what it holds now, for metrics and tests. */
export interface SlowDownPacing<Req> extends Pacing<Req> {
  /** Requests waiting now, in all. */
  readonly waiting: number;
  /** Requests waiting now for one rule's key. */
  waitingFor(rule: string, key: string): number;
}

/**
 * The pacing of one slowDown: `delayMs` for a decision, at most `maxWaiting` requests waiting at once per
 * rule and key (every key over its limit in the decision is counted), `onDelayed` told of each wait.
 */
export function createPacing<Req>(
  delayMs: (decision: Decision) => number,
  maxWaiting: number,
  onDelayed: ((delayMs: number, decision: Decision, req: Req) => void) | undefined,
): SlowDownPacing<Req> {
  // Rule and key, joined by a character no rule name holds; an entry is deleted when its count is 0.
  const held = new Map<string, number>();
  let total = 0;
  const slot = (rule: string, key: string) => `${rule}\n${key}`;
  const keysOver = (decision: Decision) =>
    decision.rules.filter((r) => !r.allowed && !r.dryRun).map((r) => slot(r.rule, r.key));
  return {
    get waiting() {
      return total;
    },
    waitingFor: (rule, key) => held.get(slot(rule, key)) ?? 0,
    plan(decision) {
      const ms = delayMs(decision);
      if (ms === 0) return 0;
      for (const key of keysOver(decision)) if ((held.get(key) ?? 0) >= maxWaiting) return undefined;
      return ms;
    },
    async wait(ms, decision, request, whenGone) {
      onDelayed?.(ms, decision, request);
      const keys = keysOver(decision);
      for (const key of keys) held.set(key, (held.get(key) ?? 0) + 1);
      total++;
      try {
        return await pause(ms, whenGone);
      } finally {
        total--;
        for (const key of keys) {
          const left = (held.get(key) ?? 1) - 1;
          if (left === 0) held.delete(key);
          else held.set(key, left);
        }
      }
    },
  };
}

/**
 * Resolves true after `ms`, or false as soon as the client goes. `whenGone(cancel)` arranges for `cancel` to
 * be called when the client goes (at once if it has) and returns what undoes that arrangement; either way
 * the timer and the listener are gone when the promise settles.
 */
export function pause(ms: number, whenGone: (cancel: () => void) => () => void): Promise<boolean> {
  return new Promise((resolve) => {
    let settled = false;
    let timer: ReturnType<typeof setTimeout> | undefined;
    let undo: (() => void) | undefined;
    const finish = (waited: boolean) => {
      if (settled) return;
      settled = true;
      if (timer !== undefined) clearTimeout(timer);
      undo?.();
      resolve(waited);
    };
    undo = whenGone(() => finish(false));
    if (settled) undo();
    else timer = setTimeout(() => finish(true), ms);
  });
}
