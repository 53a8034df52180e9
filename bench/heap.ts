// Memory stores' heap cost: bytes of V8 heap each distinct key keeps alive.

import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import type { BenchConfig } from './config.js';
import { type Contender, errorMessage, withTimeout } from './contender.js';
import { promiseFloor } from './raw-floor.js';
import { num, type Table } from './report.js';

export interface HeapRow {
  name: string;
  group: Contender['group'];
  bytesPerKey?: number;
  failed?: string;
}

/** A callable gc(), exposed at run time so that `npm run bench` needs no node flag. */
function exposeGc(): () => void {
  setFlagsFromString('--expose-gc');
  return runInNewContext('gc') as () => void;
}

async function settledHeap(gc: () => void): Promise<number> {
  for (let i = 0; i < 3; i++) {
    gc();
    await new Promise((resolve) => setImmediate(resolve));
  }
  return process.memoryUsage().heapUsed;
}

async function heapPerKey(contender: Contender, config: BenchConfig, names: string[], gc: () => void) {
  const instance = await contender.create(
    { limit: config.admittedLimit, windowMs: config.windowMs },
    { redisPort: 0, prefix: 'heap:' },
  );
  try {
    await instance.decide('warm');
    const before = await settledHeap(gc);
    for (let i = 0; i < names.length; i += 1000) {
      await Promise.all(names.slice(i, i + 1000).map((name) => instance.decide(name)));
    }
    const after = await settledHeap(gc);
    return (after - before) / names.length;
  } finally {
    await instance.close();
  }
}

/** Heap growth per key after one decision on each of `keys` distinct keys, per memory contender. */
export async function measureHeap(
  contenders: readonly Contender[],
  config: BenchConfig,
  keys: number,
): Promise<{ table: Table; rows: HeapRow[] }> {
  const gc = exposeGc();
  const rows: HeapRow[] = [];
  const names = Array.from({ length: keys }, (_, i) => `heap-key-${i}`);
  // The promise floor keeps nothing per key: no heap figure to give.
  for (const contender of contenders.filter((c) => c.store === 'memory' && c !== promiseFloor)) {
    const row: HeapRow = { name: contender.name, group: contender.group };
    try {
      row.bytesPerKey = await withTimeout(
        heapPerKey(contender, config, names, gc),
        config.stallTimeoutMs,
        'heap',
      );
    } catch (error) {
      row.failed = errorMessage(error);
    }
    rows.push(row);
  }
  const table: Table = {
    title: `Memory store: heap per key (${num(keys)} keys, one decision each)`,
    columns: ['contender', 'heap bytes / key', 'note'],
    rows: rows.map((r) => [r.name, r.failed ? 'failed' : num(r.bytesPerKey), r.failed ?? '']),
    notes: [
      "V8 heapUsed after a forced GC, before and after; the caller's key strings existed before and are not " +
        'counted, strings a store builds itself (prefix + key) are. ' +
        'Timers, where a store arms one per key, count as heap too.',
    ],
  };
  return { table, rows };
}
