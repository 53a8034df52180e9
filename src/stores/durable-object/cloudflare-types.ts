// The few Cloudflare Workers types the Durable Object store uses, written here so that the package needs no
// @cloudflare/workers-types: the runtime's own types (a user's `env.RATE_LIMITER`) fit these structurally.

/** A Durable Object namespace binding (`env.RATE_LIMITER`): names to ids, ids to stubs. */
export interface DurableObjectNamespaceLike<Id = unknown> {
  idFromName(name: string): Id;
  get(id: Id): DurableObjectStubLike;
}

/** A stub of one object: its `fetch` reaches the object's `fetch` handler (one object request). */
export interface DurableObjectStubLike {
  fetch(request: Request): Promise<Response>;
}

/** The object's storage, the key-value API (SQLite-backed objects have it too). */
export interface DurableObjectStorageLike {
  list<T = unknown>(options?: { prefix?: string }): Promise<Map<string, T>>;
  put(entries: Record<string, unknown>): Promise<void>;
  delete(keys: string[]): Promise<number>;
  deleteAll(): Promise<void>;
  getAlarm(): Promise<number | null>;
  setAlarm(scheduledTime: number): Promise<void>;
}

/** What the runtime hands a Durable Object's constructor first (`ctx`). */
export interface DurableObjectStateLike {
  readonly storage: DurableObjectStorageLike;
  blockConcurrencyWhile<T>(callback: () => Promise<T>): Promise<T>;
}
