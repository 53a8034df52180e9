// Which limiter answers for each rule the command line is asked about, and what to close afterwards.
import type { Redis } from 'ioredis';
import { closestName } from '../../config/known-fields.js';
import type { Limiter } from '../../limiter/limiter.js';
import type { Store } from '../../stores/store.js';
import type { Rule } from '../../types.js';
import type { CliArgs } from './args.js';
import { connectRedis, OperatorError } from './connect.js';
import { connectPostgres } from './connect-postgres.js';
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
 * rule arrays are decided on a RedisStore at `--redis` under `--prefix`, or on a PostgresStore at
 * `--postgres` in `--schema` with `--table-prefix`. Rules a limiter already has are taken from the limiter.
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
  let pool: { end(): Promise<void> } | undefined;
  const close = async () => {
    await Promise.all(owned.map((l) => l.close()));
    redis?.disconnect();
    await pool?.end();
  };
  try {
    const module =
      args.rulesModule === undefined ? undefined : await loadRulesModule(args.rulesModule, cwd, args.typed);
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
    // Operator calls: no deny cache (no subscriber needed) and a patient timeout; they never use the
    // failure policy, so a store fault is reported, not papered over.
    const own = async (store: Store) => {
      // Loaded here: listing rules or looking at a module's own limiters needs none of it.
      const { createLimiter } = await import('../../limiter/limiter.js');
      const limiter = createLimiter({ store, rules, denyCache: false, storeTimeout: '5s' });
      owned.push(limiter);
      for (const name of limiter.ruleNames) byRule.set(name, limiter);
    };
    if (ownStore && args.postgres !== undefined) {
      const [{ PostgresStore }, { postgresNames }] = await Promise.all([
        import('../../stores/postgres/postgres-store.js'),
        import('../../stores/postgres/sql.js'),
      ]);
      const names = postgresNames(args.schema, args.tablePrefix);
      const connected = await connectPostgres(args.postgres, names);
      pool = connected;
      await own(new PostgresStore({ pool: connected, schema: args.schema, tablePrefix: args.tablePrefix }));
    } else {
      if (needs.redis || ownStore) redis = await connectRedis(args.redis);
      if (ownStore && redis !== undefined) {
        const { RedisStore } = await import('../../stores/redis/redis-store.js');
        await own(new RedisStore({ client: redis, prefix: args.prefix }));
      }
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
  const close = closestName(rule, known);
  const guess = close === undefined ? '' : `, did you mean '${close}'?`;
  return new OperatorError(`unknown rule '${rule}'${guess}; the rules are ${known.join(', ')}`);
}
