// The Lua scripts of the Redis store: the lua/ modules (embedded in the build) assembled into one Redis function
// library (FCALL), and into scripts run by SHA (EVALSHA) where a server has no functions.
import { sha1 as sha1Of } from '@noble/hashes/legacy';
import { bytesToHex } from '@noble/hashes/utils';
import { FUNCTION_CONFLICT_WARNING, warnOnce } from '../../warnings.js';
import type { RedisConnection } from './connection/connection.js';
import { FunctionConflict, loadLibrary, NO_FUNCTIONS, type RedisLibrary } from './function-library.js';
import { LUA_TEXTS } from './lua-texts.js';

/**
 * A script ready to run: as a function of the store's library (FCALL `fn`), or, where the server has
 * no functions (Redis < 7, FUNCTION refused by ACL or renamed away), as a script of its own: `source`,
 * run by its SHA1.
 */
export interface RedisScript {
  readonly name: string;
  readonly source: string;
  readonly sha: string;
  /** Its function's name in `library`. */
  readonly fn: string;
  readonly library: RedisLibrary;
}

export interface RedisScripts {
  readonly check: RedisScript;
  /**
   * lua/check.lua for requests of several slots served by one Cluster master: Redis 7's
   * allow-cross-slot-keys flag lets a script reach keys it did not declare, in any slot of its node.
   * One key is declared (it routes the call); the keys are ARGV[2..k+1] after k = ARGV[1].
   */
  readonly checkCrossSlot: RedisScript;
  readonly refund: RedisScript;
  readonly renew: RedisScript;
  readonly reset: RedisScript;
  readonly override: RedisScript;
}

/** The text of the Lua module `name` (lua/<name>.lua, embedded at build time by `npm run embed`). */
function luaModule(name: string): string {
  const text = LUA_TEXTS[name];
  if (text === undefined) throw new Error(`ratekeeper: no Lua module named '${name}' (lua/${name}.lua)`);
  return text;
}

/**
 * The module loader and the modules `main` requires (and those they require, named as literals).
 * Every lua/ file is a module: its body runs on its first `require(name)`, and what it returns is what
 * `require` gives. Each module has a scope of its own, so its helpers keep the names of their
 * TypeScript twins. In a function library the modules are built once, by the first call that needs
 * them, and kept for the next calls; a script builds them again on every call.
 */
function assembleModules(main: string): string {
  const sources = new Map<string, string>();
  const add = (code: string) => {
    for (const [, name] of code.matchAll(/require\('([\w-]+)'\)/g)) {
      if (name === undefined || sources.has(name)) continue;
      const source = luaModule(name);
      sources.set(name, source);
      add(source);
    }
  };
  add(main);
  const names = [...sources.keys()].sort();
  // Both tables are built by one constructor each, sized once: a script builds them on every call, and
  // filling empty tables key by key would grow (rehash) them several times.
  const modules = names.map((name) => `['${name}'] = function()\n${sources.get(name)}\nend,`);
  const unloaded = names.map((name) => `['${name}'] = false,`);
  return [
    `local LOADED, MODULES = { ${unloaded.join(' ')} }, nil`,
    'local function require(name)',
    '  local exports = LOADED[name]',
    '  if not exports then',
    '    exports = MODULES[name]()',
    '    LOADED[name] = exports',
    '  end',
    '  return exports',
    'end',
    // After require, so that the modules see it.
    'MODULES = {',
    ...modules,
    '}',
  ].join('\n');
}

/** A script: the modules, then `main`, the body that reads KEYS and ARGV (run by EVAL/EVALSHA). */
export function assembleScript(main: string): string {
  return [
    // Redis < 5 refuses writes after TIME unless effects are replicated; 5+ does so by default.
    'if redis.replicate_commands then redis.replicate_commands() end',
    assembleModules(main),
    main,
  ].join('\n');
}

function sha1(text: string): string {
  return bytesToHex(sha1Of(new TextEncoder().encode(text)));
}

/** How each script's function calls its driver: `call` reads KEYS and ARGV. */
interface Driver {
  readonly name: string;
  readonly call: string;
  readonly flags?: string;
}

