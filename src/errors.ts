// Errors the library throws: configuration errors at construction, request errors at decision time.
import type { Decision } from './types.js';

/** Stable codes of `RateLimitConfigError`. */
export type ConfigErrorCode =
  | 'ERR_RULES'
  | 'ERR_RULE_NAME'
  | 'ERR_DUPLICATE_RULE'
  | 'ERR_LIMIT'
  | 'ERR_WINDOW'
  | 'ERR_DURATION'
  | 'ERR_CRON'
  | 'ERR_TIMEZONE'
  | 'ERR_KEY'
  | 'ERR_MATCH'
  | 'ERR_COST'
  | 'ERR_LOCKOUT'
  | 'ERR_OPTION'
  | 'ERR_UNKNOWN_FIELD'
  | 'ERR_UNKNOWN_RULE';

/** Thrown once, at construction (or when a method names a rule that does not exist). */
export class RateLimitConfigError extends Error {
  override readonly name = 'RateLimitConfigError';
  readonly code: ConfigErrorCode;

  constructor(code: ConfigErrorCode, message: string) {
    super(message);
    this.code = code;
  }
}

export type RequestErrorCode =
  | 'ERR_COST'
  | 'ERR_KEY_FUNCTION'
  | 'ERR_KEY'
  | 'ERR_KEY_VALUE'
  | 'ERR_KEY_MISSING'
  | 'ERR_LIMIT'
  | 'ERR_WINDOW'
  | 'ERR_QUEUE_FULL'
  | 'ERR_DELAY'
  | 'ERR_CONTEXT'
  | 'ERR_REQUEST';

/**
 * Thrown at request time when a request cannot be decided (a bad cost or limit, a key function that threw,
 * an object or array where a rule reads a key: `ERR_KEY_VALUE`; no key at all for a rule with
 * `missing: 'refuse'`: `ERR_KEY_MISSING`; the HTTP adapters answer both with 400). Nothing is consumed.
 */
export class RateLimitRequestError extends Error {
  override readonly name = 'RateLimitRequestError';
  readonly code: RequestErrorCode;
  /**
   * `ERR_KEY_VALUE`: the key form whose value was refused (`'body.username'`, `'query.user'`);
   * `ERR_KEY_MISSING`: the key form that found nothing (`'user'`, `'header:x-api-key'`, `'user, param.org'`
   * for a composite key); absent for a key function. `ERR_REQUEST`: the request field that is missing
   * (`'method'`, `'path'`).
   */
  readonly field?: string;

  constructor(code: RequestErrorCode, message: string, options?: { cause?: unknown; field?: string }) {
    super(message, options !== undefined && 'cause' in options ? { cause: options.cause } : undefined);
    this.code = code;
    if (options?.field !== undefined) this.field = options.field;
  }
}

/**
 * A call that was not admitted: thrown by functions made with `limiter.wrap` and `@limited` (the
 * wrapped function is not called), and by `limiter.acquire` when its turn is later than `maxWait`.
 * HTTP adapters never throw it: a denied request is a 429.
 */
export class RateLimitExceededError extends Error {
  override readonly name = 'RateLimitExceededError';
  readonly code = 'ERR_RATE_LIMITED';
  /** The decision that denied the call (its `rule`, `limit`, `rules`...). */
  readonly decision: Decision;
  /** Ms until the same call would be admitted. */
  readonly retryAfterMs: number;

  /** `retryAfterMs`: when the call could be admitted later than the decision says (a queue ahead of it). */
  constructor(decision: Decision, retryAfterMs = decision.retryAfterMs ?? 0) {
    const key = decision.rules.find((r) => r.rule === decision.rule)?.key;
    super(
      `rate limited by rule "${decision.rule}" for key ${describe(key)}${decision.locked ? ' (locked)' : ''}: retry in ${retryAfterMs} ms`,
    );
    this.decision = decision;
    this.retryAfterMs = retryAfterMs;
  }
}

/** A store did not answer in time (`storeTimeout`). */
export class StoreTimeoutError extends Error {
  override readonly name = 'StoreTimeoutError';
  readonly code = 'ERR_STORE_TIMEOUT';
}

/** Formats a received value for an error message, short and printable. */
export function describe(value: unknown): string {
  if (typeof value === 'string') return `'${value.length > 60 ? `${value.slice(0, 60)}…` : value}'`;
  if (typeof value === 'number' || typeof value === 'boolean' || value == null) return String(value);
  if (typeof value === 'function') return 'a function';
  if (Array.isArray(value)) return 'an array';
  try {
    const json = JSON.stringify(value);
    return json.length > 60 ? `${json.slice(0, 60)}…` : json;
  } catch {
    return typeof value;
  }
}

/** A Redis error reply starts with its code in capitals: "WRONGPASS invalid username-password pair". */
const REPLY_CODE = /^([A-Z][A-Z0-9_]{1,31})(?: |$)/;

/** The code of a store fault: `error.code` when it is a string, else the leading code of a Redis reply. */
export function errorCode(error: unknown): string | undefined {
  const code = (error as { code?: unknown } | null)?.code;
  if (typeof code === 'string' && code !== '') return code;
  const message = (error as { message?: unknown } | null)?.message;
  return typeof message === 'string' ? REPLY_CODE.exec(message)?.[1] : undefined;
}
