// Rate-limit response headers: one pure function from a Decision to header fields, shared by every adapter.
import { ADAPTER_DEFAULTS } from './defaults.js';
import type { Decision, RuleResult } from './types.js';

/**
 * Which fields to send: `'legacy'` the de-facto `X-RateLimit-*` trio, `'draft-6'` the separate
 * `RateLimit-Limit`, `-Remaining`, `-Reset` fields of draft-ietf-httpapi-ratelimit-headers-06, `'draft-7'`
 * its one `RateLimit: limit=, remaining=, reset=` field of draft 07 (both as express-rate-limit sends them,
 * with `RateLimit-Policy`), `'standard'` the newest draft's `RateLimit-Policy` and `RateLimit` fields
 * (draft-ietf-httpapi-ratelimit-headers-11), `'both'` (legacy and standard), or `false` for none.
 * `Retry-After` is part of a denial, not of this choice: a 429 always carries it.
 */
export type HeadersMode = 'legacy' | 'draft-6' | 'draft-7' | 'standard' | 'both' | false;

/** Every accepted `headers` value, for validation and its message. */
export const HEADERS_MODES: readonly HeadersMode[] = [
  'legacy',
  'draft-6',
  'draft-7',
  'standard',
  'both',
  false,
];

/**
 * A rule's quota unit, the newest draft's `qu` parameter: `'requests'` (the draft's default, left out of
 * the field) counts requests started in a window; `'concurrent-requests'` counts requests in flight at
 * once (a concurrency window), which has no time at which its quota resets.
 */
export type QuotaUnit = 'requests' | 'concurrent-requests';

/**
 * `Retry-After` of a concurrency denial, in seconds: a slot frees when a request in flight ends, which
 * no one knows in advance (the lease only bounds a dead holder, whose process stopped renewing it), so
 * the client is told to try again shortly rather than after a lease that live holders keep renewing.
 */
export const CONCURRENCY_RETRY_SECONDS = 1;

/** Unit of `X-RateLimit-Reset`: UTC epoch seconds (as GitHub and express-rate-limit) or seconds from now. */
export type ResetFormat = 'epoch-seconds' | 'delta-seconds';

export interface HeaderOptions {
  /** @default 'legacy' */
  headers?: HeadersMode;
  /** @default 'epoch-seconds' */
  reset?: ResetFormat;
  /** The time `X-RateLimit-Reset` is counted from in `'epoch-seconds'`, epoch ms. @default Date.now() */
  nowMs?: number;
  /** Nominal window of each rule in whole seconds, for the `w` parameter; rules without one omit `w`. */
  windows?: Readonly<Record<string, number>>;
  /**
   * Each rule's quota unit; rules left out count `'requests'`. A `'concurrent-requests'` rule (a
   * concurrency window: adapters fill this in from `limiter.ruleFacts`) gets `qu="concurrent-requests"`
   * and no `w` in `RateLimit-Policy`, no `t` in `RateLimit`, and a reset of 0 in the single-valued forms
   * (`CONCURRENCY_RETRY_SECONDS` when it denies): nothing about it resets with time.
   */
  units?: Readonly<Record<string, QuotaUnit>>;
}

/** A header field name and its value, in the order they should be written. */
export type HeaderField = [name: string, value: string];

/**
 * Whether a field is a list that several limiters on one response each add their members to, so that
 * adapters append it instead of replacing it: `RateLimit-Policy` in every form, and the newest draft's
 * `RateLimit` list (its members start with the quoted rule name). Draft 7's `RateLimit` is one
 * dictionary (`limit=5, remaining=4, reset=60`): a second limiter's replaces it, as for every other field.
 */
export function appendsField(name: string, value: string): boolean {
  return name === 'RateLimit-Policy' || (name === 'RateLimit' && value.startsWith('"'));
}

