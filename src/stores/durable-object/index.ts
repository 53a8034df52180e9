// ratekeeper/cloudflare: the exact store on Cloudflare Workers, and the Durable Object class it keeps its counts in.
export type { DurableObjectNamespaceLike, DurableObjectStateLike } from './cloudflare-types.js';
export { DurableObjectStore, type DurableObjectStoreOptions } from './durable-object-store.js';
export { RateLimitObject } from './rate-limit-object.js';
