// Benchmark settings: one place for durations, counts and sizes, full run or BENCH_QUICK=1 smoke run.

/** Every knob of a benchmark run. Times in ms unless the name says seconds. */
export interface BenchConfig {
  quick: boolean;
  /** Interleaved repetitions per scenario; medians are taken over these. */
  reps: number;
  /** Decisions in flight at once in the core scenarios. */
  concurrency: number;
  /** Distinct identities cycled through in the "all admitted" scenarios. */
  distinctKeys: number;
  /** Limit per key where every decision must be admitted. */
  admittedLimit: number;
  /** Limit of the hot key, which is then hammered far past it. */
  hotLimit: number;
  windowMs: number;
  /** Time and count bound of one measured core run against Redis. */
  redisRunMs: number;
  redisMaxOps: number;
  /** Time and count bound of one measured core run against a memory store. */
  memoryRunMs: number;
  memoryMaxOps: number;
  /** Warm-up run before the first repetition (JIT, script load, connections). */
  warmupMs: number;
  httpConnections: number;
  httpSeconds: number;
  httpDeniedSeconds: number;
  httpWarmupSeconds: number;
  /** Requests per repetition of the in-process middleware scenario. */
  middlewareRequests: number;
  /** Identities whose Redis cost is measured, and hits per identity. */
  /** Distinct keys created to measure a memory store's heap per key. */
  heapKeys: number;
  costKeys: number;
  costHits: number;
  /** Limit and window of the cost measurement: every hit admitted, no state expiring meanwhile. */
  costLimit: number;
  costWindowMs: number;
  costHotDecisions: number;
  exactProcesses: number;
  exactLimit: number;
  exactAttempts: number;
  /** Attempts in flight per racing process. */
  exactConcurrency: number;
  /** Hard cap on anything waiting for a contender or a child process. */
  stallTimeoutMs: number;
}

/** Reads BENCH_QUICK (short smoke run) and BENCH_REPS (repetitions, 1-20) from the environment. */
export function loadConfig(env: NodeJS.ProcessEnv = process.env): BenchConfig {
  const quick = env.BENCH_QUICK === '1' || env.BENCH_QUICK === 'true';
  const reps = Number(env.BENCH_REPS);
  return {
    quick,
    reps: Number.isInteger(reps) && reps >= 1 && reps <= 20 ? reps : quick ? 1 : 3,
    concurrency: 64,
    distinctKeys: 10_000,
    admittedLimit: 1_000_000,
    hotLimit: 100,
    windowMs: 60_000,
    redisRunMs: quick ? 250 : 600,
    redisMaxOps: 2_000_000,
    memoryRunMs: quick ? 150 : 300,
    memoryMaxOps: 2_000_000,
    warmupMs: quick ? 100 : 200,
    httpConnections: 64,
    httpSeconds: quick ? 0.5 : 2.5,
    httpDeniedSeconds: quick ? 0.5 : 1,
    httpWarmupSeconds: quick ? 0 : 0.5,
    middlewareRequests: quick ? 5_000 : 50_000,
    heapKeys: quick ? 20_000 : 50_000,
    costKeys: quick ? 100 : 200,
    costHits: 5,
    costLimit: 1000,
    costWindowMs: 3_600_000,
    costHotDecisions: quick ? 300 : 1000,
    exactProcesses: 4,
    exactLimit: 1000,
    exactAttempts: 2000,
    exactConcurrency: 16,
    stallTimeoutMs: 30_000,
  };
}
