// ratekeeper: the public entry point.

export { limited } from './calls/limited.js';
export type {
  AcquireOptions,
  KeyOverride,
  OverrideOptions,
  WaitOptions,
  WrapOptions,
} from './calls/options.js';
export type { ConfigErrorCode, RequestErrorCode } from './errors.js';
export {
  RateLimitConfigError,
  RateLimitExceededError,
  RateLimitRequestError,
  StoreTimeoutError,
} from './errors.js';
export type { HeaderOptions, HeadersMode, QuotaUnit, ResetFormat } from './headers.js';
export { CONCURRENCY_RETRY_SECONDS, formatHeaders } from './headers.js';
export {
  MAX_KEY_LENGTH,
  normalizeIdentity,
  OVERSIZED_KEY,
  UNPARSED_BODY_KEY,
  UNRESOLVED_IP_KEY,
  userKey,
} from './keys/extractors.js';
export { ipKey } from './keys/ip.js';
export type {
  LimitedEvent,
  LimiterEvents,
  LockoutEvent,
  StoreErrorEvent,
  UnlockEvent,
} from './limiter/events.js';
export type { StoreHealth } from './limiter/failure-policy.js';
export { createLimiter, Limiter } from './limiter/limiter.js';
export type {
  DecisionInfo,
  DecisionSource,
  LimitChangeEvent,
  LimiterObserver,
  SlotEvent,
  StoreCallInfo,
} from './limiter/observers.js';
export type { LimiterOptions } from './limiter/options.js';
export type {
  DecisionCountsFeed,
  DecisionCountsMessage,
  FeedPublisher,
  PublishDecisionCountsOptions,
} from './operators/decision-feed.js';
export { decisionChannel, publishDecisionCounts } from './operators/decision-feed.js';
export type { LoginRulesOptions, VerificationCodeRulesOptions } from './recipes/index.js';
export {
  LOGIN_DEFAULTS,
  loginRules,
  normalizeDestination,
  VERIFICATION_CODE_DEFAULTS,
  verificationCodeRules,
} from './recipes/index.js';
export type { RuleFacts } from './rules/facts.js';
export { DIRECT_REQUEST } from './rules/rule-index.js';
export type { LeasingOptions } from './stores/leasing/leasing-options.js';
export type { MemoryStoreOptions } from './stores/memory/memory-store.js';
export { MemoryStore } from './stores/memory/memory-store.js';
export type { PostgresPool, PostgresStoreOptions } from './stores/postgres/postgres-store.js';
export { PostgresStore } from './stores/postgres/postgres-store.js';
export type { RedisStoreOptions } from './stores/redis/redis-store.js';
export { RedisStore } from './stores/redis/redis-store.js';
export type {
  ConnectionLiveness,
  EvalMode,
  EvalResult,
  HeldSlot,
  OpResult,
  Refund,
  Store,
  StoreChange,
  StoreChangeListener,
  StoreLiveness,
  StoreLockout,
  StoreOp,
  StoreRule,
  SyncStore,
} from './stores/store.js';
export type * from './types.js';
export {
  FUNCTION_CONFLICT_WARNING,
  KEY_MISSING_WARNING,
  MEMORY_STORE_FULL_WARNING,
  OBSERVER_ERROR_WARNING,
  REDIRECT_OUTCOME_WARNING,
  SPOOFABLE_IP_WARNING,
  UNMATCHED_ROUTE_WARNING,
  UNPARSED_BODY_WARNING,
  UNRESOLVED_IP_WARNING,
  UNTRUSTED_FORWARDED_WARNING,
} from './warnings.js';
