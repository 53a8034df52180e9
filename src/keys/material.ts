// Key material from a request, made safe before any work is done on it: bounded in length, normalized in
// linear time and once per request, and digested when long. Also the identities reserved for requests
// whose material cannot key them alone.
import { createHash } from 'node:crypto';

/**
 * Longest key material (UTF-16 code units) a rule normalizes or digests. A longer value (a 100 kB
 * username, a huge header) is never looked at further: every such request of a rule shares the key
 * `OVERSIZED_KEY`, so its cost is bounded and padding a name past the bound gains no fresh budget.
 */
export const MAX_KEY_LENGTH = 8192;

/** The identity shared by the requests whose key material is longer than `MAX_KEY_LENGTH`. */
export const OVERSIZED_KEY = '#oversized';

/**
 * The identity an `'ip'` key takes when the client address cannot be resolved (no address: the client
 * reset the connection, or the server listens on a Unix socket; or it is no IP address, such as a
 * trusted proxy's `unknown`). Such requests share this one bucket per rule: the rule still applies.
 */
export const UNRESOLVED_IP_KEY = '#unresolved-ip';

/**
 * The identity of a key whose material is present but is neither a string nor a finite number: an array
 * (`{"username": ["alice"]}`, `?user=a&user=b`), an object (`{"$ne": ""}`), a boolean or a null. A handler
 * may still coerce such a value into a name (`String(["alice"])` is `'alice'`), so the rule is never
 * skipped: every such request of a rule shares this one bucket, and all of them together get `limit`.
 */
export const NON_SCALAR_KEY = '#non-scalar';

/**
 * The identity of a `body.*` key when the request carries a body that nothing parsed (no parser for its
 * content type, or one placed after the rate limiter). The handler may read it all the same, so such
 * requests share this one bucket per rule, with a one-time warning, instead of escaping the rule.
 */
export const UNPARSED_BODY_KEY = '#unparsed-body';

/** Identities longer than this are replaced by a digest, so a long username costs 44 bytes of state. */
export const MAX_IDENTITY_LENGTH = 256;

const DIGEST = /^#[\w-]{43}$/;
const RESERVED: ReadonlySet<string> = new Set([
  OVERSIZED_KEY,
  UNRESOLVED_IP_KEY,
  NON_SCALAR_KEY,
  UNPARSED_BODY_KEY,
]);

/**
 * Bounds an identity's length: long identities become `#` + a SHA-256 digest (base64url) of their UTF-16
 * code units (so lone surrogates cannot collide). Any other identity starting with `#` is digested too,
 * except a digest or a reserved identity: bounding is idempotent, so a key extractor may bound and the
 * core bound again.
 */
export function boundIdentity(identity: string): string {
  if (
    identity.charCodeAt(0) !== 35
      ? identity.length <= MAX_IDENTITY_LENGTH
      : DIGEST.test(identity) || RESERVED.has(identity)
  )
    return identity;
  return `#${createHash('sha256').update(identity, 'utf16le').digest('base64url')}`;
}

/** A run of more than 30 combining marks: no text needs one (UAX #15, Stream-Safe Text Format). */
const LONG_MARK_RUN = /(\p{M}{30})(?=\p{M})/gu;

/**
 * NFKC in linear time. ICU reorders a run of combining marks by insertion sort, so NFKC over 100,000
 * marks of alternating classes takes seconds; UAX #15's stream-safe step (a U+034F after every 30
 * marks) bounds every run first. Text with no run over 30 marks, which is all real text, normalizes
 * exactly as `value.normalize('NFKC')`.
 */
export function nfkc(value: string): string {
  return value.length <= 30
    ? value.normalize('NFKC')
    : value.replace(LONG_MARK_RUN, '$1\u034F').normalize('NFKC');
}

/** NFKC (in linear time), trimmed, lower-cased: `' ＡＬＩＣＥ '` and `'alice'` share a bucket. */
export function normalizeIdentity(value: string): string {
  return nfkc(value).trim().toLowerCase();
}

export type Normalizer = (value: string) => string;

const memos = new WeakMap<Normalizer, Normalizer>();

/**
 * The normalizer with its last answer remembered: the rules of one request that key on one field
 * (the login recipe's pair, account and cap) normalize it once. A normalizer must be a pure function.
 */
export function memoized(normalize: Normalizer): Normalizer {
  let memo = memos.get(normalize);
  if (memo === undefined) {
    let lastIn: string | undefined;
    let lastOut = '';
    memo = (value) => {
      if (value !== lastIn) {
        lastOut = normalize(value);
        lastIn = value;
      }
      return lastOut;
    };
    memos.set(normalize, memo);
  }
  return memo;
}
