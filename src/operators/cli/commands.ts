// The operator commands that act on one rule: status, locked, unlock, override, limit, and the list of rules.
import type { Limiter } from '../../limiter/limiter.js';
import { DIRECT_REQUEST } from '../../rules/rule-index.js';
import type { RuleStatus, WindowSpec } from '../../types.js';
import { describeHolders, describeInFlight, formatDuration, summarizeRule } from '../rule-summary.js';
import { hasHiddenCharacters } from '../visible-key.js';
import { type CliArgs, UsageError } from './args.js';
import { type Output, printable, table } from './output.js';
import type { Targets } from './targets.js';

export async function status(targets: Targets, args: CliArgs, out: Output): Promise<void> {
  const [rule, key] = args.positionals as [string, string];
  const limiter = targets.limiterFor(rule);
  const [s, health] = await Promise.all([limiter.status(rule, key), limiter.health()]);
  if (out.json) return out.value({ ...s, store: health });
  out.line(`${printable(s.rule)}  ${printable(s.key)}`);
  if (s.holders !== undefined) {
    // A concurrency rule: requests in flight, freed when they end (nothing resets with time).
    out.line(`  in flight ${describeInFlight(s)}`);
    out.line(`  held for  ${describeHolders(s.holders, s.count)}`);
  } else {
    printCount(s, out);
  }
  out.line(
    `  locked   ${s.locked ? `yes, ${formatDuration(s.lockRemainingMs)} left` : 'no'}, level ${s.level}`,
  );
  const since = new Date(health.sinceMs).toISOString();
  const last = health.lastError === undefined ? '' : `; last error: ${health.lastError.message}`;
  out.line(`  store    ${health.state} since ${since}${last}`);
}

function printCount(s: RuleStatus, out: Output): void {
  const window = s.windowMs === undefined ? '' : `, window ${formatDuration(s.windowMs)}`;
  const limit = `${s.limit}${s.overridden ? ` (override for this key${window})` : ''}`;
  // While locked nothing is counted and nothing admitted: the count is not why none remains.
  const remaining = s.locked
    ? 'none admitted while locked; counting starts again from 0 when the lock ends'
    : `${s.remaining} remaining${resetText(s)}`;
  out.line(`  count    ${s.count} of ${limit}, ${remaining}`);
}

function resetText(s: RuleStatus): string {
  return s.count > 0 && s.resetMs > 0 ? `, back to full in ${formatDuration(s.resetMs)}` : '';
}

export async function locked(targets: Targets, args: CliArgs, out: Output): Promise<void> {
  const [rule] = args.positionals as [string];
  const list = await targets.limiterFor(rule).locked(rule, { limit: args.limit });
  if (out.json) return out.value(list);
  if (list.length === 0) return out.line(`no key of '${printable(rule)}' is locked`);
  const rows = list.map((l) => [
    formatDuration(l.remainingMs),
    new Date(l.lockedUntil).toISOString(),
    String(l.level),
    printable(l.key),
  ]);
  for (const line of table(['unlocks in', 'at', 'level', 'key'], rows)) out.line(line);
  if (list.length === args.limit) out.line(`(first ${args.limit}; --limit shows more)`);
  if (list.some((l) => hasHiddenCharacters(l.key)))
    out.line('(a \\ in a key starts an escape: give such keys as shown, with --escaped)');
}

/**
 * Unlocks through `reset`: count, lock and level are cleared in the store, and every process's deny
 * cache forgets the key (the store's reset announcement), so the key is admitted at once everywhere.
 */
export async function unlock(targets: Targets, args: CliArgs, out: Output): Promise<void> {
  const [rule, ...given] = args.positionals as [string, ...string[]];
  const limiter = targets.limiterFor(rule);
  const keys = args.all ? (await limiter.locked(rule, { limit: 10_000 })).map((l) => l.key) : given;
  const results: Array<{ rule: string; key: string; wasLocked: boolean }> = [];
  for (const key of keys) results.push({ rule, key, wasLocked: await resetKey(limiter, rule, key) });
  if (out.json) return out.value(results);
  if (results.length === 0) out.line(`no key of '${printable(rule)}' is locked`);
  for (const r of results) {
    out.line(
      `${r.wasLocked ? 'unlocked' : 'reset (was not locked)'}  ${printable(rule)}  ${printable(r.key)}`,
    );
  }
}

