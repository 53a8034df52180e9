// The command line of `npx ratekeeper`: commands, options, usage text; wrong usage is refused before anything connects.
import { parseArgs } from 'node:util';
import { closestName } from '../../config/known-fields.js';
import {
  LIMITER_DEFAULTS,
  OPERATOR_DEFAULTS,
  POSTGRES_STORE_DEFAULTS,
  REDIS_STORE_DEFAULTS,
} from '../../defaults.js';
import { parseDuration, parsePeriod, periodAllowed } from '../../rules/duration.js';
import { readVisibleKey } from '../visible-key.js';

export const USAGE = `Usage: ratekeeper <command> [arguments] [options]

Commands:
  status <rule> <key>                 count, remaining, lock, level and limit of one key
  locked <rule>                       keys locked now, soonest unlock first (--limit, default 100)
  unlock <rule> <key>...              clear count, lock and level (every process forgets the key)
  unlock <rule> --all                 unlock every key of the rule that is locked now
  override <rule> <key> <limit|null>  set the key's limit in every process (null clears it); --for <d>;
                                      --window <d>: the key's window too (with null: the window alone)
  limit <rule> <n>                    set the limit of every key of the rule (keys with an override keep
                                      theirs) in every process; --for <d>
  limit <rule> --clear                the rule's configured limit again
  limit <rule>                        the rule-wide limit in force, if any, and until when
  rules                               the rules loaded, with their windows and limits
  watch [rule...]                     live decisions per rule, from apps that publish them
                                      (publishDecisionCounts); Ctrl-C to stop
  sql                                 the SQL of the PostgresStore's schema (tables and functions), for
                                      teams that apply migrations themselves (--schema, --table-prefix)

Options:
  --redis <url>      Redis URL (redis://[user:password@]host:port[/db], rediss:// for TLS); default $REDIS_URL
  --prefix <p>       key prefix the app's RedisStore uses; default $RATEKEEPER_PREFIX, else rk
  --postgres <url>   PostgreSQL URL of the app's PostgresStore instead of Redis
                     (postgres://[user[:password]@]host[:port]/database); default $RATEKEEPER_POSTGRES_URL
  --rules <module>   the app's module (ESM or CommonJS) exporting \`rules\`, a default rule array, or
                     limiters; default $RATEKEEPER_RULES
  --json             machine-readable output (watch: one JSON object per line)
  --escaped          status, unlock, override: keys are typed as the views show them (\\u200b for an
                     invisible character, \\\\ for a backslash), and mean the exact key shown
  --limit <n>        locked: how many keys to list (1-10000); default 100
  --for <d>          override, limit: it expires after this long (e.g. 1h, 7d); default: until cleared
  --clear            limit: back to the rule's configured limit
  --interval <d>     watch: refresh interval; default 1s
  --window <d>       watch: the span totals and rates cover; default 10s. override: the key's window
                     size from its next window on (fixed and GCRA rules)
  --once             watch: print one view and exit
  --schema <s>       the PostgresStore's schema option (sql, --postgres); default ratekeeper
  --table-prefix <p> the PostgresStore's tablePrefix option (sql, --postgres); default rk_
  -h, --help         this text
  -v, --version      the package version
`;

export type Command = 'status' | 'locked' | 'unlock' | 'override' | 'limit' | 'rules' | 'watch' | 'sql';

export interface CliArgs {
  command: Command | 'help' | 'version';
  positionals: string[];
  /** The arguments as typed, for messages that show the command to run again. */
  typed: readonly string[];
  redis: string | undefined;
  /** The PostgreSQL URL when the rules are decided on a PostgresStore (then `redis` is undefined). */
  postgres: string | undefined;
  /** The RedisStore's key prefix: `--prefix`, else $RATEKEEPER_PREFIX, else the store's default. */
  prefix: string;
  rulesModule: string | undefined;
  json: boolean;
  limit: number;
  all: boolean;
  /** limit: `--clear`. */
  clear: boolean;
  /** override, limit: `--for` in ms. */
  forMs: number | undefined;
  /** override: `--window` in ms, the key's window size. */
  overrideWindowMs: number | undefined;
  intervalMs: number;
  windowMs: number;
  once: boolean;
  /** sql and --postgres: the PostgresStore's schema and table prefix. */
  schema: string;
  tablePrefix: string;
}

/** Wrong usage: printed with a pointer to --help, exit status 2. */
export class UsageError extends Error {
  override readonly name = 'UsageError';
}

