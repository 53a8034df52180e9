// Rule validation and normalization: bad rules are refused here, and the defaults of defaults.ts filled in.

import type { StoreLockout, StoreRule } from './algorithms/types.js';
import { assertCron, CALENDAR_UNITS, createPeriodFn, isValidTimeZone, type PeriodFn } from './calendar.js';
import { RULE_DEFAULTS } from './defaults.js';
import { parseDuration } from './duration.js';
import { type ConfigErrorCode, describe, RateLimitConfigError } from './errors.js';
import { createExtractor, type Extractor, normalizeIdentity } from './keys.js';
import { createMatcher, type Matcher } from './match.js';
import type { RequestInfo, Rule, WindowType } from './types.js';

/** A validated rule, ready for the hot path. */
export interface CompiledRule {
  readonly name: string;
  readonly index: number;
  readonly matcher: Matcher | undefined;
  readonly extract: Extractor;
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

/** Nominal length of calendar units, for the `w` of `RateLimit-Policy` (a month as 30 days). */
const UNIT_SECONDS: Record<string, number> = {
  minute: 60,
  hour: 3600,
  day: 86400,
  week: 604800,
  month: 2592000,
};

const WINDOW_TYPES = ['fixed', 'calendar', 'sliding-log', 'sliding', 'token-bucket', 'gcra', 'leaky-bucket'];

export interface CompileOptions {
  ipv6Subnet: number;
}

/** Validates and compiles a rule set. Throws `RateLimitConfigError` naming the rule, field and value. */
export function compileRules(rules: unknown, options: CompileOptions): CompiledRule[] {
  if (!Array.isArray(rules)) {
    throw new RateLimitConfigError(
      'ERR_RULES',
      `rules must be an array of rule objects, got ${describe(rules)}`,
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
  if (typeof name !== 'string' || !/^[\w.\-~]{1,64}$/.test(name)) {
    throw new RateLimitConfigError(
      'ERR_RULE_NAME',
      `rules[${index}]: name must be 1-64 characters of letters, digits, '_', '-', '.', '~', got ${describe(name)}`,
    );
  }
  const fail = (code: ConfigErrorCode, field: string, allowed: string, value: unknown): never => {
    throw new RateLimitConfigError(
      code,
      `rule "${name}": ${field} must be ${allowed}, got ${describe(value)}`,
    );
  };

  if (!Number.isSafeInteger(rule.limit) || rule.limit < 1)
    fail('ERR_LIMIT', 'limit', 'a positive integer', rule.limit);

  const window = rule.window as unknown as Record<string, unknown> | undefined;
  if (window === null || typeof window !== 'object')
    fail('ERR_WINDOW', 'window', 'an object with a type', window);
  const w = window as Record<string, unknown>;
  if (typeof w.type !== 'string' || !WINDOW_TYPES.includes(w.type)) {
    fail('ERR_WINDOW', 'window.type', `one of ${WINDOW_TYPES.map((t) => `'${t}'`).join(', ')}`, w.type);
  }
  const type = (w.type === 'leaky-bucket' ? 'gcra' : w.type) as WindowType;
  const duration = (field: string, value: unknown): number =>
    parseDuration(value as string | number) ??
    fail('ERR_DURATION', field, `a duration such as '1d' or 86400000`, value);

  let sizeMs = 0;
  let buckets = 0;
  let burst = 0;
  let periods: PeriodFn | undefined;
  if (type === 'calendar') {
    const zone = w.timezone ?? RULE_DEFAULTS.timezone;
    if (typeof zone !== 'string' || !isValidTimeZone(zone)) {
      fail('ERR_TIMEZONE', 'window.timezone', `an IANA time zone such as 'Asia/Shanghai'`, zone);
    }
    if (w.cron !== undefined) {
      if (typeof w.cron !== 'string')
        fail('ERR_CRON', 'window.cron', 'a cron expression such as "0 0 * * *"', w.cron);
      try {
        assertCron(w.cron as string, zone as string);
      } catch (error) {
        fail(
          'ERR_CRON',
          'window.cron',
          `a cron expression such as "0 0 * * *" (${(error as Error).message})`,
          w.cron,
        );
      }
      periods = createPeriodFn({ cron: w.cron as string }, zone as string);
    } else {
      if (!CALENDAR_UNITS.includes(w.unit as never)) {
        fail(
          'ERR_WINDOW',
          'window.unit',
          `one of ${CALENDAR_UNITS.map((u) => `'${u}'`).join(', ')} (or give window.cron)`,
          w.unit,
        );
      }
      periods = createPeriodFn({ unit: w.unit as never }, zone as string);
    }
  } else {
    sizeMs = duration('window.size', w.size);
  }
  if (type === 'sliding') {
    buckets = (w.buckets as number | undefined) ?? RULE_DEFAULTS.slidingBuckets;
    if (!Number.isSafeInteger(buckets) || buckets < 1 || buckets > 1000) {
      fail('ERR_WINDOW', 'window.buckets', 'an integer from 1 to 1000', w.buckets);
    }
  }
  if (type === 'token-bucket' || type === 'gcra') {
    burst = (w.burst as number | undefined) ?? rule.limit;
    if (!Number.isSafeInteger(burst) || burst < 1)
      fail('ERR_WINDOW', 'window.burst', 'a positive integer', w.burst);
    // Bucket state is exact integer arithmetic in units of 1/limit µs; keep it below 2^53.
    if (Math.max(burst, rule.limit) * sizeMs * 1000 > Number.MAX_SAFE_INTEGER) {
      fail(
        'ERR_WINDOW',
        'window.size',
        `small enough that max(limit, burst) × size in µs stays below 2^53`,
        w.size,
      );
    }
  }

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

  let extract: Extractor;
  try {
    extract = createExtractor(rule.key, { ipv6Subnet: options.ipv6Subnet, normalize, rule: name });
  } catch (error) {
    return fail('ERR_KEY', 'key', `a known key form (${(error as Error).message})`, rule.key);
  }
  let matcher: Matcher | undefined;
  try {
    matcher = createMatcher(rule.match);
  } catch (error) {
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
    cost,
    countOn,
    resetOnSuccess: rule.resetOnSuccess ?? RULE_DEFAULTS.resetOnSuccess,
    periods,
    windowSeconds: sizeMs > 0 ? Math.max(1, Math.ceil(sizeMs / 1000)) : (UNIT_SECONDS[w.unit as string] ?? 0),
    store: { name, type, limit: rule.limit, sizeMs, buckets, burst, lockout, dryRun: mode === 'dry-run' },
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
