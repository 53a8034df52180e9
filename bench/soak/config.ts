// The soak's settings: how long, how many app processes, how much traffic, and when each fault strikes.

/** A fault the coordinator injects; each names the store it hits. */
export type FaultKind =
  | 'cluster-failover' // a Cluster master SIGKILLed, its replica promoted, the old master back as a replica
  | 'standalone-restart' // SHUTDOWN SAVE and a new process on the port: data kept, scripts flushed
  | 'standalone-pause' // SIGSTOP for longer than storeTimeout, then SIGCONT
  | 'client-kill' // CLIENT KILL TYPE normal on the standalone server and on one Cluster master
  | 'pg-fast-restart' // PostgreSQL stopped with SIGINT (fast shutdown) and started again, data kept
  | 'pg-immediate-restart' // SIGQUIT (immediate shutdown, crash recovery at start) and started again
  | 'pg-terminate' // pg_terminate_backend of every connection of the apps' role
  | 'pg-pause' // the postmaster and every backend SIGSTOPped for longer than storeTimeout, then SIGCONT
  | 'pg-lock-timeout' // ALTER ROLE SET lock_timeout = '1ms' on the apps' role, for lockTimeoutForMs
  | 'app-stall'; // one app process SIGSTOPped for longer than the longest lease (a frozen VM), then SIGCONT

/**
 * Faults the store rides through by design, so the audits grant them no outage: docs/stores.md says a
 * statement cut by a role's lock_timeout is sent again with the store's own settings, and a connection
 * PostgreSQL ended (pg_terminate_backend) is retried on another within the same decision. Over-admission
 * during them counts as outside an outage (a decision the policy made still excuses its own window).
 */
export const NOT_AN_OUTAGE: ReadonlySet<FaultKind> = new Set(['pg-terminate', 'pg-lock-timeout']);

/** One turn of the schedule: Redis and PostgreSQL faults in turn, every kind once. */
export const FAULT_ORDER: readonly FaultKind[] = [
  'cluster-failover',
  'pg-fast-restart',
  'standalone-restart',
  'pg-terminate',
  'standalone-pause',
  'pg-pause',
  'client-kill',
  'pg-immediate-restart',
  'pg-lock-timeout',
  'app-stall',
];

export interface SoakConfig {
  /** Length of the traffic phase, ms. */
  durationMs: number;
  /** App processes, each with its own limiters on both stores. */
  processes: number;
  /** Traffic loops per process and store; each sends one request (or a request and its report) at a time. */
  sessions: number;
  /** Pause between two requests of one loop, ms (on average; uniformly 0 to twice this). */
  thinkMs: number;
  /** The limiters' storeTimeout and storeRetryInterval, ms. */
  storeTimeoutMs: number;
  storeRetryMs: number;
  /** How long a pause fault keeps the server stopped, ms (longer than storeTimeout). */
  pauseMs: number;
  /** First fault, and the time between two faults, ms. */
  firstFaultMs: number;
  faultEveryMs: number;
  /** No fault starts in this last part of the run, so locks placed before it have ended (ms). */
  quietTailMs: number;
  /** How long the 'app-stall' fault keeps an app process stopped (ms; longer than the longest lease). */
  stallMs: number;
  /** How long the 'pg-lock-timeout' fault keeps the role's lock_timeout (ms). */
  lockTimeoutForMs: number;
  /** Loops per process and store of work in flight: streamed responses, acquire callers, settled costs. */
  flightSessions: number;
  /** How often each process samples its heap, event-loop delay and handles (ms; a minute in the soak). */
  sampleEveryMs: number;
  /** Where the per-process records go. */
  dir: string;
  /** Short runs (the test) print less and skip per-minute figures that need whole minutes. */
  label: string;
}

function numberFromEnv(name: string, fallback: number): number {
  const raw = process.env[name];
  if (raw === undefined || raw === '') return fallback;
  const value = Number(raw);
  if (!Number.isFinite(value) || value <= 0)
    throw new Error(`${name} must be a positive number, got '${raw}'`);
  return value;
}

/** `npm run soak`: 10 minutes and 4 processes unless SOAK_MINUTES / SOAK_PROCESSES / SOAK_SESSIONS say otherwise. */
export function soakConfigFromEnv(dir: string): SoakConfig {
  return {
    durationMs: numberFromEnv('SOAK_MINUTES', 10) * 60_000,
    processes: Math.round(numberFromEnv('SOAK_PROCESSES', 4)),
    sessions: Math.round(numberFromEnv('SOAK_SESSIONS', 6)),
    thinkMs: numberFromEnv('SOAK_THINK_MS', 40),
    storeTimeoutMs: 250,
    storeRetryMs: 1000,
    pauseMs: 1500,
    firstFaultMs: 45_000,
    faultEveryMs: numberFromEnv('SOAK_FAULT_EVERY_S', 35) * 1000,
    quietTailMs: 60_000,
    lockTimeoutForMs: 60_000,
    stallMs: 4_000,
    flightSessions: Math.round(numberFromEnv('SOAK_FLIGHT_SESSIONS', 2)),
    sampleEveryMs: 60_000,
    dir,
    label: 'soak',
  };
}

/** The short form inside `npm test`: about a minute, every fault once (the tenth at 35 s), a smaller mix of traffic. */
export function shortSoakConfig(dir: string): SoakConfig {
  return {
    ...soakConfigFromEnv(dir),
    durationMs: 60_000,
    sessions: 2,
    flightSessions: 1,
    firstFaultMs: 3_500,
    faultEveryMs: 3_500,
    quietTailMs: 22_000,
    lockTimeoutForMs: 4_000,
    sampleEveryMs: 10_000,
    label: 'short soak',
  };
}

/**
 * When each fault is due, ms after the traffic started: the kinds in turn, none in the quiet tail. A
 * fault that lasts (the lock_timeout one) delays the next: the coordinator starts each no sooner than
 * half a spacing after the one before ended (so a late fault may reach into the quiet tail, never into its
second half: one due later is left out, unless it is the first of its kind).
 */
export function faultSchedule(config: SoakConfig): Array<{ atMs: number; kind: FaultKind }> {
  const out: Array<{ atMs: number; kind: FaultKind }> = [];
  for (let atMs = config.firstFaultMs, i = 0; atMs < config.durationMs - config.quietTailMs; i++) {
    out.push({ atMs, kind: FAULT_ORDER[i % FAULT_ORDER.length] as FaultKind });
    atMs += config.faultEveryMs;
  }
  return out;
}
