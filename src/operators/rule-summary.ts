// Plain-words descriptions of rules and durations, shared by the command line and the web console.
import { windowKind, windowTypeOf } from '../algorithms/index.js';
import { RULE_DEFAULTS } from '../defaults.js';
import { parseDuration } from '../rules/duration.js';
import type {
  LockoutSpec,
  MatchSpec,
  Rule,
  RuleStatus,
  SlotHolder,
  WindowFunction,
  WindowSpec,
} from '../types.js';

/** A rule as an operator reads it: every field a short string, none of them the request's data. */
export interface RuleSummary {
  name: string;
  /** e.g. `5 per 15m (sliding log)`, `10 per day (calendar, Asia/Shanghai)`. */
  limit: string;
  /** e.g. `POST /login`, or `every request`. */
  match: string;
  /** e.g. `15m, x2 each time up to 1d`, or `none`. */
  lockout: string;
  mode: 'enforce' | 'dry-run';
}

export function summarizeRule(rule: Rule): RuleSummary {
  return {
    name: rule.name,
    limit: `${typeof rule.limit === 'number' ? rule.limit : 'per request'} ${describeWindow(rule.window)}`,
    match: describeMatch(rule.match),
    lockout: describeLockout(rule.lockout),
    mode: rule.mode ?? 'enforce',
  };
}

export function describeWindow(window: WindowSpec | WindowFunction): string {
  if (typeof window === 'function') return 'per window chosen per request';
  const type = windowTypeOf(window.type);
  const title = type === undefined ? window.type : windowKind(type).title;
  if ('unit' in window || 'cron' in window) {
    const zone = window.timezone === undefined ? '' : `, ${window.timezone}`;
    return 'cron' in window ? `per cron '${window.cron}'${zone}` : `per ${window.unit} (${title}${zone})`;
  }
  // The one window with no size: bounded in time by its slots' lease.
  if (!('size' in window)) {
    const lease = formatDuration(parseDuration(window.lease ?? RULE_DEFAULTS.concurrencyLeaseMs) ?? 0);
    return `in flight at once (${title}, lease ${lease})`;
  }
  const size = formatDuration(parseDuration(window.size) ?? 0);
  const burst = 'burst' in window && window.burst !== undefined ? `, burst ${window.burst}` : '';
  return `per ${size} (${title}${burst})`;
}

export function describeMatch(match: string | MatchSpec | undefined): string {
  if (match === undefined) return 'every request';
  if (typeof match === 'string') return match;
  const list = (v: string | string[] | undefined, all: string) =>
    v === undefined ? all : Array.isArray(v) ? v.join('|') : v;
  return `${list(match.method, 'any method')} ${list(match.path, 'any path')}`;
}

export function describeLockout(lockout: LockoutSpec | undefined): string {
  if (lockout === undefined) return 'none';
  const first = formatDuration(parseDuration(lockout.duration) ?? 0);
  if (lockout.escalate === undefined || lockout.escalate === 1) return first;
  const cap =
    lockout.maxDuration === undefined
      ? ''
      : ` up to ${formatDuration(parseDuration(lockout.maxDuration) ?? 0)}`;
  return `${first}, x${lockout.escalate} each time${cap}`;
}

/** `2h 5m`, `14m 59s`, `3s`, `250ms`: the two largest units, for people rather than scripts. */
export function formatDuration(ms: number): string {
  if (ms < 1000) return `${Math.max(0, Math.round(ms))}ms`;
  let rest = Math.round(ms / 1000);
  const amounts: Array<[number, string]> = [];
  for (const [size, unit] of [
    [86_400, 'd'],
    [3600, 'h'],
    [60, 'm'],
    [1, 's'],
  ] as const) {
    amounts.push([Math.floor(rest / size), unit]);
    rest %= size;
  }
  const first = amounts.findIndex(([n]) => n > 0);
  return amounts
    .slice(first, first + 2)
    .filter(([n]) => n > 0)
    .map(([n, unit]) => `${n}${unit}`)
    .join(' ');
}

/** Holders' ages shown in full; past this many, the rest are counted. */
const HOLDERS_SHOWN = 10;

/**
 * A concurrency key's holders in words: how long each request has been in flight, oldest first
 * (`'none'` when none), the ones past the first 10 counted: `'12s, 5s, 300ms'`.
 */
export function describeHolders(holders: readonly SlotHolder[], count: number): string {
  if (holders.length === 0) return count > 0 ? `${count}, not listed` : 'none';
  const shown = holders.slice(0, HOLDERS_SHOWN).map((h) => formatDuration(h.ageMs));
  const more = count - shown.length;
  return `${shown.join(', ')}${more > 0 ? ` and ${more} more` : ''}`;
}

/** The in-flight line of a concurrency rule's status: `'2 of 5, 3 free'`. */
export function describeInFlight(s: RuleStatus): string {
  const limit = `${s.limit}${s.overridden ? ' (override for this key)' : ''}`;
  return `${s.count} of ${limit}, ${s.locked ? 'none admitted while locked' : `${s.remaining} free`}`;
}
