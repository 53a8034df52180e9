// Public data types: requests, rules, decisions, and the shape of operator answers.

/** A duration: milliseconds, or a string such as `'500ms'`, `'1s'`, `'5m'`, `'1h'`, `'1d'`. */
export type Duration = number | string;

/** What the core needs to know about a request; adapters build it from the framework's request. */
export interface RequestInfo {
  method: string;
  /** The path without the query string, e.g. `/login`. */
  path: string;
  /** The client address as the framework determined it (after its own proxy-trust rules). */
  ip?: string | undefined;
  headers: Record<string, string | string[] | undefined>;
  query?: Record<string, unknown> | undefined;
  /** Route params; params matched by a rule's own `match` pattern are merged in. */
  params?: Record<string, unknown> | undefined;
  body?: unknown;
  user?: unknown;
}

/**
 * A limit read per request: a premium user gets 1000, a free one 100, under the same rule and keys.
 * Must give a positive integer (or a promise of one); anything else, or a throw, refuses the decision
 * with `RateLimitRequestError` (code `ERR_LIMIT`) and consumes nothing. Direct calls (`consume`,
 * `record`, `status`, `acquire`, `wrap`) have no request: they call it with `DIRECT_REQUEST` (no user,
 * no headers), so it should answer for an unknown caller.
 * @example
 * limit: (req) => ((req.user as { plan?: string } | undefined)?.plan === 'pro' ? 1000 : 100)
 */
export type LimitFunction = (req: RequestInfo) => number | Promise<number>;

export type KeyExtractor = (req: RequestInfo) => string | number | undefined | null;
/** A key form: `'ip'`, `'user'`, `'header:<name>'`, `'body.<path>'`, `'query.<name>'`, `'param.<name>'`, a template such as `'sms:{body.phone}'`, a function, or an array of these (composite). */
export type KeySpec = string | KeyExtractor | ReadonlyArray<string | KeyExtractor>;

export type CalendarUnit = 'minute' | 'hour' | 'day' | 'week' | 'month';

export type WindowSpec =
  | { type: 'fixed'; size: Duration }
  | { type: 'calendar'; unit: CalendarUnit; timezone?: string }
  | { type: 'calendar'; cron: string; timezone?: string }
  | { type: 'sliding-log'; size: Duration }
  | { type: 'sliding'; size: Duration; buckets?: number }
  | { type: 'token-bucket'; size: Duration; burst?: number }
  | { type: 'gcra' | 'leaky-bucket'; size: Duration; burst?: number }
  | {
      type: 'concurrency';
      /**
       * How long a slot outlives its holder's process: a process renews the slots it holds (every
       * `lease / 3`), so a slot lapses this long after its holder died without releasing it.
       * At least 1 s. @default '60s'
       */
      lease?: Duration;
    };

/**
 * A window chosen per request (a trial's day is an hour): called synchronously with the request, it returns a
 * window of the rule's type, of which only `size` may differ from request to request (a calendar's `unit`,
 * `cron` and `timezone`). Its type is what it returns for a direct call (`DIRECT_REQUEST`: no user, no
 * headers), asked once when the limiter is built. Every type but concurrency. A
 * key's window keeps the size (the period's end) it started with until it ends (docs/exactness.md). A bad value, a throw or a promise refuses the
 * request with `ERR_WINDOW`; nothing is consumed.
 */
export type WindowFunction = (req: RequestInfo) => WindowSpec;

/** The window types the algorithms implement (defined with them: the math knows nothing of the limiter). */
export type { WindowType } from './stores/store-ops.js';

export interface LockoutSpec {
  /** How long the first lock lasts. */
  duration: Duration;
  /** Each repeated lockout multiplies the duration by this factor. @default 1 */
  escalate?: number;
  /** Cap on an escalated lock. @default no cap */
  maxDuration?: Duration;
  /** The escalation level is forgotten this long after the last lock ends. @default '24h' */
  forgetAfter?: Duration;
}

export interface MatchSpec {
  method?: string | string[];
  path?: string | string[];
}

export type Outcome = 'success' | 'failure';

export interface Rule {
  /** Unique name; used in storage keys, decisions and headers. */
  name: string;
  /** `'POST /login'`, or `{ method, path }`; path-to-regexp syntax. No `match`: every request. */
  match?: string | MatchSpec;
  /** Which identity the rule counts per. */
  key: KeySpec;
  /**
   * Units admitted per window: a positive integer, or a function of the request (per-plan limits, see
   * `LimitFunction`). An override set with `limiter.override` wins over it for its key.
   */
  limit: number | LimitFunction;
  /** The window, or a function of the request choosing one of the rule's type (see `WindowFunction`). */
  window: WindowSpec | WindowFunction;
  /** Units a request costs: a non-negative integer, or a function of the request. @default 1 */
  cost?: number | ((req: RequestInfo) => number);
  /** Which outcomes stay counted. @default 'all' */
  countOn?: 'all' | 'failure' | 'success';
  lockout?: LockoutSpec;
  /**
   * The cost is an estimate, reserved at `check`; `limiter.settle(decision, cost)` replaces it by the
   * actual cost once known (an LLM's tokens, a download's bytes): the difference is added, even past the
   * limit, or given back. Unsettled, the estimate stands. Not for concurrency windows. @default false
   */
  settle?: boolean;
  /** A successful outcome clears the rule's count for that key. @default false */
  resetOnSuccess?: boolean;
  /** `'dry-run'` computes and reports but never denies. @default 'enforce' */
  mode?: 'enforce' | 'dry-run';
  /**
   * Normalize string key material: `true` applies NFKC, trims and lower-cases (for usernames and
   * e-mail addresses); a function does its own. IP keys are always canonical. @default false
   */
  normalize?: boolean | ((value: string) => string);
  /**
   * What a request in which the rule's key finds nothing gets (no user, no such header, query parameter,
   * route param or body field; a key function that returned nothing; every part of a composite key absent):
   * `'skip'` lets it pass this rule uncounted; `'refuse'` refuses the request (`check` rejects with
   * `RateLimitRequestError` `ERR_KEY_MISSING` naming the key form, the HTTP adapters answer 400, and nothing
   * is consumed for any rule), so that a budget cannot vanish with the middleware that sets its key. Left
   * out, it is `'skip'`, and the first such request draws the one-time warning `RATEKEEPER_KEY_MISSING`
   * naming the rule and the key form; an explicit `'skip'` says that such requests are meant to pass, and
   * draws none. @default 'skip'
   */
  missing?: 'skip' | 'refuse';
}

