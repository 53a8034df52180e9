// The identity of a key given directly (`consume`, `status`, `acquire`, a wrapped call's key), rather than
// read from a request by a rule's key form.
import { describe, RateLimitRequestError } from '../errors.js';
import { boundIdentity } from './extractors.js';

/** The identity string of a key given directly: a non-empty string or a finite number, bounded in length. */
export function identityOf(key: unknown): string {
  if (typeof key === 'number' && Number.isFinite(key)) return String(key);
  if (typeof key !== 'string' || key === '') {
    throw new RateLimitRequestError('ERR_KEY', `key must be a non-empty string, got ${describe(key)}`);
  }
  return boundIdentity(key);
}
