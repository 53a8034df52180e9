// Rule validation and normalization: bad rules are refused here, and the defaults of defaults.ts filled in
// (the window in rules/window.ts, the lockout in rules/lockout.ts).

import { windowKind } from '../algorithms/index.js';
import { explainPathError, KEY_FORMS } from '../config/hints.js';
import { assertKnownFields, fieldsOf } from '../config/known-fields.js';
import { type FieldRefusal, mustBe, refusalIn, refuse } from '../config/refuse.js';
import { RULE_DEFAULTS } from '../defaults.js';
import { describe } from '../errors.js';
import { createExtractor, type Extractor, normalizeIdentity } from '../keys/extractors.js';
import { type OnMissingKey, onMissingKey } from '../keys/missing-key.js';
import type { StoreRule } from '../stores/store-ops.js';
import type { LimitFunction, MatchSpec, RequestInfo, Rule } from '../types.js';
import type { PeriodFn } from './calendar.js';
import { type RuleFacts, ruleFacts } from './facts.js';
import { compileLockout } from './lockout.js';
import { createMatcher, type Matcher } from './match.js';
import { compileWindow } from './window.js';
import type { ChosenWindow } from './window-choice.js';

const MATCH_FIELDS = fieldsOf<MatchSpec>({ method: true, path: true });

/** A validated rule, ready for the hot path. */
export interface CompiledRule {
  readonly name: string;
  readonly index: number;
  readonly matcher: Matcher | undefined;
  readonly extract: Extractor;
  /**
   * Called when `extract` found no key: the rule's `missing` (throws `ERR_KEY_MISSING` for `'refuse'`, warns
   * once when it was left out).
   */
  readonly missing: OnMissingKey;
  /** The rule's number, or a function read per request (see rules/limits.ts). */
  readonly limit: number | LimitFunction;
  /** A fixed cost, or a function validated on each call. */
  readonly cost: number | ((req: RequestInfo) => number);
  readonly countOn: 'all' | 'failure' | 'success';
  readonly resetOnSuccess: boolean;
  /** The cost is an estimate, replaced by the actual cost with `limiter.settle`. */
  readonly settle: boolean;
  readonly store: StoreRule;
  /** Calendar windows only. */
  readonly periods: PeriodFn | undefined;
  /** Whole seconds of the window, for the `w` parameter of `RateLimit-Policy` (0 when not fixed-length). */
  readonly windowSeconds: number;
  /** What the rule is, for the parts that must not read its raw fields (see rules/facts.ts). */
  readonly facts: RuleFacts;
  /** A window chosen per request (rules/window-choice.ts); undefined: the rule's window for every request. */
  readonly chosen: ChosenWindow | undefined;
}

const RULE_FIELDS = fieldsOf<Rule>({
  name: true,
  match: true,
  key: true,
  limit: true,
  window: true,
  cost: true,
  countOn: true,
  lockout: true,
  resetOnSuccess: true,
  mode: true,
  normalize: true,
  settle: true,
  missing: true,
});

export interface CompileOptions {
  ipv6Subnet: number;
}

/** Validates and compiles a rule set. Throws `RateLimitConfigError` naming the rule, field and value. */
export function compileRules(rules: unknown, options: CompileOptions): CompiledRule[] {
  // An empty array would limit nothing, silently: refused like a missing one.
  if (!Array.isArray(rules) || rules.length === 0) {
    const got = Array.isArray(rules) ? '[]' : describe(rules);
    refuse('ERR_RULES', undefined, `rules must be a non-empty array of rule objects, got ${got}`);
  }
  const seen = new Set<string>();
  const compiled = rules.map((rule, index) => {
    const one = compileRule(rule, index, options);
    if (seen.has(one.name))
      refuse('ERR_DUPLICATE_RULE', `rule "${one.name}"`, 'name must be unique, it is used twice');
    seen.add(one.name);
    return one;
  });
  return groupByKey(
    compiled,
    (rules as Rule[]).map((rule) => rule.key),
  );
}

/**
 * Marks `grouped` the rules of groupable window types (WindowKind.groupable) that share their `key` form
 * with another such rule (the same text, the same function, or arrays of the same): their counts for one
 * identity are one record in the store (one Redis key), read and written together. A rule alone on its
 * key keeps a key of its own.
 */