const ARITY: Record<Command, [min: number, max: number, form: string]> = {
  status: [2, 2, 'status <rule> <key>'],
  locked: [1, 1, 'locked <rule>'],
  unlock: [1, Number.POSITIVE_INFINITY, 'unlock <rule> <key>... | unlock <rule> --all'],
  override: [3, 3, 'override <rule> <key> <limit|null>'],
  limit: [1, 2, 'limit <rule> [<n>] [--for <d>] | limit <rule> --clear'],
  rules: [0, 0, 'rules'],
  watch: [0, Number.POSITIVE_INFINITY, 'watch [rule...]'],
  sql: [0, 0, 'sql'],
};

/** Parses argv (without node and the script); throws `UsageError` naming what was wrong. */
export function parseCli(argv: string[], env: NodeJS.ProcessEnv): CliArgs {
  let parsed: ReturnType<typeof parse>;
  try {
    parsed = parse(argv);
  } catch (error) {
    throw new UsageError(explainParseError(error as Error & { code?: string }));
  }
  const { values: v, positionals } = parsed;
  const [first, ...rest] = positionals;
  const command = v.help ? 'help' : v.version ? 'version' : first;
  if (command === undefined) throw new UsageError('no command given');
  const store = chooseStore(v, env, command);
  // The variable is the Redis store's: on PostgreSQL it is not read, so one shell can serve both stores.
  const envPrefix = store.postgres === undefined ? env.RATEKEEPER_PREFIX || undefined : undefined;
  const base = {
    ...store,
    typed: argv,
    prefix: v.prefix ?? envPrefix ?? REDIS_STORE_DEFAULTS.prefix,
    rulesModule: v.rules ?? (env.RATEKEEPER_RULES || undefined),
    json: v.json ?? false,
    all: v.all ?? false,
    clear: v.clear ?? false,
    once: v.once ?? false,
    limit: v.limit === undefined ? LIMITER_DEFAULTS.lockedListLimit : integer('--limit', v.limit, 1, 10_000),
    intervalMs:
      v.interval === undefined ? OPERATOR_DEFAULTS.watchIntervalMs : duration('--interval', v.interval),
    windowMs: v.window === undefined ? OPERATOR_DEFAULTS.watchWindowMs : duration('--window', v.window),
    forMs: v.for === undefined ? undefined : period('--for', v.for),
    overrideWindowMs:
      v.window === undefined || first !== 'override' ? undefined : period('--window', v.window),
    schema: v.schema ?? POSTGRES_STORE_DEFAULTS.schema,
    tablePrefix: v['table-prefix'] ?? POSTGRES_STORE_DEFAULTS.tablePrefix,
  };
  if (command === 'help' || command === 'version') return { command, positionals: [], ...base };
  if (!(command in ARITY)) throw new UsageError(`unknown command '${command}'`);
  const [min, max, form] = ARITY[command as Command];
  const allForm = command === 'unlock' && base.all;
  if (allForm ? rest.length !== 1 : rest.length < min || rest.length > max) {
    throw new UsageError(`${command} takes ${form}, got ${rest.length} argument(s)`);
  }
  if (command === 'override') {
    const limit = rest[2] as string;
    if (limit !== 'null' && !/^[1-9]\d{0,14}$/.test(limit)) {
      throw new UsageError(
        `override: the limit must be a positive integer, or null to clear it, got '${limit}'`,
      );
    }
  } else if (command === 'limit') {
    const limit = rest[1];
    if (limit !== undefined && !/^[1-9]\d{0,14}$/.test(limit)) {
      throw new UsageError(`limit: the limit must be a positive integer, got '${limit}' (--clear clears it)`);
    }
    if (base.clear && (limit !== undefined || base.forMs !== undefined))
      throw new UsageError('limit --clear takes the rule only');
    if (limit === undefined && base.forMs !== undefined)
      throw new UsageError('limit: --for goes with a limit to set');
  } else if (base.forMs !== undefined) {
    throw new UsageError('--for goes with override and limit only');
  }
  if (base.clear && command !== 'limit') throw new UsageError('--clear goes with limit only');
  if (base.postgres !== undefined && v.prefix !== undefined) {
    throw new UsageError("--prefix is the RedisStore's; on PostgreSQL give --schema and --table-prefix");
  }
  const named = v.schema !== undefined ? '--schema' : v['table-prefix'] !== undefined ? '--table-prefix' : '';
  if (named !== '' && base.postgres === undefined && command !== 'sql') {
    throw new UsageError(`${named} goes with --postgres (or the sql command)`);
  }
  if (base.prefix === '' || /[{}]/.test(base.prefix)) {
    const from = v.prefix === undefined ? 'RATEKEEPER_PREFIX' : '--prefix';
    throw new UsageError(`${from} must be non-empty and without '{' or '}', got '${base.prefix}'`);
  }
  if (v.escaped) {
    if (command !== 'status' && command !== 'unlock' && command !== 'override')
      throw new UsageError('--escaped goes with status, unlock and override only');
    const keys = command === 'override' ? [1] : rest.map((_, i) => i).slice(1);
    for (const i of keys) {
      try {
        rest[i] = readVisibleKey(rest[i] as string);
      } catch (error) {
        throw new UsageError(`--escaped: ${(error as Error).message}`);
      }
    }
  }
  return { command: command as Command, positionals: rest, ...base };
}

