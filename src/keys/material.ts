// Key material from a request, made safe before any work is done on it: bounded in length, normalized in
// linear time and once per request, and turned into an identity that no other material shares. Also the
// reserved keys: identities reserved for requests whose material cannot key them alone.
import { digest } from '../digest.js';

/**
 * Longest key material (UTF-16 code units) a rule normalizes or digests. A longer value (a 100 kB
 * username, a huge header) is never looked at further: every such request of a rule shares the key
 * `OVERSIZED_KEY`, so its cost is bounded and padding a name past the bound gains no fresh budget.
 */
export const MAX_KEY_LENGTH = 8192;

/** Identities longer than this are replaced by a digest, so a long username costs 44 bytes of state. */
export const MAX_IDENTITY_LENGTH = 256;

/**
 * A key that no request value can produce, standing in for material that cannot key a request alone: one of
 * `OVERSIZED`, `UNRESOLVED_IP`, `UNPARSED_BODY` (`'#unresolved-ip'`), or a composite or template key with one
 * of those among its parts. Only this module and the extractors make them; a key function may hand one on (the login recipe does), but cannot forge one.
 */
export class ReservedKey {
  /** The reserved key's text, as it reads inside a composite or template key (`'#unresolved-ip'`). */
  readonly text: string;
  /** The identity it counts on. */
  readonly identity: string;

  private constructor(text: string, identity: string) {
    this.text = text;
    this.identity = identity;
  }

  /** One of the three reserved keys: its identity is its text, a form no user value takes (see `userKey`). */
  static named(text: `#${string}`): ReservedKey {
    return new ReservedKey(text, text);
  }

  /** A composite or template key assembled with a reserved key among its parts. */
  static assembled(text: string): ReservedKey {
    return new ReservedKey(text, userKey(text));
  }
}

/** The identity shared by the requests whose key material is longer than `MAX_KEY_LENGTH`. */
export const OVERSIZED_KEY = '#oversized';

/**
 * The identity an `'ip'` key takes when the client address cannot be resolved (no address: the client
 * reset the connection, or the server listens on a Unix socket; or it is no IP address, such as a
 * trusted proxy's `unknown`). Such requests share this one bucket per rule: the rule still applies.
 */
export const UNRESOLVED_IP_KEY = '#unresolved-ip';

/**
 * The identity of a `body.*` key when the request carries a body that nothing parsed (no parser for its
 * content type, or one placed after the rate limiter). The handler may read it all the same, so such
 * requests share this one bucket per rule, with a one-time warning, instead of escaping the rule.
 */
export const UNPARSED_BODY_KEY = '#unparsed-body';

export const OVERSIZED = ReservedKey.named(OVERSIZED_KEY);
export const UNRESOLVED_IP = ReservedKey.named(UNRESOLVED_IP_KEY);
export const UNPARSED_BODY = ReservedKey.named(UNPARSED_BODY_KEY);

/** What a key form reads from a request: the user's text (normalized), or a reserved key. */
export type Material = string | ReservedKey;

/** A lone surrogate: UTF-8 (Redis, pub/sub) would turn every one into U+FFFD. */
const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;

/**
 * An identity as it is stored: itself when it is at most `MAX_IDENTITY_LENGTH` long and well-formed
 * Unicode; otherwise its digest, so a long name costs 44 bytes and no two strings that UTF-8 would make
 * equal (`'bob\ud800'`, `'bob\ud801'`) share a key anywhere. Idempotent: the keys `consume`, `status` and
 * `reset` take are the identities decisions show.
 */
export function boundIdentity(identity: string): string {
  return identity.length <= MAX_IDENTITY_LENGTH && !LONE_SURROGATE.test(identity)
    ? identity
    : digest(identity);
}

/**
 * The key a rule counts a user's text on (after the rule's `normalize`): the text with one more `#` in front
 * when it starts with `#`, then bounded (`boundIdentity`). Reserved keys and digests are `#` and a letter, digit,
 * `-` or `_`; a user's text never takes that form, so an account named `#OVERSIZED` keys as `##oversized`,
 * apart from the reserved key. The key `status`, `reset` and `override` take for that text.
 * @example userKey('alice')  // 'alice'
 * @example userKey('#alice') // '##alice'
 * @example limiter.reset('login-account-cap', userKey(normalizeIdentity(username)))
 */
export function userKey(text: string): string {
  return boundIdentity(text.charCodeAt(0) === 35 ? `#${text}` : text);
}

/** The identity of what a key form read. */
export function identityOf(material: Material): string {
  return typeof material === 'string' ? userKey(material) : material.identity;
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
