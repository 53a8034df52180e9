// How every configuration error is built: one shape of message, naming where, the field, the value and what is allowed.
import { type ConfigErrorCode, describe, RateLimitConfigError } from '../errors.js';

/**
 * Throws the `RateLimitConfigError` of a configuration check: `<where>: <problem>`, or the problem
 * alone when there is no where (the rule list itself).
 * @param where what is configured: `'createLimiter'`, `'rule "login"'`, `'wrap'`, `'MemoryStore'`
 * @param problem usually `mustBe(field, allowed, value)`
 * @example
 * refuse('ERR_OPTION', 'wrap', mustBe('signal', 'an AbortSignal', signal));
 * // RateLimitConfigError: wrap: signal must be an AbortSignal, got {}
 */
export function refuse(code: ConfigErrorCode, where: string | undefined, problem: string): never {
  throw refusal(code, where, problem);
}

/** The error `refuse` throws, for a caller that hands it on rather than throwing it (a `ready()` that fails later). */
export function refusal(
  code: ConfigErrorCode,
  where: string | undefined,
  problem: string,
): RateLimitConfigError {
  return new RateLimitConfigError(code, where === undefined ? problem : `${where}: ${problem}`);
}

/** The usual problem: `<field> must be <allowed>, got <value>` (the value described short and printable). */
export function mustBe(field: string, allowed: string, value: unknown): string {
  return `${field} must be ${allowed}, got ${describe(value)}`;
}

/** `refuse(code, where, mustBe(field, allowed, value))` for the fields of one object. */
export type FieldRefusal = (code: ConfigErrorCode, field: string, allowed: string, value: unknown) => never;

/** The `FieldRefusal` of one object, e.g. `refusalIn('rule "login"')`. */
export function refusalIn(where: string): FieldRefusal {
  return (code, field, allowed, value) => refuse(code, where, mustBe(field, allowed, value));
}