/**
 * The store the rules are decided on: `--postgres` or `--redis` as given (not both), else the one whose
 * variable is set ($RATEKEEPER_POSTGRES_URL or $REDIS_URL); both set and neither given is ambiguous.
 * `watch` reads the decision feed on Redis, so it takes no PostgreSQL.
 */
function chooseStore(
  v: ReturnType<typeof parse>['values'],
  env: NodeJS.ProcessEnv,
  command: string,
): { redis: string | undefined; postgres: string | undefined } {
  if (v.redis !== undefined && v.postgres !== undefined) {
    throw new UsageError('--redis and --postgres: give one, the store the app decides its rules on');
  }
  if (command === 'watch') {
    if (v.postgres !== undefined) {
      throw new UsageError(
        'watch reads the decision counts apps publish on Redis (publishDecisionCounts): give --redis',
      );
    }
    return { redis: v.redis ?? (env.REDIS_URL || undefined), postgres: undefined };
  }
  if (v.postgres !== undefined) return { redis: undefined, postgres: v.postgres };
  if (v.redis !== undefined) return { redis: v.redis, postgres: undefined };
  const redis = env.REDIS_URL || undefined;
  const postgres = env.RATEKEEPER_POSTGRES_URL || undefined;
  if (redis !== undefined && postgres !== undefined && command in STORE_COMMANDS) {
    throw new UsageError(
      'both REDIS_URL and RATEKEEPER_POSTGRES_URL are set: give --redis or --postgres to say which store',
    );
  }
  return postgres !== undefined ? { redis: undefined, postgres } : { redis, postgres: undefined };
}

/** The commands that act on the store. */
const STORE_COMMANDS = { status: true, locked: true, unlock: true, override: true, limit: true };

const OPTIONS = {
  redis: { type: 'string' },
  postgres: { type: 'string' },
  prefix: { type: 'string' },
  rules: { type: 'string' },
  json: { type: 'boolean' },
  escaped: { type: 'boolean' },
  limit: { type: 'string' },
  all: { type: 'boolean' },
  clear: { type: 'boolean' },
  interval: { type: 'string' },
  window: { type: 'string' },
  once: { type: 'boolean' },
  for: { type: 'string' },
  schema: { type: 'string' },
  'table-prefix': { type: 'string' },
  help: { type: 'boolean', short: 'h' },
  version: { type: 'boolean', short: 'v' },
} as const;

function parse(argv: string[]) {
  return parseArgs({ args: argv, allowPositionals: true, strict: true, options: OPTIONS });
}

/** parseArgs's message, shorter, with the option a typo meant. */
function explainParseError(error: Error & { code?: string }): string {
  const unknown = /Unknown option '(-{1,2})([^']*)'/.exec(error.message);
  if (error.code !== 'ERR_PARSE_ARGS_UNKNOWN_OPTION' || unknown === null) return error.message;
  const close = closestName(unknown[2] ?? '', Object.keys(OPTIONS));
  const hint = close === undefined ? '' : `, did you mean --${close}?`;
  return `unknown option '${unknown[1]}${unknown[2]}'${hint} (a key starting with '-' goes after '--')`;
}

function integer(name: string, text: string, min: number, max: number): number {
  const value = Number(text);
  if (!/^\d+$/.test(text) || value < min || value > max) {
    throw new UsageError(`${name} must be an integer from ${min} to ${max}, got '${text}'`);
  }
  return value;
}

function duration(name: string, text: string): number {
  const ms = parseDuration(text);
  if (ms === undefined)
    throw new UsageError(`${name} must be a duration such as 30s, 15m or 1d, got '${text}'`);
  return ms;
}

/** An override's life: as the library's `for`, a bare number below 1000 is refused. */
function period(name: string, text: string): number {
  const ms = parsePeriod(text);
  if (ms !== undefined) return ms;
  if (parseDuration(text) === undefined) return duration(name, text);
  throw new UsageError(`${name} must be ${periodAllowed(text, '1d')}, got '${text}'`);
}
