// The closed-loop driver of the core scenarios: N decisions in flight, bounded in count and in time.

import { performance } from 'node:perf_hooks';
import { errorMessage } from './contender.js';
import { percentile } from './stats.js';

export interface LoadOptions {
  /** Decisions in flight at once. */
  concurrency: number;
  /** Stop issuing after this many decisions... */
  maxOps: number;
  /** ...or after this much time, whichever comes first. */
  maxMs: number;
  /** Keys, cycled through in order. */
  keys: readonly string[];
  /** Hard cap on waiting for the decisions still in flight after the stop. */
  stallTimeoutMs: number;
  /**
   * Time one decision in this many (and read the clock for the deadline as often): reading the
   * clock twice costs ~10% of a memory-store decision, nothing next to a Redis round trip.
   * @default 1
   */
  sampleEvery?: number;
}

export interface LoadResult {
  ops: number;
  admitted: number;
  errors: number;
  firstError?: string;
  elapsedMs: number;
  opsPerSec: number;
  p50Ms: number;
  p99Ms: number;
}

let latencies = new Float64Array(0);

/** Runs `decide` in a closed loop and measures throughput and per-decision latency. */
export async function runLoad(
  decide: (key: string) => Promise<boolean>,
  options: LoadOptions,
): Promise<LoadResult> {
  if (latencies.length < options.maxOps) latencies = new Float64Array(options.maxOps);
  const samples = latencies;
  const { keys, maxOps } = options;
  let issued = 0;
  let done = 0;
  let admitted = 0;
  let errors = 0;
  let firstError: string | undefined;
  const start = performance.now();
  const deadline = start + options.maxMs;

  const sampleEvery = Math.max(1, options.sampleEvery ?? 1);
  let sampled = 0;
  let stopped = false;
  // Set when the run is abandoned: lanes still waiting must not write into the next run's samples.
  let abandoned = false;

  async function lane(): Promise<void> {
    while (!stopped && issued < maxOps) {
      const timed = issued % sampleEvery === 0;
      const t0 = timed ? performance.now() : 0;
      if (timed && t0 >= deadline) {
        stopped = true;
        return;
      }
      const key = keys[issued % keys.length] as string;
      issued++;
      try {
        const allowed = await decide(key);
        if (abandoned) return;
        if (allowed) admitted++;
      } catch (error) {
        if (abandoned) return;
        errors++;
        firstError ??= errorMessage(error);
      }
      done++;
      if (timed) samples[sampled++] = performance.now() - t0;
    }
  }

  const lanes = Array.from({ length: options.concurrency }, lane);
  let timer: NodeJS.Timeout | undefined;
  const stalled = new Promise<never>((_, reject) => {
    timer = setTimeout(
      () => reject(new Error(`stalled: decisions still pending ${options.stallTimeoutMs} ms after the stop`)),
      options.maxMs + options.stallTimeoutMs,
    );
  });
  try {
    await Promise.race([Promise.all(lanes), stalled]);
  } catch (error) {
    abandoned = true;
    stopped = true;
    throw error;
  } finally {
    clearTimeout(timer);
  }
  const elapsedMs = performance.now() - start;
  const result: LoadResult = {
    ops: done,
    admitted,
    errors,
    elapsedMs,
    opsPerSec: (done / elapsedMs) * 1000,
    p50Ms: percentile(samples, sampled, 50),
    p99Ms: percentile(samples, sampled, 99),
  };
  if (firstError !== undefined) result.firstError = firstError;
  return result;
}
