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
  /** Identities whose Redis cost is measured, and hits per identity. */
  costKeys: number;
  costHits: number;
  costHotDecisions: number;
  exactProcesses: number;
  exactLimit: number;
  exactAttempts: number;
  /** Attempts in flight per racing process. */
  exactConcurrency: number;
  /** Hard cap on anything waiting for a contender or a child process. */
  stallTimeoutMs: number;
}

/** Reads BENCH_QUICK from the environment. */
export function loadConfig(env: NodeJS.ProcessEnv = process.env): BenchConfig {
  const quick = env.BENCH_QUICK === '1' || env.BENCH_QUICK === 'true';
  return {
    quick,
    reps: quick ? 1 : 3,
    concurrency: 64,
    distinctKeys: 10_000,
    admittedLimit: 1_000_000,
    hotLimit: 100,
    windowMs: 60_000,
    redisRunMs: quick ? 250 : 800,
    redisMaxOps: 2_000_000,
    memoryRunMs: quick ? 150 : 400,
    memoryMaxOps: 2_000_000,
    warmupMs: quick ? 100 : 300,
    httpConnections: 64,
    httpSeconds: quick ? 1 : 3,
    httpDeniedSeconds: quick ? 1 : 2,
    httpWarmupSeconds: quick ? 0.5 : 1,
    costKeys: 200,
    costHits: 5,
    costHotDecisions: 1000,
    exactProcesses: 4,
    exactLimit: 1000,
    exactAttempts: 2000,
    exactConcurrency: 16,
    stallTimeoutMs: 30_000,
  };
}