/**
 * The rate-limit header fields for a decision. Nothing when no rule matched (`rules` is empty).
 *
 * - Legacy: `X-RateLimit-Limit`, `X-RateLimit-Remaining` (never negative, 0 while locked) and
 *   `X-RateLimit-Reset` (`ceil((now + ms) / 1000)` or `ceil(ms / 1000)`), figures of the denying rule,
 *   or of the tightest rule when allowed.
 * - Draft 6: `RateLimit-Limit`, `RateLimit-Remaining`, `RateLimit-Reset` (seconds from now) of the same rule
 *   as the legacy trio, and `RateLimit-Policy: <limit>;w=<seconds>`, that rule's policy first, then every
 *   other matched rule's in rule order (`w` left out for a cron calendar, which has no fixed length).
 * - Draft 7: `RateLimit: limit=<n>, remaining=<n>, reset=<seconds>` of that rule, and the same `RateLimit-Policy`.
 * - Standard: `RateLimit-Policy: "<rule>";q=<limit>;w=<seconds>` and `RateLimit: "<rule>";r=<remaining>;t=<seconds>`,
 *   one list member per matched rule in rule order, members joined by `, ` (RFC 9651 canonical form).
 * - Denied: `Retry-After: ceil(retryAfterMs / 1000)`, at least 1; a concurrency rule that denies
 *   (not locked) counts as `CONCURRENCY_RETRY_SECONDS` rather than its soonest lease end.
 *
 * Every figure is an RFC 9651 Integer of at most 15 digits: larger ones (a limit of
 * `Number.MAX_SAFE_INTEGER`) are sent as `999999999999999` (`MAX_HEADER_INTEGER`).
 *
 * For a rule that denies, the reset time is the later of its `resetMs` and its `retryAfterMs`, so
 * `t` and `X-RateLimit-Reset` never point before the time `Retry-After` names.
 *
 * @example
 * formatHeaders(decision, { headers: 'both' });
 * // [['X-RateLimit-Limit', '5'], ['X-RateLimit-Remaining', '4'], ['X-RateLimit-Reset', '1767225660'],
 * //  ['RateLimit-Policy', '"login";q=5;w=300'], ['RateLimit', '"login";r=4;t=300']]
 */
export function formatHeaders(decision: Decision, options: HeaderOptions = {}): HeaderField[] {
  const nowMs = options.nowMs;
  return headerFields(
    decision,
    options.headers ?? ADAPTER_DEFAULTS.headers,
    options.reset === 'delta-seconds',
    nowMs === undefined ? Date.now : () => nowMs,
    options.windows,
    options.units,
    undefined,
    undefined,
  );
}

/** Options of `createHeaderFormatter`: those of `formatHeaders`, with a clock instead of one instant. */
export interface HeaderFormatterOptions extends Omit<HeaderOptions, 'nowMs'> {
  /** The time `X-RateLimit-Reset` is counted from in `'epoch-seconds'`, epoch ms. @default Date.now */
  clock?: () => number;
}

/**
 * `formatHeaders` with its options fixed, for adapters calling it on every response: each rule's
 * quoted name and `RateLimit-Policy` member are computed once, and the clock is read only when a
 * field needs it. Same fields, same order.
 */
export function createHeaderFormatter(
  options: HeaderFormatterOptions = {},
): (decision: Decision) => HeaderField[] {
  const mode = options.headers ?? ADAPTER_DEFAULTS.headers;
  const delta = options.reset === 'delta-seconds';
  const clock = options.clock ?? Date.now;
  const windows = options.windows;
  const units = concurrentUnits(options.units);
  const members = new Map<string, RuleStrings>();
  const texts = new NumberTexts();
  return (decision) => headerFields(decision, mode, delta, clock, windows, units, members, texts);
}

/**
 * The seconds of a denial's `Retry-After`, as `formatHeaders` and `createHeaderFormatter` write it with the
 * same `units`: at least 1, the longest wait among the denying rules, a concurrency rule that denies (not
 * locked) counting `CONCURRENCY_RETRY_SECONDS` rather than its lease. The adapters' default denial body
 * takes its `retryAfter` from here, so the body and the field never disagree.
 *
 * @example
 * const retryAfter = createRetryAfter({ exports: 'concurrent-requests' });
 * retryAfter(decision); // 1 for a denial by 'exports', whatever its lease
 */
export function createRetryAfter(
  units?: Readonly<Record<string, QuotaUnit>>,
): (decision: Decision) => number {
  const concurrent = concurrentUnits(units);
  const isConcurrent =
    concurrent === undefined ? undefined : (rule: string) => concurrent[rule] === 'concurrent-requests';
  return (decision) => retryAfterSeconds(decision, isConcurrent);
}

/**
 * The text of the last few figures a formatter wrote, by field: a limit, an epoch-seconds reset and a
 * reset in seconds repeat from one response to the next (a reset changes once a second at most), and
 * `String()` makes a number's text anew each time (bench/RESULTS.md).
 */
class NumberTexts {
  #limit = Number.NaN;
  #limitText = '';
  #reset = Number.NaN;
  #resetText = '';

  limit(n: number): string {
    if (n !== this.#limit) {
      this.#limit = n;
      this.#limitText = String(n);
    }
    return this.#limitText;
  }

  reset(n: number): string {
    if (n !== this.#reset) {
      this.#reset = n;
      this.#resetText = String(n);
    }
    return this.#resetText;
  }
}