/**
 * Sets (or with `null` clears) the limit of one key of one rule, through `limiter.override`: every
 * process sharing the store uses it from its next decision; `--for` makes it expire.
 */
export async function override(targets: Targets, args: CliArgs, out: Output): Promise<void> {
  const [rule, key, text] = args.positionals as [string, string, string];
  const limit = text === 'null' ? null : Number(text);
  const limiter = targets.limiterFor(rule);
  const windowMs = args.overrideWindowMs;
  const value =
    windowMs === undefined ? limit : { limit: limit ?? undefined, window: windowOf(targets, rule, windowMs) };
  await limiter.override(rule, key, value, args.forMs === undefined ? undefined : { for: args.forMs });
  const s = await limiter.status(rule, key);
  if (out.json)
    return out.value({
      rule,
      key,
      override: limit,
      windowMs: windowMs ?? null,
      forMs: args.forMs ?? null,
      status: s,
    });
  const life = args.forMs === undefined ? ' until cleared' : ` for ${formatDuration(args.forMs)}`;
  const window =
    windowMs === undefined ? '' : `window ${formatDuration(windowMs)} from the key's next window, `;
  const what =
    limit === null && windowMs === undefined
      ? `override cleared; the rule's limit ${s.limit} applies`
      : `${window}limit ${limit ?? `${s.limit} (the rule's)`}${life}`;
  out.line(`${what}  ${printable(rule)}  ${printable(key)}`);
  out.line(`  count    ${s.count} of ${s.limit}, ${s.remaining} remaining`);
}

/** `--window`'s size as a window of the rule's type (its definition's, or its window function's for direct calls). */
function windowOf(targets: Targets, rule: string, sizeMs: number): WindowSpec {
  const definition = targets.definitions.get(rule);
  if (definition === undefined)
    throw new UsageError(
      `override --window: the rules module does not show rule '${rule}' (its type is needed)`,
    );
  const window =
    typeof definition.window === 'function' ? definition.window(DIRECT_REQUEST) : definition.window;
  return { type: window.type, size: sizeMs } as WindowSpec;
}

/**
 * Sets the limit of every key of one rule through `limiter.setLimit` (`--clear`: the configured limit
 * again; no limit: shows the one in force), read by every process sharing the store at its next decision;
 * `--for` makes it expire, on the store's clock, whether this command's process still runs or not.
 */
export async function limit(targets: Targets, args: CliArgs, out: Output): Promise<void> {
  const [rule, text] = args.positionals as [string, string | undefined];
  const limiter = targets.limiterFor(rule);
  if (args.clear) await limiter.setLimit(rule, null);
  else if (text !== undefined)
    await limiter.setLimit(rule, Number(text), args.forMs === undefined ? undefined : { for: args.forMs });
  const inForce = (await limiter.limits()).find((l) => l.rule === rule);
  if (out.json) return out.value({ rule, limit: inForce ?? null });
  if (inForce === undefined) {
    out.line(`no rule-wide limit: the rule's configured limit applies  ${printable(rule)}`);
    return;
  }
  const until =
    inForce.untilMs === undefined ? 'until cleared' : `until ${new Date(inForce.untilMs).toISOString()}`;
  out.line(`limit ${inForce.limit} for every key ${until}  ${printable(rule)}`);
}

/** Resets one key; true when it was locked (read from the limiter's own 'unlock' event). */
async function resetKey(limiter: Limiter, rule: string, key: string): Promise<boolean> {
  let wasLocked = false;
  const onUnlock = (event: { rule: string; key: string }) => {
    if (event.rule === rule && event.key === key) wasLocked = true;
  };
  limiter.on('unlock', onUnlock);
  try {
    await limiter.reset(rule, key);
  } finally {
    limiter.off('unlock', onUnlock);
  }
  return wasLocked;
}

export async function rules(targets: Targets, _args: CliArgs, out: Output): Promise<void> {
  const summaries = targets.names.map((name) => {
    const definition = targets.definitions.get(name);
    return definition === undefined ? { name } : summarizeRule(definition);
  });
  if (out.json) return out.value(summaries);
  const rows = summaries.map((s) =>
    'limit' in s ? [s.name, s.limit, s.lockout, s.mode, s.match] : [s.name, '(not exposed)', '', '', ''],
  );
  for (const line of table(['rule', 'limit', 'lockout', 'mode', 'match'], rows)) out.line(line);
}
