// Loading the Redis function library so that only ratekeeper's own code is ever called by its names: a
// library or function of another tenant that holds those names is found, named, and never run.
import type { RedisConnection, RedisNode } from './connection/connection.js';

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
