// The Lua scripts of the Redis store: the lua/ files assembled into scripts, run by SHA.
import { createHash } from 'node:crypto';
import { existsSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { RedisConnection } from './redis-connection.js';

/** A script ready to run: its full source and the SHA1 Redis knows it by. */
export interface RedisScript {
  readonly name: string;
  readonly source: string;
  readonly sha: string;
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
  readonly reset: RedisScript;
  readonly override: RedisScript;
}

/**
 * The lua/ folder: walks up from this module's own folder, which is src/stores/ when run from source
 * (tests through tsx) and dist/ in the built package (ESM, or CommonJS through tsup's shim).
 */
export function findLuaDir(from: string = dirname(fileURLToPath(import.meta.url))): string {
  for (let dir = from; ; dir = dirname(dir)) {
    if (existsSync(join(dir, 'lua', 'check.lua'))) return join(dir, 'lua');
    if (dirname(dir) === dir) throw new Error(`ratekeeper: cannot find lua/check.lua above ${from}`);
  }
}

/**
 * Every lua/ file is a module: its body runs once, on its first `require(name)` in a call, and what it
 * returns is what `require` gives. A script is the modules `main` requires (and those they require,
 * named as literals), then `main`, the body that reads KEYS and ARGV. Each module has a scope of its
 * own, so its helpers keep the names of their TypeScript twins.
 */
export function assembleScript(main: string, dir: string = findLuaDir()): string {
  const sources = new Map<string, string>();
  const add = (code: string) => {
    for (const [, name] of code.matchAll(/require\('([\w-]+)'\)/g)) {
      if (name === undefined || sources.has(name)) continue;
      const source = readFileSync(join(dir, `${name}.lua`), 'utf8');
      sources.set(name, source);
      add(source);
    }
  };
  add(main);
  const names = [...sources.keys()].sort();
  // Both tables are built by one constructor each, sized once: every call builds them again, and
  // filling empty tables key by key would grow (rehash) them several times.
  const modules = names.map((name) => `['${name}'] = function()\n${sources.get(name)}\nend,`);
  const unloaded = names.map((name) => `['${name}'] = false,`);
  return [
    // Redis < 5 refuses writes after TIME unless effects are replicated; 5+ does so by default.
    'if redis.replicate_commands then redis.replicate_commands() end',
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
    main,
  ].join('\n');
}

export function makeScript(name: string, source: string): RedisScript {
  return { name, source, sha: createHash('sha1').update(source).digest('hex') };
}

let loaded: RedisScripts | undefined;

/** Reads and assembles every script once per process; the SHA is computed here, never hard-coded. */
export function loadScripts(): RedisScripts {
  if (loaded !== undefined) return loaded;
  const dir = findLuaDir();
  const driver = (name: string, call = `require('${name}')(KEYS, ARGV)`) =>
    makeScript(name, assembleScript(`return ${call}`, dir));
  // A shebang must be the first line; Redis before 7 cannot compile it (redis-batches.ts then stops
  // using it).
  const crossSlot = driver('check', "require('check')(ARGV, ARGV, 2, ARGV[1] + 2)");
  loaded = {
    check: driver('check', "require('check')(KEYS, ARGV, 1, 1)"),
    checkCrossSlot: makeScript('check', `#!lua flags=allow-cross-slot-keys\n${crossSlot.source}`),
    refund: driver('refund'),
    reset: driver('reset'),
    override: driver('override'),
  };
  return loaded;
}

function isNoScript(error: unknown): boolean {
  return error instanceof Error && error.message.startsWith('NOSCRIPT');
}

/**
 * EVALSHA, and EVAL (which also caches the script again) only when the server answers NOSCRIPT: its
 * script cache is empty after a restart, a failover or SCRIPT FLUSH. One round trip in the usual case.
 * On a Cluster every key must share a slot: the first one routes the call.
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
  const argv = [script.sha, String(keys.length)];
  for (let i = 0; i < keys.length; i++) argv.push(keys[i] as string);
  for (let i = 0; i < args.length; i++) argv.push(args[i] as string);
  const call = connection.send('EVALSHA', argv, keys[0]);
  const followed = next?.();
  try {
    const reply = await call;
    await followed;
    return reply;
  } catch (error) {
    if (!isNoScript(error)) {
      // The call failed (a timeout, a lost connection): the command behind it may fail the same way,
      // and nothing awaits it any more.
      followed?.catch(() => {});
      throw error;
    }
    await followed;
    const again = argv.slice();
    again[0] = script.source;
    const reply = await connection.send('EVAL', again, keys[0]);
    await next?.();
    return reply;
  }
}