/** A rule's strings in the standard fields, for one limit. */
interface RuleStrings {
  limit: number;
  /** The sf-string of the rule name. */
  name: string;
  /** Its `RateLimit-Policy` member. */
  policy: string;
  /** Counts requests in flight: its `RateLimit` member has no `t`. */
  concurrent: boolean;
}

/** Rules remembered per formatter; past this many (a formatter fed arbitrary rule names) nothing more is kept. */
const MAX_CACHED_RULES = 1000;

function headerFields(
  decision: Decision,
  mode: HeadersMode,
  delta: boolean,
  clock: () => number,
  windows: Readonly<Record<string, number>> | undefined,
  units: Readonly<Record<string, QuotaUnit>> | undefined,
  cache: Map<string, RuleStrings> | undefined,
  texts: NumberTexts | undefined,
): HeaderField[] {
  // Only when some rule counts requests in flight; else every rule's figures are its own.
  const concurrent =
    units === undefined ? undefined : (rule: string) => units[rule] === 'concurrent-requests';
  if (decision.rules.length > 0 && (mode === 'legacy' || mode === 'both')) {
    const ms = resetMsOf(decision, concurrent);
    const reset = delta ? seconds(ms) : sfInteger(Math.ceil((clock() + ms) / 1000));
    const limit = sfInteger(decision.limit);
    const fields: HeaderField[] = [
      ['X-RateLimit-Limit', texts === undefined ? String(limit) : texts.limit(limit)],
      ['X-RateLimit-Remaining', String(remainingOf(decision))],
      ['X-RateLimit-Reset', texts === undefined ? String(reset) : texts.reset(reset)],
    ];
    if (mode === 'legacy') {
      if (!decision.allowed) fields.push(['Retry-After', String(retryAfterSeconds(decision, concurrent))]);
      return fields;
    }
    return standardFields(fields, decision, windows, concurrent, cache, mode);
  }
  const fields: HeaderField[] = [];
  if (decision.rules.length > 0 && (mode === 'draft-6' || mode === 'draft-7')) {
    const limitFigure = sfInteger(decision.limit);
    const limit = texts === undefined ? String(limitFigure) : texts.limit(limitFigure);
    const remaining = String(remainingOf(decision));
    const resetFigure = seconds(resetMsOf(decision, concurrent));
    const reset = texts === undefined ? String(resetFigure) : texts.reset(resetFigure);
    if (mode === 'draft-6') {
      fields.push(['RateLimit-Limit', limit], ['RateLimit-Remaining', remaining], ['RateLimit-Reset', reset]);
    } else {
      fields.push(['RateLimit', `limit=${limit}, remaining=${remaining}, reset=${reset}`]);
    }
    fields.push(['RateLimit-Policy', draftPolicies(decision, windows, concurrent)]);
  }
  return standardFields(fields, decision, windows, concurrent, cache, mode);
}

/** `fields`, then (for 'standard' and 'both') the standard fields, then `Retry-After` when denied. */
function standardFields(
  fields: HeaderField[],
  decision: Decision,
  windows: Readonly<Record<string, number>> | undefined,
  concurrent: ((rule: string) => boolean) | undefined,
  cache: Map<string, RuleStrings> | undefined,
  mode: HeadersMode,
): HeaderField[] {
  if (decision.rules.length > 0 && (mode === 'standard' || mode === 'both')) {
    let policies = '';
    let states = '';
    for (const r of decision.rules) {
      let strings = cache?.get(r.rule);
      if (strings === undefined || strings.limit !== r.limit || r.windowSeconds !== undefined) {
        strings = ruleStrings(r, windows, concurrent?.(r.rule) === true);
        // A window chosen per request is the client's own: not cached for the rule.
        if (cache !== undefined && cache.size < MAX_CACHED_RULES && r.windowSeconds === undefined)
          cache.set(r.rule, strings);
      }
      const separator = policies === '' ? '' : ', ';
      policies += separator + strings.policy;
      states += `${separator}${strings.name};r=${remainingOf(r)}`;
      if (!strings.concurrent) states += `;t=${seconds(effectiveResetMs(r))}`;
    }
    fields.push(['RateLimit-Policy', policies], ['RateLimit', states]);
  }
  if (!decision.allowed) fields.push(['Retry-After', String(retryAfterSeconds(decision, concurrent))]);
  return fields;
}

/** `units` as the formatter reads it: undefined when no rule counts requests in flight. */
function concurrentUnits(
  units: Readonly<Record<string, QuotaUnit>> | undefined,
): Readonly<Record<string, QuotaUnit>> | undefined {
  if (units === undefined) return undefined;
  return Object.values(units).includes('concurrent-requests') ? { ...units } : undefined;
}