const DRIVERS: readonly Driver[] = [
  { name: 'check', call: "require('check')(KEYS, ARGV, 1, 1, #KEYS)" },
  {
    name: 'check_cross_slot',
    call: "require('check')(ARGV, ARGV, 2, ARGV[1] + 2, ARGV[1] + 0)",
    flags: 'allow-cross-slot-keys',
  },
  { name: 'refund', call: "require('refund')(KEYS, ARGV)" },
  { name: 'renew', call: "require('renew')(KEYS, ARGV)" },
  { name: 'reset', call: "require('reset')(KEYS, ARGV)" },
  { name: 'override', call: "require('set-override')(KEYS, ARGV)" },
];

/**
 * The library: the modules once, and one function per driver. Its name (and its functions') carries a
 * hash of its code, so that processes running different versions of ratekeeper on one server each find
 * their own.
 */
function assembleLibrary(): { library: RedisLibrary; names: Map<string, string> } {
  const body = [
    assembleModules(DRIVERS.map((d) => d.call).join('\n')),
    ...DRIVERS.map((d) => `-- ${d.name}: ${d.call} ${d.flags ?? ''}`),
  ].join('\n');
  const tag = sha1(body).slice(0, 16);
  const names = new Map(DRIVERS.map((d) => [d.name, `ratekeeper_${tag}_${d.name}`]));
  const register = DRIVERS.map((d) => {
    const flags = d.flags === undefined ? '' : `'${d.flags}'`;
    return (
      `redis.register_function{ function_name = '${names.get(d.name)}', flags = { ${flags} },\n` +
      `  callback = function(KEYS, ARGV) return ${d.call} end }`
    );
  });
  const source = [`#!lua name=ratekeeper_${tag}`, body, ...register].join('\n');
  return { library: { name: `ratekeeper_${tag}`, source, functions: [...names.values()] }, names };
}

let loaded: RedisScripts | undefined;

/** Assembles every script once per process; the SHA is computed here, never hard-coded. */
export function loadScripts(): RedisScripts {
  if (loaded !== undefined) return loaded;
  const { library, names } = assembleLibrary();
  const script = (driver: string, source: string): RedisScript => ({
    name: driver,
    source,
    sha: sha1(source),
    fn: names.get(driver) as string,
    library,
  });
  const driver = (name: string) => {
    const found = DRIVERS.find((d) => d.name === name) as Driver;
    return script(name, assembleScript(`return ${found.call}`));
  };
  // A shebang must be the first line; Redis before 7 cannot compile it (redis-batches.ts then stops
  // using it).
  const crossSlot = driver('check_cross_slot');
  loaded = {
    check: driver('check'),
    checkCrossSlot: script('check_cross_slot', `#!lua flags=allow-cross-slot-keys\n${crossSlot.source}`),
    refund: driver('refund'),
    renew: driver('renew'),
    reset: driver('reset'),
    override: driver('override'),
  };
  return loaded;
}

/** What a server without the library, or a script cache without the script, answers. */
const NOT_LOADED = /^(NOSCRIPT|ERR Function not found)/;

/**
 * Per connection: whether its servers run our functions (until one says it does not, or holds our names
 * for another library), whether the library was loaded or found to be ours, and a load under way.
 */
interface FunctionState {
  functions: boolean;
  checked: boolean;
  loading: Promise<void> | undefined;
  readonly warn: (message: string) => void;
}

const states = new WeakMap<RedisConnection, FunctionState>();

function stateOf(connection: RedisConnection): FunctionState {
  let state = states.get(connection);
  if (state === undefined) {
    // A connection that never loads the library (over HTTP) runs every script by EVALSHA from the start.
    const functions = connection.functions !== false;
    state = {
      functions,
      checked: !functions,
      loading: undefined,
      warn: warnOnce(FUNCTION_CONFLICT_WARNING),
    };
    states.set(connection, state);
  }
  return state;
}

function messageOf(error: unknown): string {
  return error instanceof Error ? error.message : '';
}

