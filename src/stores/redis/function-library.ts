// The Redis store's Lua: the lua/ modules (embedded in the build) assembled into one Redis function library
// (FCALL), and into scripts run by SHA (EVALSHA) where a server has no functions; and the library loaded so
// that only ratekeeper's own code is ever called by its names: a library or function of another tenant that
// holds those names is found, named, and never run.
import { sha1 as sha1Of } from '@noble/hashes/legacy';
import { bytesToHex } from '@noble/hashes/utils';
import type { RedisConnection, RedisNode } from './connection/connection.js';
import { LUA_TEXTS } from './lua-texts.js';

/** Every script as one Redis function library, loaded once per server (FUNCTION LOAD). */
export interface RedisLibrary {
  readonly name: string;
  readonly source: string;
  /** The names of its functions. */
  readonly functions: readonly string[];
}

/** What a server without functions answers: Redis < 7, FUNCTION or FCALL refused (ACL) or renamed away. */
export const NO_FUNCTIONS = /^(ERR unknown command|NOPERM|ERR unknown subcommand)/i;

/**
 * On some server, a library or function holding our names is not ours: `conflict` says which, for the
 * warning. The store then runs its scripts by SHA, whose code a SHA1 names.
 */
export class FunctionConflict extends Error {
  constructor(readonly conflict: string) {
    super(conflict);
    this.name = 'FunctionConflict';
  }
}

/** One library of a FUNCTION LIST reply (RESP2: a flat array of field, value). */
interface ListedLibrary {
  readonly name: string;
  readonly functions: readonly string[];
  readonly code: string | undefined;
}

function fieldsOf(entry: unknown): Map<string, unknown> {
  const fields = new Map<string, unknown>();
  if (!Array.isArray(entry)) return fields;
  for (let i = 0; i + 1 < entry.length; i += 2) fields.set(String(entry[i]), entry[i + 1]);
  return fields;
}

function listedLibraries(reply: unknown): ListedLibrary[] {
  if (!Array.isArray(reply)) return [];
  return reply.map((entry) => {
    const fields = fieldsOf(entry);
    const functions = fields.get('functions');
    const code = fields.get('library_code');
    return {
      name: String(fields.get('library_name')),
      functions: Array.isArray(functions) ? functions.map((f) => String(fieldsOf(f).get('name'))) : [],
      code: typeof code === 'string' ? code : undefined,
    };
  });
}

function messageOf(error: unknown): string {
  return error instanceof Error ? error.message : '';
}

/**
 * Which library on `node` holds our names instead of ours, in words; undefined when the library there
 * under our name carries exactly our code (loaded by another process of this version: its functions,
 * whose names are unique on a server, are then ours).
 */
async function conflictOn(node: RedisNode, library: RedisLibrary) {
  const ours = listedLibraries(
    await node.send('FUNCTION', ['LIST', 'LIBRARYNAME', library.name, 'WITHCODE']),
  ).find((listed) => listed.name === library.name);
  if (ours !== undefined) {
    return ours.code === library.source
      ? undefined
      : `the library "${library.name}" on the server holds other code than ratekeeper's`;
  }
  const holders = listedLibraries(await node.send('FUNCTION', ['LIST'])).flatMap((listed) => {
    const taken = listed.functions.filter((name) => library.functions.includes(name));
    return taken.length === 0
      ? []
      : [`the library ${JSON.stringify(listed.name)} registers ${taken.join(', ')}`];
  });
  // Named neither way: the names were taken and given back meanwhile; loading again will tell.
  return holders.length === 0 ? `ratekeeper's functions were taken by another library` : holders.join('; ');
}

/** Loads the library on one server, or finds ours there; throws a FunctionConflict when it is not ours. */
async function loadOn(node: RedisNode, library: RedisLibrary) {
  try {
    await node.send('FUNCTION', ['LOAD', library.source]);
    return;
  } catch (error) {
    if (!messageOf(error).includes('already exists')) throw error;
  }
  const conflict = await conflictOn(node, library);
  if (conflict !== undefined) throw new FunctionConflict(conflict);
}

/**
 * Loads the library on every master (one server off a Cluster), never replacing what is there: a
 * library already there with our name is used only when its code is ours. Rejects with a
 * FunctionConflict naming another tenant's library that holds our names, or with what refused the
 * command (NO_FUNCTIONS, a lost connection).
 */
export async function loadLibrary(connection: RedisConnection, library: RedisLibrary): Promise<void> {
  await connection.eachMaster((node) => loadOn(node, library));
}

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