function ruleStrings(
  r: RuleResult,
  windows: Readonly<Record<string, number>> | undefined,
  concurrent: boolean,
): RuleStrings {
  const name = sfString(r.rule);
  const tail = concurrent ? ';qu="concurrent-requests"' : windowParam(r.windowSeconds ?? windows?.[r.rule]);
  return { limit: r.limit, name, policy: `${name};q=${sfInteger(r.limit)}${tail}`, concurrent };
}

/**
 * Seconds of `Retry-After`: the longest wait among the denying rules (the decision's `retryAfterMs`), a
 * concurrency rule that denies counting `CONCURRENCY_RETRY_SECONDS` (its lock's wait when it is locked).
 */
function retryAfterSeconds(decision: Decision, concurrent: ((rule: string) => boolean) | undefined): number {
  if (concurrent === undefined) return Math.max(1, seconds(decision.retryAfterMs ?? 0));
  let ms: number | undefined;
  for (const r of decision.rules) {
    if (r.allowed || r.dryRun === true) continue;
    const wait = concurrent(r.rule) && !r.locked ? CONCURRENCY_RETRY_SECONDS * 1000 : (r.retryAfterMs ?? 0);
    ms = Math.max(ms ?? 0, wait);
  }
  // No rule of its own denied (a store failure's policy answer): the decision's own wait.
  return Math.max(1, seconds(ms ?? decision.retryAfterMs ?? 0));
}

/** The reset time of the single-valued forms' rule: none for a concurrency rule (its retry hint when it denies). */
function resetMsOf(decision: Decision, concurrent: ((rule: string) => boolean) | undefined): number {
  if (concurrent === undefined || decision.rule === undefined || !concurrent(decision.rule))
    return effectiveResetMs(decision);
  if (decision.allowed) return 0;
  return decision.locked ? effectiveResetMs(decision) : CONCURRENCY_RETRY_SECONDS * 1000;
}

/**
 * Drafts 6 and 7's `RateLimit-Policy`: `<limit>;w=<seconds>` per matched rule, the rule the other fields
 * describe first (its limit is the one `RateLimit-Limit` and `limit=` give), then the others in rule order.
 */
function draftPolicies(
  decision: Decision,
  windows: Readonly<Record<string, number>> | undefined,
  concurrent: ((rule: string) => boolean) | undefined,
): string {
  // Drafts 6 and 7 have no unit: a concurrency rule's policy is its limit alone.
  const policy = (r: RuleResult) =>
    `${sfInteger(r.limit)}${concurrent?.(r.rule) === true ? '' : windowParam(r.windowSeconds ?? windows?.[r.rule])}`;
  const first = decision.rules.find((r) => r.rule === decision.rule) ?? (decision.rules[0] as RuleResult);
  let policies = policy(first);
  for (const r of decision.rules) if (r !== first) policies += `, ${policy(r)}`;
  return policies;
}

/**
 * The largest RFC 9651 Integer: at most 15 digits. Every figure of every field (limits, remaining,
 * seconds, epoch seconds) is sent as at most this, so that a strict parser never drops the field: a
 * limit of `Number.MAX_SAFE_INTEGER` (an "unlimited" plan) reads `999999999999999`.
 */
export const MAX_HEADER_INTEGER = 999_999_999_999_999;

/** `n` as an RFC 9651 Integer: clamped to 15 digits. */
function sfInteger(n: number): number {
  return Math.min(n, MAX_HEADER_INTEGER);
}

/** The `;w=<seconds>` parameter, or nothing for a rule without a nominal window. */
function windowParam(w: number | undefined): string {
  return w !== undefined && Number.isSafeInteger(w) && w > 0 ? `;w=${sfInteger(w)}` : '';
}

/** Whole seconds, rounded up, never negative, at most 15 digits. */
function seconds(ms: number): number {
  return Number.isFinite(ms) && ms > 0 ? sfInteger(Math.ceil(ms / 1000)) : 0;
}

function remainingOf(r: Decision | RuleResult): number {
  return r.locked || !(r.remaining > 0) ? 0 : sfInteger(Math.floor(r.remaining));
}

function effectiveResetMs(r: Decision | RuleResult): number {
  return r.allowed ? r.resetMs : Math.max(r.resetMs, r.retryAfterMs ?? 0);
}

/** An RFC 9651 sf-string: printable ASCII only (others become `?`), `"` and `\` escaped. */
function sfString(value: string): string {
  return `"${value.replace(/[^\x20-\x7e]/g, '?').replace(/["\\]/g, '\\$&')}"`;
}
