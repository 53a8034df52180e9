// The list of contenders: floors, peers, and ours. A new contender plugs in here.

import type { Contender } from './contender.js';
import { expressMemory, expressRedis, flexibleMemory, flexibleRedis, koaMemory, koaRedis } from './peers.js';
import { ratekeeperContenders } from './ratekeeper.js';
import { promiseFloor, rawMemory, rawRedis, rawRedisPipelined } from './raw-floor.js';

/** Always present: the floors first (ratio denominators), then the peers. */
const builtIn: Contender[] = [
  rawRedis,
  rawRedisPipelined,
  rawMemory,
  promiseFloor,
  flexibleRedis,
  expressRedis,
  koaRedis,
  flexibleMemory,
  expressMemory,
  koaMemory,
];

/**
 * Sources of further contenders, loaded lazily. A source that throws (e.g. src/ not written yet)
 * is reported as unavailable and the run goes on without it.
 * ADD NEW CONTENDERS HERE: a function resolving to Contender[] (see contender.ts for the shape).
 */
const sources: ReadonlyArray<{ name: string; load: () => Promise<Contender[]> }> = [
  { name: 'ratekeeper', load: ratekeeperContenders },
];

export interface ContenderList {
  contenders: Contender[];
  unavailable: Array<{ name: string; reason: string }>;
}

/**
 * All contenders, optionally only those whose name matches `filter` (floors are always kept,
 * since every ratio needs them).
 */
export async function loadContenders(filter?: RegExp): Promise<ContenderList> {
  const contenders = [...builtIn];
  const unavailable: ContenderList['unavailable'] = [];
  for (const source of sources) {
    try {
      contenders.push(...(await source.load()));
    } catch (error) {
      const reason = error instanceof Error ? error.message.split('\n')[0] : String(error);
      unavailable.push({ name: source.name, reason: reason ?? 'unknown error' });
    }
  }
  const kept = filter ? contenders.filter((c) => c.group === 'floor' || filter.test(c.name)) : contenders;
  return { contenders: kept, unavailable };
}

/** Finds a contender by its exact name (used by child processes). */
export async function findContender(name: string): Promise<Contender> {
  const { contenders, unavailable } = await loadContenders();
  const found = contenders.find((c) => c.name === name);
  if (!found) {
    const why = unavailable.map((u) => `${u.name}: ${u.reason}`).join('; ');
    throw new Error(`no contender named "${name}"${why ? ` (unavailable: ${why})` : ''}`);
  }
  return found;
}
