// Rule validation and normalization: bad rules are refused here, and the defaults of defaults.ts filled in.

import type { StoreLockout, StoreRule } from '../algorithms/types.js';
import { explainPathError, KEY_FORMS } from '../config/hints.js';
import { assertKnownFields, fieldsOf } from '../config/known-fields.js';
import { RULE_DEFAULTS } from '../defaults.js';
import { describe, failureIn, RateLimitConfigError } from '../errors.js';
import { createExtractor, type Extractor, normalizeIdentity } from '../keys/extractors.js';
import type { LimitFunction, LockoutSpec, MatchSpec, RequestInfo, Rule } from '../types.js';
import type { PeriodFn } from './calendar.js';
import { parsePeriod, periodAllowed } from './duration.js';
import { createMatcher, type Matcher } from './match.js';
import { compileWindow } from './window.js';

/** A validated rule, ready for the hot path. */
export interface CompiledRule {
  readonly name: string;
  readonly index: number;
  readonly matcher: Matcher | undefined;
  readonly extract: Extractor;
  /** The rule's number, or a function read per request (see rules/limits.ts). */
  readonly limit: number | LimitFunction;
  /** A fixed cost, or a function validated on each call. */
  readonly cost: number | ((req: RequestInfo) => number);
  readonly countOn: 'all' | 'failure' | 'success';
  readonly resetOnSuccess: boolean;
  readonly store: StoreRule;
  /** Calendar windows only. */
  readonly periods: PeriodFn | undefined;
  /** Whole seconds of the window, for the `w` parameter of `RateLimit-Policy` (0 when not fixed-length). */
  readonly windowSeconds: number;
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
});
const LOCKOUT_FIELDS = fieldsOf<LockoutSpec>({
  duration: true,
  escalate: true,
  maxDuration: true,
  forgetAfter: true,
});
const MATCH_FIELDS = fieldsOf<MatchSpec>({ method: true, path: true });

export interface CompileOptions {
  ipv6Subnet: number;
}

/** Validates and compiles a rule set. Throws `RateLimitConfigError` naming the rule, field and value. */
export function compileRules(rules: unknown, options: CompileOptions): CompiledRule[] {
  // An empty array would limit nothing, silently: refused like a missing one.
  if (!Array.isArray(rules) || rules.length === 0) {
    throw new RateLimitConfigError(
      'ERR_RULES',
      `rules must be a non-empty array of rule objects, got ${Array.isArray(rules) ? '[]' : describe(rules)}`,
    );
  }
  const seen = new Set<string>();
  return rules.map((rule, index) => {
    const compiled = compileRule(rule, index, options);
    if (seen.has(compiled.name)) {
      throw new RateLimitConfigError(
        'ERR_DUPLICATE_RULE',
        `rule "${compiled.name}": name must be unique, it is used twice`,
      );
    }
    seen.add(compiled.name);
    return compiled;
  });
}