function groupByKey(rules: CompiledRule[], keys: readonly unknown[]): CompiledRule[] {
  const functions = new Map<unknown, number>();
  const formOf = (key: unknown): string => {
    if (Array.isArray(key)) return `[${key.map(formOf).join(',')}]`;
    if (typeof key === 'function') {
      let id = functions.get(key);
      if (id === undefined) {
        id = functions.size;
        functions.set(key, id);
      }
      return `f${id}`;
    }
    return `s${JSON.stringify(key)}`;
  };
  const forms = rules.map((rule, i) => (windowKind(rule.store.type).groupable ? formOf(keys[i]) : undefined));
  const counts = new Map<string, number>();
  for (const form of forms) if (form !== undefined) counts.set(form, (counts.get(form) ?? 0) + 1);
  return rules.map((rule, i) => {
    const form = forms[i];
    if (form === undefined || (counts.get(form) ?? 0) < 2) return rule;
    const store = { ...rule.store, grouped: true };
    const chosen = rule.chosen === undefined ? undefined : { ...rule.chosen, store, choices: new Map() };
    return { ...rule, store, chosen };
  });
}

/** One rule, its fields checked in the order the messages assume: name, limit, window, what it counts, lockout, key, match. */
function compileRule(input: unknown, index: number, options: CompileOptions): CompiledRule {
  const rule = ruleObject(input, index);
  const { name } = rule;
  const where = `rule "${name}"`;
  const fail = refusalIn(where);
  const limit = rule.limit;
  if (typeof limit !== 'function' && (!Number.isSafeInteger(limit) || limit < 1))
    fail('ERR_LIMIT', 'limit', 'a positive integer', limit);
  const window = compileWindow(rule.window, limit, where, fail);
  const cost = compileCost(rule.cost, name);
  const { countOn, dryRun, resetOnSuccess } = compileCounting(rule, fail);
  const lockout = compileLockout(rule.lockout, where, fail);
  const settle = rule.settle ?? RULE_DEFAULTS.settle;
  if (typeof settle !== 'boolean') fail('ERR_OPTION', 'settle', 'a boolean', settle);
  if (windowKind(window.type).holdsSlots) {
    assertHoldsSlots(rule, where);
    // Each unit of cost is a slot held: a fixed cost above a fixed limit would never be admitted.
    if (typeof cost === 'number' && typeof limit === 'number' && cost > limit)
      fail(
        'ERR_COST',
        'cost',
        `at most the limit (${limit}) on a concurrency window, each unit a slot held`,
        cost,
      );
  } else if (settle) assertSettles(rule, where);
  const extract = compileKey(rule, where, fail, options);
  const missing = rule.missing;
  if (missing !== undefined && missing !== 'skip' && missing !== 'refuse')
    fail('ERR_OPTION', 'missing', `'skip' (the rule does not apply) or 'refuse' (HTTP 400)`, missing);
  const matcher = compileMatch(rule.match, where, fail);
  const store: StoreRule = {
    name,
    type: window.type,
    sizeMs: window.sizeMs,
    buckets: window.buckets,
    burst: window.burst,
    lockout,
    dryRun,
    // A lease is sized by the rule's window: a window chosen per request is decided by the store each time.
    leasable:
      lockout === undefined &&
      !dryRun &&
      countOn === 'all' &&
      !resetOnSuccess &&
      !settle &&
      window.choose === undefined,
  };
  return {
    name,
    index,
    matcher,
    extract,
    missing: onMissingKey(name, rule.key, missing ?? RULE_DEFAULTS.missing, missing !== undefined),
    limit,
    cost,
    countOn,
    resetOnSuccess,
    settle,
    periods: window.periods,
    windowSeconds: window.windowSeconds,
    facts: ruleFacts(
      rule,
      window.type,
      window.burst,
      { countOn, resetOnSuccess },
      lockout !== undefined,
      settle,
      matcher?.prefixes !== undefined,
    ),
    store,
    chosen: window.choose === undefined ? undefined : { store, choose: window.choose, choices: new Map() },
  };
}

/** The rule as an object with a valid name, its fields known. */
function ruleObject(input: unknown, index: number): Rule {
  if (input === null || typeof input !== 'object')
    refuse('ERR_RULES', undefined, `rules[${index}] must be a rule object, got ${describe(input)}`);
  const rule = input as Rule;
  const name = rule.name;
  const validName = typeof name === 'string' && /^[\w.\-~]{1,64}$/.test(name);
  // Before the name: a misspelled `name` is reported as the typo it is.
  assertKnownFields(rule, RULE_FIELDS, validName ? `rule "${name}"` : `rules[${index}]`);
  if (!validName) {
    const allowed = `1-64 characters of letters, digits, '_', '-', '.', '~'`;
    refuse('ERR_RULE_NAME', `rules[${index}]`, mustBe('name', allowed, name));
  }
  return rule;
}

/** A fixed cost (checked now) or a function (checked on each call). */
function compileCost(cost: Rule['cost'], rule: string): number | ((req: RequestInfo) => number) {
  if (cost === undefined) return RULE_DEFAULTS.cost;
  if (typeof cost === 'function') return cost;
  assertCost(cost, rule);
  return cost;
}

