// Memory and resources of one soak process, sampled minute by minute (heap after GC, RSS, event-loop
// delay, open handles, store calls), and the check that none of them grows without levelling off.
import { monitorEventLoopDelay } from 'node:perf_hooks';

/** What one process measured over one sampling period (a minute in the soak). */
export interface MinuteFigures {
  minute: number;
  heapAfterGcBytes: number;
  rssBytes: number;
  /** Handles and requests the event loop holds (sockets, timers, servers): process.getActiveResourcesInfo(). */
  handles: number;
  eventLoopP99Ms: number;
  storeCallP99Ms: number;
  storeCalls: number;
}

const gc = (globalThis as { gc?: () => void }).gc;

function percentile(values: number[], p: number): number {
  if (values.length === 0) return 0;
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)] as number;
}

/** Samples this process every `everyMs` until `stop()`; store calls' durations are handed to `timed`. */
export class ResourceSampler {
  readonly minutes: MinuteFigures[] = [];
  #storeDurations: number[] = [];
  readonly #loopDelay = monitorEventLoopDelay({ resolution: 10 });
  readonly #timer: NodeJS.Timeout;

  constructor(everyMs: number) {
    this.#loopDelay.enable();
    this.#timer = setInterval(() => this.#sample(), everyMs);
  }

  readonly timed = (ms: number): void => {
    this.#storeDurations.push(ms);
  };

  #sample(): void {
    gc?.();
    this.minutes.push({
      minute: this.minutes.length + 1,
      heapAfterGcBytes: process.memoryUsage().heapUsed,
      rssBytes: process.memoryUsage.rss(),
      handles: process.getActiveResourcesInfo().length,
      eventLoopP99Ms: this.#loopDelay.percentile(99) / 1e6,
      storeCallP99Ms: percentile(this.#storeDurations, 99),
      storeCalls: this.#storeDurations.length,
    });
    this.#loopDelay.reset();
    this.#storeDurations = [];
  }

  stop(): void {
    clearInterval(this.#timer);
    this.#loopDelay.disable();
  }
}

/**
 * Growth that does not level off, per process, the worst one: the rise over the second half of the run
 * (from its middle sample to its last), as a fraction of the middle sample. The first sample is left out
 * (warm-up: connections, compiled code, the windows filling); NaN under 4 samples, too few to tell.
 */
export function lateGrowth(minutes: MinuteFigures[][], figure: (m: MinuteFigures) => number): number {
  let worst = Number.NaN;
  for (const list of minutes) {
    if (list.length < 4) continue;
    const middle = list[Math.floor(list.length / 2)] as MinuteFigures;
    const last = list[list.length - 1] as MinuteFigures;
    const growth = (figure(last) - figure(middle)) / Math.max(1, figure(middle));
    worst = Number.isNaN(worst) ? growth : Math.max(worst, growth);
  }
  return worst;
}

/** Heap after GC from the second sample to the last, per process, the worst (a fraction); NaN under 3. */
export function heapGrowth(minutes: MinuteFigures[][]): number {
  let worst = Number.NaN;
  for (const list of minutes) {
    const second = list[1];
    const last = list[list.length - 1];
    if (second === undefined || last === undefined || list.length < 3) continue;
    const growth = (last.heapAfterGcBytes - second.heapAfterGcBytes) / second.heapAfterGcBytes;
    worst = Number.isNaN(worst) ? growth : Math.max(worst, growth);
  }
  return worst;
}
