// ratekeeper: the public entry point.

export type { ConfigErrorCode, RequestErrorCode } from './errors.js';
export { RateLimitConfigError, RateLimitRequestError, StoreTimeoutError } from './errors.js';
export type { HeaderOptions, HeadersMode, ResetFormat } from './headers.js';
export { formatHeaders } from './headers.js';
export { ipKey } from './ip.js';
export { normalizeIdentity } from './keys.js';
export type {
  LimitedEvent,
  LimiterEvents,
  LimiterOptions,
  LockoutEvent,
  StoreErrorEvent,
  UnlockEvent,
} from './limiter.js';
export { createLimiter, Limiter } from './limiter.js';
export type { LoginRulesOptions, VerificationCodeRulesOptions } from './recipes/index.js';
export {
  LOGIN_DEFAULTS,
  loginRules,
  normalizeDestination,
  VERIFICATION_CODE_DEFAULTS,
  verificationCodeRules,
} from './recipes/index.js';
export type { MemoryStoreOptions } from './stores/memory-store.js';
export { MEMORY_STORE_FULL_WARNING, MemoryStore } from './stores/memory-store.js';
export type { RedisStoreOptions } from './stores/redis-store.js';
export { RedisStore } from './stores/redis-store.js';
export type {
  EvalMode,
  EvalResult,
  OpResult,
  Refund,
  Store,
  StoreLockout,
  StoreOp,
  StoreRule,
} from './stores/store.js';
export type * from './types.js';
