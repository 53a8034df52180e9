// ratekeeper: the public entry point.
export { RateLimitConfigError, RateLimitRequestError, StoreTimeoutError } from './errors.js';
export type { ConfigErrorCode, RequestErrorCode } from './errors.js';
export { formatHeaders } from './headers.js';
export type { HeaderOptions, HeadersMode, ResetFormat } from './headers.js';
export { ipKey } from './ip.js';
export { normalizeIdentity } from './keys.js';
export { createLimiter, Limiter } from './limiter.js';
export type { LimitedEvent, LimiterOptions, LockoutEvent, StoreErrorEvent, UnlockEvent } from './limiter.js';
export { MemoryStore } from './stores/memory-store.js';
export type { MemoryStoreOptions } from './stores/memory-store.js';
// REDIS export { RedisStore } from './stores/redis-store.js';
// REDIS export type { RedisStoreOptions } from './stores/redis-store.js';
export type { EvalMode, EvalResult, OpResult, Refund, Store, StoreLockout, StoreOp, StoreRule } from './stores/store.js';
export type * from './types.js';
