// The Lua scripts of the Redis store: found in the package's lua/ folder, assembled, run by SHA.
import { createHash } from 'node:crypto';
import { existsSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { Cluster, Redis } from 'ioredis';

/** A script ready to run: its full source and the SHA1 Redis knows it by. */
export interface RedisScript {
  readonly name: string;
  readonly source: string;
  readonly sha: string;
}

export interface RedisScripts {
  readonly check: RedisScript;
  readonly refund: RedisScript;
  readonly reset: RedisScript;
  readonly lockIndex: RedisScript;
}

/** Concatenated in this order ahead of the check and refund drivers: calendar reuses fixed's counter. */
const ALGORITHM_FILES = ['fixed', 'calendar', 'sliding-log', 'sliding', 'token-bucket', 'gcra'];

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

let loaded: RedisScripts | undefined;

/** Reads and assembles every script once per process; the SHA is computed here, never hard-coded. */
export function loadScripts(): RedisScripts {
  if (loaded !== undefined) return loaded;
  const dir = findLuaDir();
  const read = (file: string) => readFileSync(join(dir, `${file}.lua`), 'utf8');
  const prelude = read('prelude');
  const algorithms = ALGORITHM_FILES.map(read).join('\n');
  const make = (name: string, parts: string[]): RedisScript => {
    const source = parts.join('\n');
    return { name, source, sha: createHash('sha1').update(source).digest('hex') };
  };
  loaded = {
    check: make('check', [prelude, algorithms, read('check')]),
    refund: make('refund', [prelude, algorithms, read('refund')]),
    reset: make('reset', [prelude, read('reset')]),
    lockIndex: make('lock-index', [prelude, read('lock-index')]),
  };
  return loaded;
}

function isNoScript(error: unknown): boolean {
  return error instanceof Error && error.message.startsWith('NOSCRIPT');
}

/**
 * EVALSHA, and EVAL (which also caches the script again) only when the server answers NOSCRIPT: its
 * script cache is empty after a restart, a failover or SCRIPT FLUSH. One round trip in the usual case.
 * `keysThenArgs` holds the `keyCount` keys, then the ARGV.
 */
export async function runScript(
  client: Redis | Cluster,
  script: RedisScript,
  keyCount: number,
  keysThenArgs: string[],
): Promise<unknown> {
  try {
    return await client.evalsha(script.sha, keyCount, keysThenArgs);
  } catch (error) {
    if (!isNoScript(error)) throw error;
    return client.eval(script.source, keyCount, keysThenArgs);
  }
}