function compileRule(input: unknown, index: number, options: CompileOptions): CompiledRule {
  if (input === null || typeof input !== 'object') {
    throw new RateLimitConfigError(
      'ERR_RULES',
      `rules[${index}] must be a rule object, got ${describe(input)}`,
    );
  }
  const rule = input as Rule;
  const name = rule.name;
  const validName = typeof name === 'string' && /^[\w.\-~]{1,64}$/.test(name);
  // Before the name: a misspelled `name` is reported as the typo it is.
  assertKnownFields(rule, RULE_FIELDS, validName ? `rule "${name}"` : `rules[${index}]`);
  if (!validName) {
    throw new RateLimitConfigError(
      'ERR_RULE_NAME',
      `rules[${index}]: name must be 1-64 characters of letters, digits, '_', '-', '.', '~', got ${describe(name)}`,
    );
  }
  const where = `rule "${name}"`;
  const fail = failureIn(where);

  const limit = rule.limit;
  if (typeof limit !== 'function' && (!Number.isSafeInteger(limit) || limit < 1))
    fail('ERR_LIMIT', 'limit', 'a positive integer', limit);

  const window = compileWindow(rule.window, limit, where, fail);
  const duration = (field: string, value: unknown): number =>
    parsePeriod(value) ?? fail('ERR_DURATION', field, periodAllowed(value, '1d'), value);

  let cost: number | ((req: RequestInfo) => number) = RULE_DEFAULTS.cost;
  if (rule.cost !== undefined) {
    if (typeof rule.cost === 'function') cost = rule.cost;
    else {
      assertCost(rule.cost, name);
      cost = rule.cost;
    }
  }

  const countOn = rule.countOn ?? RULE_DEFAULTS.countOn;
  if (!['all', 'failure', 'success'].includes(countOn))
    fail('ERR_OPTION', 'countOn', `'all', 'failure' or 'success'`, countOn);
  const mode = rule.mode ?? RULE_DEFAULTS.mode;
  if (mode !== 'enforce' && mode !== 'dry-run') fail('ERR_OPTION', 'mode', `'enforce' or 'dry-run'`, mode);
  if (rule.resetOnSuccess !== undefined && typeof rule.resetOnSuccess !== 'boolean') {
    fail('ERR_OPTION', 'resetOnSuccess', 'a boolean', rule.resetOnSuccess);
  }

  let lockout: StoreLockout | undefined;
  if (rule.lockout !== undefined) {
    const l = rule.lockout as unknown as Record<string, unknown>;
    if (l === null || typeof l !== 'object') fail('ERR_LOCKOUT', 'lockout', 'an object with a duration', l);
    assertKnownFields(l, LOCKOUT_FIELDS, where, 'lockout');
    const escalate = l.escalate ?? RULE_DEFAULTS.lockoutEscalate;
    if (typeof escalate !== 'number' || !Number.isFinite(escalate) || escalate < 1) {
      fail('ERR_LOCKOUT', 'lockout.escalate', 'a number of at least 1', l.escalate);
    }
    lockout = {
      durationMs: duration('lockout.duration', l.duration),
      escalate: escalate as number,
      maxDurationMs: l.maxDuration === undefined ? 0 : duration('lockout.maxDuration', l.maxDuration),
      forgetAfterMs:
        l.forgetAfter === undefined
          ? RULE_DEFAULTS.lockoutForgetAfterMs
          : duration('lockout.forgetAfter', l.forgetAfter),
    };
  }

  let normalize: ((value: string) => string) | undefined;
  if (rule.normalize === true) normalize = normalizeIdentity;
  else if (typeof rule.normalize === 'function') normalize = rule.normalize;
  else if (rule.normalize !== undefined && rule.normalize !== false) {
    fail('ERR_OPTION', 'normalize', 'a boolean or a function', rule.normalize);
  }

  if (rule.key === undefined || rule.key === null) {
    throw new RateLimitConfigError('ERR_KEY', `${where}: key is required (one of ${KEY_FORMS})`);
  }
  let extract: Extractor;
  try {
    extract = createExtractor(rule.key, { ipv6Subnet: options.ipv6Subnet, normalize, rule: name });
  } catch (error) {
    return fail('ERR_KEY', 'key', `a known key form (${(error as Error).message})`, rule.key);
  }
  let matcher: Matcher | undefined;
  if (typeof rule.match === 'object') assertKnownFields(rule.match, MATCH_FIELDS, where, 'match');
  try {
    matcher = createMatcher(rule.match);
  } catch (error) {
    const explained = explainPathError((error as Error).message);
    if (explained !== undefined)
      fail('ERR_MATCH', 'match', `in path-to-regexp 8 syntax: ${explained}`, rule.match);
    return fail(
      'ERR_MATCH',
      'match',
      `'METHOD /path' or { method, path } in path-to-regexp syntax (${(error as Error).message})`,
      rule.match,
    );
  }

  return {
    name,
    index,
    matcher,
    extract,
    limit,
    cost,
    countOn,
    resetOnSuccess: rule.resetOnSuccess ?? RULE_DEFAULTS.resetOnSuccess,
    periods: window.periods,
    windowSeconds: window.windowSeconds,
    store: {
      name,
      type: window.type,
      sizeMs: window.sizeMs,
      buckets: window.buckets,
      burst: window.burst,
      lockout,
      dryRun: mode === 'dry-run',
    },
  };
}

/** A cost must be a non-negative safe integer. Throws a message naming the rule and the value. */
export function assertCost(cost: unknown, rule: string): asserts cost is number {
  if (typeof cost !== 'number' || !Number.isSafeInteger(cost) || cost < 0) {
    throw new RateLimitConfigError(
      'ERR_COST',
      `rule "${rule}": cost must be a non-negative integer, got ${describe(cost)}`,
    );
  }
}
