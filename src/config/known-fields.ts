// Strict configuration: every options object refuses a field it does not know, naming the allowed one a typo meant.

import { distance } from 'fastest-levenshtein';
import { describe } from '../errors.js';
import { refuse } from './refuse.js';

/**
 * The field names of an options type, checked by the compiler against the type itself: a field
 * missing from the list, or one the type does not have, fails to compile. So the list cannot drift
 * from the interface it guards.
 * @example
 * const LIMITER_FIELDS = fieldsOf<LimiterOptions>({ store: true, rules: true, ... });
 */
export function fieldsOf<T>(fields: { readonly [K in keyof Required<T> & string]: true }): readonly string[] {
  return Object.keys(fields);
}

/**
 * Refuses an unknown field: throws `RateLimitConfigError` with code `ERR_UNKNOWN_FIELD`, naming the
 * object, the field and its value, and "did you mean 'x'?" when one allowed name is close (a typo,
 * another case, or a longer name built around it such as `standardHeaders` for `headers`). A typo
 * in an optional field would otherwise turn a protection off without a word.
 *
 * Only own enumerable string keys are checked; a value that is not a plain object (null, an array, a
 * number) passes: its owner checks its type.
 *
 * @param value the options object as the user gave it
 * @param allowed the names it may have
 * @param where what the message starts with: `'createLimiter'`, `'rule "login"'`, `'MemoryStore'`
 * @param path where the object sits inside `where`, prefixed to the field names: `'window'` names
 *   `window.burts`
 * @example
 * assertKnownFields(options, MEMORY_STORE_FIELDS, 'MemoryStore');
 * // RateLimitConfigError: MemoryStore: unknown field 'maxkeys' (got 10), did you mean 'maxKeys'?
 */
export function assertKnownFields(
  value: unknown,
  allowed: readonly string[],
  where: string,
  path?: string,
): void {
  if (value === null || typeof value !== 'object' || Array.isArray(value)) return;
  for (const field in value) {
    if (!Object.hasOwn(value, field) || allowed.includes(field)) continue;
    const name = (f: string) => `'${path === undefined ? f : `${path}.${f}`}'`;
    const got = describe((value as Record<string, unknown>)[field]);
    const close = closestName(field, allowed);
    const hint =
      close === undefined ? `; allowed: ${allowed.map(name).join(', ')}` : `, did you mean ${name(close)}?`;
    refuse('ERR_UNKNOWN_FIELD', where, `unknown field ${name(field)} (got ${got})${hint}`);
  }
}

/**
 * The one allowed name `field` most likely meant, or undefined when none is close or two are equally
 * close. Compared without case: first by edit distance (up to 2 edits, a quarter of the name for long
 * ones: 'onStoreErr' is 2 from 'onStoreError'), then as a longer name built around exactly one allowed
 * name of 4 letters or more ('standardHeaders' around 'headers').
 */
export function closestName(field: string, allowed: readonly string[]): string | undefined {
  const typed = field.toLowerCase();
  const most = Math.max(2, Math.floor(typed.length / 4));
  let best: string | undefined;
  let bestDistance = most + 1;
  let tied = false;
  for (const name of allowed) {
    const d = distance(typed, name.toLowerCase());
    if (d < bestDistance) {
      best = name;
      bestDistance = d;
      tied = false;
    } else if (d === bestDistance) tied = true;
  }
  if (best !== undefined) return tied ? undefined : best;
  const around = allowed.filter((name) => name.length >= 4 && typed.includes(name.toLowerCase()));
  return around.length === 1 ? around[0] : undefined;
}