/** What the rule counts and whether it enforces: `countOn`, `resetOnSuccess`, `mode`. */
function compileCounting(
  rule: Rule,
  fail: FieldRefusal,
): { countOn: CompiledRule['countOn']; resetOnSuccess: boolean; dryRun: boolean } {
  const countOn = rule.countOn ?? RULE_DEFAULTS.countOn;
  if (!['all', 'failure', 'success'].includes(countOn))
    fail('ERR_OPTION', 'countOn', `'all', 'failure' or 'success'`, countOn);
  const mode = rule.mode ?? RULE_DEFAULTS.mode;
  if (mode !== 'enforce' && mode !== 'dry-run') fail('ERR_OPTION', 'mode', `'enforce' or 'dry-run'`, mode);
  if (rule.resetOnSuccess !== undefined && typeof rule.resetOnSuccess !== 'boolean') {
    fail('ERR_OPTION', 'resetOnSuccess', 'a boolean', rule.resetOnSuccess);
  }
  return {
    countOn,
    resetOnSuccess: rule.resetOnSuccess ?? RULE_DEFAULTS.resetOnSuccess,
    dryRun: mode === 'dry-run',
  };
}

/**
 * A concurrency rule holds slots until they are released: the fields that give units back or clear them on
 * an outcome, or lock the key (which would forget its holders), or settle a cost, have no meaning there.
 */
function assertHoldsSlots(rule: Rule, where: string): void {
  const refused: Array<[keyof Rule, boolean]> = [
    ['countOn', rule.countOn !== undefined && rule.countOn !== 'all'],
    ['resetOnSuccess', rule.resetOnSuccess === true],
    ['lockout', rule.lockout !== undefined],
    ['settle', rule.settle === true],
  ];
  for (const [field, set] of refused) {
    if (set)
      refuse(
        'ERR_OPTION',
        where,
        `${field} does not apply to a concurrency window (a slot is held until it is released), got ${describe(rule[field])}`,
      );
  }
}

/**
 * A settled rule's count moves from the estimate to the actual cost after the request: outcomes that give
 * units back or clear the count, and lockouts placed on a count that is not final yet, are refused with it.
 */
function assertSettles(rule: Rule, where: string): void {
  const refused: Array<[keyof Rule, boolean]> = [
    ['countOn', rule.countOn !== undefined && rule.countOn !== 'all'],
    ['resetOnSuccess', rule.resetOnSuccess === true],
    ['lockout', rule.lockout !== undefined],
  ];
  for (const [field, set] of refused) {
    if (set)
      refuse(
        'ERR_OPTION',
        where,
        `${field} does not apply with settle: true (settle(decision, 0) gives the estimate back), got ${describe(rule[field])}`,
      );
  }
}

/** The key's extractor, with the rule's `normalize` applied to its material. */
function compileKey(rule: Rule, where: string, fail: FieldRefusal, options: CompileOptions): Extractor {
  let normalize: ((value: string) => string) | undefined;
  if (rule.normalize === true) normalize = normalizeIdentity;
  else if (typeof rule.normalize === 'function') normalize = rule.normalize;
  else if (rule.normalize !== undefined && rule.normalize !== false) {
    fail('ERR_OPTION', 'normalize', 'a boolean or a function', rule.normalize);
  }
  if (rule.key === undefined || rule.key === null)
    refuse('ERR_KEY', where, `key is required (one of ${KEY_FORMS})`);
  try {
    return createExtractor(rule.key, { ipv6Subnet: options.ipv6Subnet, normalize, rule: rule.name });
  } catch (error) {
    return fail('ERR_KEY', 'key', `a known key form (${(error as Error).message})`, rule.key);
  }
}

/** The rule's matcher (undefined: every request), the parser's errors explained. */
function compileMatch(match: Rule['match'], where: string, fail: FieldRefusal): Matcher | undefined {
  if (typeof match === 'object') assertKnownFields(match, MATCH_FIELDS, where, 'match');
  try {
    return createMatcher(match);
  } catch (error) {
    const explained = explainPathError((error as Error).message);
    if (explained !== undefined)
      fail('ERR_MATCH', 'match', `in path-to-regexp 8 syntax: ${explained}`, match);
    return fail(
      'ERR_MATCH',
      'match',
      `'METHOD /path' or { method, path } in path-to-regexp syntax (${(error as Error).message})`,
      match,
    );
  }
}

/** A cost must be a non-negative safe integer. Throws a message naming the rule and the value. */
export function assertCost(cost: unknown, rule: string): asserts cost is number {
  if (typeof cost !== 'number' || !Number.isSafeInteger(cost) || cost < 0)
    refuse('ERR_COST', `rule "${rule}"`, mustBe('cost', 'a non-negative integer', cost));
}