export interface RuleResult {
  rule: string;
  /** The identity string the rule keyed on; the same string `consume`, `record` and `reset` take. */
  key: string;
  allowed: boolean;
  limit: number;
  remaining: number;
  /**
   * Units counted in the rule's window after this decision (token bucket and GCRA: units in use), as
   * `status` reports it. `record` keeps counting past the limit, so its total shows here. 0 while locked.
   */
  count: number;
  /** Ms until the rule is back to full (fixed, calendar) or until one more unit is free (others). */
  resetMs: number;
  /** Denials only: ms until this same request would be admitted. */
  retryAfterMs?: number;
  locked: boolean;
  /** True when the rule is in dry-run mode. */
  dryRun?: boolean;
  /**
   * Rules whose window is a function of the request, or whose key's override sets a window: the window this
   * request was decided on, in whole seconds (the `w` of the `RateLimit-Policy` header); absent for the others.
   */
  windowSeconds?: number;
  /**
   * Concurrency rules: the id of the first slot this decision holds (its `cost` slots are `slot`,
   * `slot + 1`, ...), what `limiter.release` frees; absent when it holds none.
   */
  slot?: number;
  /**
   * Rules whose count waits for the outcome (`countOn`, `resetOnSuccess`) or the actual cost (`settle`):
   * the id of what this decision reserved, what `limiter.report` and `limiter.settle` find it by, so a
   * copy of the decision (structured-cloned, or parsed from JSON) reports and settles it too; absent
   * when it reserved nothing.
   */
  reservation?: number;
}

export interface Decision {
  allowed: boolean;
  limit: number;
  remaining: number;
  /** The `count` of the rule the top-level figures come from (see `RuleResult.count`); 0 when no rule matched. */
  count: number;
  resetMs: number;
  retryAfterMs?: number;
  /** The denying rule, or the most restrictive matching rule when allowed. */
  rule?: string;
  locked: boolean;
  /** True when a dry-run rule would have denied this request. */
  dryRun?: boolean;
  rules: RuleResult[];
}

/**
 * What `limiter.acquire` resolves to: the admitting decision (the same object `check` would give, so
 * `report`, `settle` and `release` know it), with its own `release`.
 */
export interface Acquired extends Decision {
  /**
   * Frees the slots the call holds on its `concurrency` rules, in every process, at once: waiting calls
   * are woken. Idempotent; resolves at once when the rules hold no slot. `limiter.release(decision)` is
   * the same. Not copied by a spread or JSON (a copy is released with `limiter.release`).
   */
  release(): Promise<void>;
}

export interface RuleStatus {
  rule: string;
  key: string;
  /** Units counted in the current window (for token bucket and GCRA: units in use). */
  count: number;
  /** The limit in force for the key: its override, else the rule's (see `LimitFunction` for functions). */
  limit: number;
  remaining: number;
  resetMs: number;
  locked: boolean;
  /** Ms until the lock ends; 0 when not locked. */
  lockRemainingMs: number;
  /** Escalation level: how many lockouts are remembered for this key. */
  level: number;
  /**
   * True when `limit` is an operator's: the key's override (`limiter.override`) or the rule-wide limit
   * (`limiter.setLimit`), or the key's override sets its window (`windowMs`); false when both are the rule's own.
   */
  overridden: boolean;
  /**
   * The window size (ms) the key's override sets (`limiter.override(rule, key, { window })`), from the key's
   * next window on; absent when its override sets none.
   */
  windowMs?: number;
  /**
   * Concurrency rules (`count` is then the requests in flight): the slots held now, oldest first, at
   * most `HOLDERS_LISTED`; absent for other rules and on a store that cannot list them.
   */
  holders?: SlotHolder[];
}

/** A rule-wide limit in force, set with `limiter.setLimit`, as `limiter.limits()` lists it. */
export interface RuleLimit {
  rule: string;
  /** The limit every key of the rule has now, unless the key has an override of its own. */
  limit: number;
  /** Epoch ms (store clock) it ends, set with `for`; absent: until cleared with `setLimit(rule, null)`. */
  untilMs?: number;
}

/** A concurrency slot held now, as `status` lists it. */
export interface SlotHolder {
  /** Ms since the slot was taken (store clock): how long its request has been in flight. */
  ageMs: number;
  /** Ms until its lease ends unless its process renews it (it does, every third of the lease, while held). */
  leaseLeftMs: number;
}

export interface LockInfo {
  rule: string;
  key: string;
  /** Ms until the lock ends. */
  remainingMs: number;
  /** Epoch ms at which the lock ends (store clock). */
  lockedUntil: number;
  level: number;
}