/**
 * Loads the library on every master, or finds ours there, before any function of it is called (on first
 * use, and when a server answers that it has none). Where functions are refused, or another library
 * holds our names, the connection runs its scripts by SHA from then on: another tenant's code is never
 * called. Shared by the calls that need it at the same time.
 */
function ensureLibrary(
  connection: RedisConnection,
  state: FunctionState,
  library: RedisLibrary,
): Promise<void> {
  state.loading ??= loadLibrary(connection, library).then(
    () => {
      state.loading = undefined;
      state.checked = true;
    },
    (error: unknown) => {
      state.loading = undefined;
      if (error instanceof FunctionConflict) {
        state.warn(
          `a Redis function library that is not ratekeeper's holds its names (${error.conflict}): ` +
            'ratekeeper never calls it, and runs its own scripts by EVALSHA instead. Delete that library ' +
            '(FUNCTION DELETE), or give each tenant its own ACL user without the FUNCTION command.',
        );
      } else if (!NO_FUNCTIONS.test(messageOf(error))) {
        throw error;
      }
      state.functions = false;
      state.checked = true;
    },
  );
  return state.loading;
}

/**
 * Runs a script: FCALL of its function, the library loaded (or found there with our code) before the
 * connection's first call, and again when the server answers that it has none (a new server, a restart,
 * a failover to a node that never had it, FUNCTION FLUSH); where functions are refused or another
 * library holds our names, EVALSHA from then on, and EVAL (which also caches the script again) only on
 * NOSCRIPT. One round trip in the usual case. On a Cluster every key must share a slot: the first one routes the call.
 */
export function runScript(
  connection: RedisConnection,
  script: RedisScript,
  keys: readonly string[],
  args: readonly string[],
): Promise<unknown> {
  return runScriptThen(connection, script, keys, args, undefined);
}

/**
 * runScript, with `next()` sent right behind the script call, so that Redis runs it right after the
 * script, and again after the script had to be loaded (the first one then ran before it). Resolves
 * with the script's reply once both have answered.
 */
export async function runScriptThen(
  connection: RedisConnection,
  script: RedisScript,
  keys: readonly string[],
  args: readonly string[],
  next: (() => Promise<unknown>) | undefined,
): Promise<unknown> {
  const state = stateOf(connection);
  if (!state.checked) await ensureLibrary(connection, state, script.library);
  const functions = state.functions;
  const argv = [functions ? script.fn : script.sha, String(keys.length)];
  for (let i = 0; i < keys.length; i++) argv.push(keys[i] as string);
  for (let i = 0; i < args.length; i++) argv.push(args[i] as string);
  const call = connection.send(functions ? 'FCALL' : 'EVALSHA', argv, keys[0]);
  const followed = next?.();
  try {
    const reply = await call;
    // Awaiting undefined would still cost a turn of the microtask queue per call.
    if (followed !== undefined) await followed;
    return reply;
  } catch (error) {
    const message = messageOf(error);
    const refused = functions && NO_FUNCTIONS.test(message);
    if (!NOT_LOADED.test(message) && !refused) {
      // The call failed (a timeout, a lost connection): the command behind it may fail the same way,
      // and nothing awaits it any more.
      followed?.catch(() => {});
      throw error;
    }
    await followed;
    const reply = await runLoaded(connection, state, script, argv, functions && !refused, keys[0]);
    await next?.();
    return reply;
  }
}

/**
 * The call again, after the first found its code missing: FCALL once the library is loaded, or, where
 * the server refuses functions or holds our names for another library, EVAL (which caches the script
 * for the EVALSHA calls that follow).
 */
async function runLoaded(
  connection: RedisConnection,
  state: FunctionState,
  script: RedisScript,
  argv: readonly string[],
  functions: boolean,
  routingKey: string | undefined,
): Promise<unknown> {
  if (functions) await ensureLibrary(connection, state, script.library);
  if (functions && state.functions) {
    try {
      return await connection.send('FCALL', argv, routingKey);
    } catch (error) {
      if (!NO_FUNCTIONS.test(messageOf(error))) throw error;
    }
  }
  state.functions = false;
  const again = argv.slice();
  again[0] = script.source;
  return connection.send('EVAL', again, routingKey);
}
