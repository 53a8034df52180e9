// Which limiter answers for each rule the command line is asked about, and what to close afterwards.
import type { Redis } from 'ioredis';
import type { Limiter } from '../../limiter/limiter.js';
import type { Rule } from '../../types.js';
import type { CliArgs } from './args.js';
import { connectRedis, OperatorError } from './connect.js';
import { loadRulesModule } from './rules-module.js';

export interface Targets {
  /** Every rule name the module brought: its limiters' first, then its rule arrays'. */
  readonly names: readonly string[];
  /** The limiter that answers for each rule name (none for rule arrays when no store was asked for). */
  readonly byRule: ReadonlyMap<string, Limiter>;
  /** The rule definitions where the module gave them (rule arrays, or limiters that expose theirs). */
  readonly definitions: ReadonlyMap<string, Rule>;
  /** The command line's own connection (for `watch`), when one was opened. */
  readonly redis: Redis | undefined;
  /** The limiter for a rule, or an `OperatorError` listing the rules there are. */
  limiterFor(rule: string): Limiter;
  close(): Promise<void>;
}

/**
 * Loads `--rules` and connects: limiters the module exports are used as they are (their own stores);
 * rule arrays are decided on a RedisStore at `--redis` under `--prefix`. Rules a limiter already
 * has are taken from the limiter.
 */
export async function openTargets(
  args: CliArgs,
  cwd: string,
  needs: { redis: boolean; store: boolean; rule: string | undefined },
): Promise<Targets> {
  const byRule = new Map<string, Limiter>();
  const definitions = new Map<string, Rule>();
  const owned: Limiter[] = [];
  let redis: Redis | undefined;
  const close = async () => {
    await Promise.all(owned.map((l) => l.close()));
    redis?.disconnect();
  };
  try {
    const module = args.rulesModule === undefined ? undefined : await loadRulesModule(args.rulesModule, cwd);
    for (const { from, limiter } of module?.limiters ?? []) {
      for (const name of limiter.ruleNames) {
        if (byRule.has(name))
          throw new OperatorError(`rule '${name}' is in two limiters (the second is ${from})`);
        byRule.set(name, limiter);
      }
      // A limiter from an older ratekeeper has no `rules`: its rules are listed by name only.
      for (const rule of (limiter.rules as readonly Rule[] | undefined) ?? [])
        definitions.set(rule.name, rule);
    }
    const rules: Rule[] = [];
    for (const set of module?.ruleSets ?? []) {
      for (const rule of set.rules) {
        if (byRule.has(rule.name)) continue;
        if (definitions.has(rule.name)) {
          throw new OperatorError(`rule '${rule.name}' is defined twice (again in the export ${set.from})`);
        }
        definitions.set(rule.name, rule);
        rules.push(rule);
      }
    }
    // A mistyped rule is answered before anything connects.
    if (needs.rule !== undefined && !byRule.has(needs.rule) && !definitions.has(needs.rule)) {
      throw unknownRule(needs.rule, namesOf(byRule, definitions));
    }
    const ownStore = needs.store && rules.length > 0;
    if (needs.redis || ownStore) redis = await connectRedis(args.redis);
    if (ownStore && redis !== undefined) {
      // Loaded here: listing rules or looking at a module's own limiters needs neither.
      const [{ createLimiter }, { RedisStore }] = await Promise.all([
        import('../../limiter/limiter.js'),
        import('../../stores/redis-store.js'),
      ]);
      // Operator calls: no deny cache (no subscriber needed) and a patient timeout; they never use the
      // failure policy, so a Redis fault is reported, not papered over.
      const store = new RedisStore({ client: redis, prefix: args.prefix });
      const limiter = createLimiter({ store, rules, denyCache: false, storeTimeout: '5s' });
      owned.push(limiter);
      for (const name of limiter.ruleNames) byRule.set(name, limiter);
    }
  } catch (error) {
    await close();
    throw error;
  }
  return {
    names: namesOf(byRule, definitions),
    byRule,
    definitions,
    redis,
    close,
    limiterFor(rule) {
      const limiter = byRule.get(rule);
      if (limiter !== undefined) return limiter;
      throw unknownRule(rule, namesOf(byRule, definitions));
    },
  };
}

function namesOf(byRule: Map<string, unknown>, definitions: Map<string, unknown>): string[] {
  return [...new Set([...byRule.keys(), ...definitions.keys()])];
}

function unknownRule(rule: string, known: string[]): OperatorError {
  if (known.length === 0) {
    return new OperatorError(
      `no rules loaded: give --rules <module> (the app's module exporting its rules or limiter) or set RATEKEEPER_RULES`,
    );
  }
  return new OperatorError(`unknown rule '${rule}'; the rules are ${known.join(', ')}`);
}
