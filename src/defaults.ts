// Every default of the library in one place: rules, the limiter, the stores and the HTTP adapters read them here.
// (The recipes' figures are their own public constants, LOGIN_DEFAULTS and VERIFICATION_CODE_DEFAULTS.)

/** Defaults of a rule's optional fields (see `Rule`), filled in by rules/compile.ts. */
export const RULE_DEFAULTS = {
  cost: 1,
  countOn: 'all',
  mode: 'enforce',
  resetOnSuccess: false,
  settle: false,
  /** A request without the rule's key passes it uncounted (with a one-time warning unless the rule says so). */
  missing: 'skip',
  /** Calendar windows' time zone. */
  timezone: 'UTC',
  slidingBuckets: 10,
  /** A concurrency slot's lease: how long a slot outlives a holder that died. */
  concurrencyLeaseMs: 60_000,
  lockoutEscalate: 1,
  lockoutForgetAfterMs: 24 * 60 * 60 * 1000,
} as const;

/** Defaults of `LimiterOptions`. */
export const LIMITER_DEFAULTS = {
  onStoreError: 'insurance',
  denyCache: true,
  /**
   * A store silent this long (no answer to any call in flight) has failed. A healthy Redis answers in
   * milliseconds, but on cores oversubscribed 4 times over one was measured silent for 250 ms while it
   * worked through its clients' batches: twice that, so a starved store is not taken for a stopped one.
   */
  storeTimeoutMs: 500,
  /**
   * The longest a decision waits for a store that is answering (working through this process's calls)
   * or making its first connection: long enough for a burst of thousands of decisions on cores shared
   * with other busy processes, short enough that an overloaded store is not a hung request.
   */
  storeMaxWaitMs: 5000,
  storeRetryIntervalMs: 1000,
  /** The insurance store admits the whole limit in each process: exact for one process, N x limit for N. */
  insuranceShare: 1,
  denyCacheMaxKeys: 10_000,
  /** express-rate-limit's default too: an IPv6 user often holds a /56, so /64 keys gave each of them 256 buckets. */
  ipv6Subnet: 56,
  /** How many keys `limiter.locked(rule)` lists when not told. */
  lockedListLimit: 100,
  /** How many holders of a concurrency rule's key `limiter.status` lists (oldest first). */
  holdersListed: 100,
} as const;

/** Defaults of `limiter.override`'s options. */
export const OVERRIDE_DEFAULTS = {
  /** No expiry: the override holds until cleared with `null`. */
  forMs: undefined,
} as const;

/**
 * Most calls that may wait for a turn on one set of rules and key in a process (`maxQueue`): a queue
 * without a bound holds every caller's memory until its turn, however many pile up.
 */
const MAX_QUEUE = 10_000;

/** Defaults of `limiter.acquire`'s options. */
export const ACQUIRE_DEFAULTS = {
  cost: 1,
  /** Wait as long as it takes (an `AbortSignal` can still end the wait). */
  maxWaitMs: Number.POSITIVE_INFINITY,
  maxQueue: MAX_QUEUE,
} as const;

/** Defaults of `limiter.wrap`'s and `@limited`'s options. */
export const WRAP_DEFAULTS = {
  cost: 1,
  /** No waiting: a denied call throws `RateLimitExceededError` at once. */
  maxWaitMs: 0,
  maxQueue: MAX_QUEUE,
} as const;

/** Defaults of `MemoryStoreOptions`. */
export const MEMORY_STORE_DEFAULTS = {
  maxKeys: 100_000,
  sweepIntervalMs: 30_000,
} as const;

/** Defaults of `RedisStoreOptions`. */
export const REDIS_STORE_DEFAULTS = {
  prefix: 'rk',
  clockSyncIntervalMs: 60_000,
  /**
   * Over HTTP (@upstash/redis): the longest one request may take, the client's retries included, before
   * it is aborted; the limiter's default storeMaxWait, past which no decision waits anyway.
   */
  requestTimeoutMs: 5000,
  /**
   * Over HTTP, where no subscription hears other processes' resets, overrides and frees: how long a
   * denial is kept in the deny cache, and how often a call waiting for a slot asks again (see
   * `StoreLiveness.staleAfterMs`). Each costs at most one request per key per this long in each process.
   */
  httpStaleAfterMs: 1000,
} as const;

/** Defaults of `DurableObjectStoreOptions`. */
export const DURABLE_OBJECT_STORE_DEFAULTS = {
  prefix: 'rk',
  limitsLeaseMs: 2000,
} as const;

export const POSTGRES_STORE_DEFAULTS = {
  schema: 'ratekeeper',
  tablePrefix: 'rk_',
  clockSyncIntervalMs: 60_000,
  sweepIntervalMs: 1000,
  sweepBatch: 1000,
  statementsInFlight: 4,
} as const;

/** Defaults of the HTTP adapters' options and of `formatHeaders`. */
export const ADAPTER_DEFAULTS = {
  headers: 'legacy',
  reset: 'epoch-seconds',
  statusCode: 429,
  /** The body of a denial: JSON with the seconds its `Retry-After` field gives (src/headers.ts createRetryAfter). */
  message: (retryAfterSeconds: number): unknown => ({
    error: 'Too Many Requests',
    retryAfter: retryAfterSeconds,
  }),
  /** The `message` of Nest's denial, `{ statusCode: 429, message }`, Nest's own convention for HTTP errors. */
  nestMessage: 'Too Many Requests',
  /** Server errors count as failures too: a 5xx never resets a lockout count. */
  isFailure: (status: number): boolean => status >= 400,
} as const;

/** Defaults of `slowDown`'s options. */
export const SLOW_DOWN_DEFAULTS = {
  /**
   * The longest a request waits. Below the 60 s after which common proxies give up on a response (nginx's
   * proxy_read_timeout, the idle timeout of AWS load balancers): a longer wait ends in the proxy's 504, with
   * the socket and the timer held the whole time for nothing. Half of it leaves the handler its own time.
   */
  maxDelayMs: 30_000,
  /**
   * The most requests of one key (per rule, per process) waiting at once; the next is refused (429). A
   * client over its limit is held a bounded number of sockets and timers, never one per connection it opens;
   * 100 is the fewest streams RFC 9113 recommends one HTTP/2 connection allow at once, so a client's one
   * connection of parallel requests is not refused for its parallelism alone.
   */
  maxWaiting: 100,
} as const;

/** Defaults of the operator tools: the console, the command line, the decision-count publisher, the metrics. */
export const OPERATOR_DEFAULTS = {
  consoleTitle: 'ratekeeper console',
  /** Locked keys the console lists per rule. */
  consoleLockedLimit: 50,
  /** How often `publishDecisionCounts` sends its counts. */
  publishIntervalMs: 1000,
  /** `npx ratekeeper watch`: refresh interval and the span its totals cover. */
  watchIntervalMs: 1000,
  watchWindowMs: 10_000,
  /** Prefix of the Prometheus metric names. */
  metricsPrefix: 'ratekeeper_',
} as const;

/** Defaults of the `leasing` option of RedisStore and PostgresStore (docs/exactness.md, "Leasing"). */
export const LEASING_DEFAULTS = {
  hotAfter: 100,
  maxBlock: 500,
  share: 16,
  blockMs: 250,
  idleMs: 250,
  maxKeys: 1000,
} as const;
