// Key extraction: turns a rule's key form into a function from a request to an identity string (the 'ip'
// form's own, per request, in ip.ts).

import { RateLimitRequestError } from '../errors.js';
import type { KeyExtractor, KeySpec, RequestInfo } from '../types.js';
import { UNPARSED_BODY_WARNING, warnOnce } from '../warnings.js';
import { ipIdentity, ipReader } from './ip.js';
import {
  identityOf,
  MAX_KEY_LENGTH,
  type Material,
  memoized,
  type Normalizer,
  OVERSIZED,
  ReservedKey,
  UNPARSED_BODY,
  UNPARSED_BODY_KEY,
} from './material.js';

export {
  boundIdentity,
  MAX_IDENTITY_LENGTH,
  MAX_KEY_LENGTH,
  normalizeIdentity,
  OVERSIZED_KEY,
  UNPARSED_BODY_KEY,
  UNRESOLVED_IP_KEY,
  userKey,
} from './material.js';

/** Returns the identity for a request, or undefined when the rule does not apply to it. */
export type Extractor = (req: RequestInfo) => string | undefined;

/**
 * Returns what a key form reads from a request: the user's text (normalized; a composite's or a template's
 * parts joined, escaped), a `ReservedKey`, or undefined when the rule does not apply to it.
 */
export type Reader = (req: RequestInfo) => Material | undefined;

export interface KeyOptions {
  ipv6Subnet: number;
  normalize: Normalizer | undefined;
  /** The rule's name, for its warnings and errors. */
  rule?: string | undefined;
}

/**
 * Builds the extractor for a key form; throws an Error (with the reason) for an unknown form. The extractor
 * throws `RateLimitRequestError` (`ERR_KEY_VALUE`, naming the field) for an object or an array where the
 * form reads a key.
 */
export function createExtractor(spec: KeySpec, options: KeyOptions): Extractor {
  if (spec === 'ip') return ipIdentity(options.ipv6Subnet, ruleLabel(options.rule));
  const read = createReader(spec, options);
  return (req) => {
    const material = read(req);
    return material === undefined ? undefined : identityOf(material);
  };
}

/** Builds the reader of a key form: what `createExtractor` turns into an identity. */
export function createReader(spec: KeySpec, options: KeyOptions): Reader {
  return Array.isArray(spec) ? composite(spec, options) : single(spec as string | KeyExtractor, options);
}

/**
 * A composite key: its parts joined by `|`, each escaped (`%`, `|`, and a leading `#` of a user's text).
 * An absent part is an empty part: the rule applies while any part is present, so `tenant: null` still
 * counts per username, and no part's value can shift into another's.
 */
function composite(spec: ReadonlyArray<string | KeyExtractor>, options: KeyOptions): Reader {
  if (spec.length === 0) throw new Error('a composite key needs at least one part');
  const parts = spec.map((part) => single(part, options));
  return (req) => {
    let out = '';
    let present = false;
    let reserved = false;
    for (let i = 0; i < parts.length; i++) {
      if (i > 0) out += '|';
      const value = (parts[i] as Reader)(req);
      if (value === undefined) continue;
      present = true;
      if (typeof value === 'string') out += escapePart(value, true);
      else {
        reserved = true;
        out += escapePart(value.text, false);
      }
    }
    if (!present) return undefined;
    return reserved ? ReservedKey.assembled(out) : out;
  };
}

function single(spec: string | KeyExtractor, options: KeyOptions): Reader {
  if (typeof spec === 'function') return fromFunction(spec, options);
  if (typeof spec !== 'string' || spec === '')
    throw new Error('a key form must be a non-empty string or a function');
  if (spec.includes('{')) return template(spec, options);
  return field(spec, options);
}

function field(spec: string, options: KeyOptions): Reader {
  if (spec === 'ip') return ipReader(options.ipv6Subnet, ruleLabel(options.rule));
  const text = material(options.normalize, spec, options.rule);
  if (spec === 'user') {
    return (req) => {
      const user = req.user;
      // No user (or a user without an id) is an anonymous request: the rule does not apply.
      return text(user !== null && typeof user === 'object' ? ownValue(user, 'id') : user);
    };
  }
  if (spec.startsWith('header:')) {
    const name = spec.slice(7).toLowerCase();
    if (!/^[!#$%&'*+.^_`|~0-9a-z-]+$/.test(name)) throw new Error(`'${spec}' does not name a valid header`);
    return (req) => {
      const value = ownValue(req.headers, name);
      // Node joins repeated headers with ', '; an array (set by a framework) is joined the same way.
      return text(Array.isArray(value) ? value.join(', ') : value);
    };
  }
  for (const [prefix, source] of SOURCES) {
    if (!spec.startsWith(prefix)) continue;
    const path = spec.slice(prefix.length).split('.');
    if (path.some((p) => p === '')) throw new Error(`'${spec}' has an empty path segment`);
    if (prefix !== 'body.' && path.length !== 1) throw new Error(`'${spec}' must name one field`);
    const unparsed = prefix === 'body.' ? unparsedBody(spec, options.rule) : undefined;
    return (req) => {
      let value: unknown = source(req);
      if (
        unparsed !== undefined &&
        (value === null || typeof value !== 'object' || value instanceof Uint8Array)
      )
        return unparsed(req, value);
      for (const segment of path) value = ownValue(value, segment);
      return text(value);
    };
  }
  throw new Error(
    `unknown key form '${spec}': use 'ip', 'user', 'header:<name>', 'body.<path>', 'query.<name>', 'param.<name>', a template such as 'sms:{body.phone}', a function, or an array of these`,
  );
}

/**
 * Request material to key text. Absent (the rule does not apply): undefined, `null`, `''`, or text that
 * normalizes to `''`. Strings, finite numbers, booleans (and bigints) key as their text; a text longer than
 * `MAX_KEY_LENGTH` is `OVERSIZED` before any work is done on it; then the normalizer, at most once per value
 * per request (memoized). Anything else (an array, an object such as `{"$ne": ""}`, NaN) is refused with
 * `RateLimitRequestError` `ERR_KEY_VALUE` naming `field`: a handler might coerce it into a name
 * (`String(["alice"])` is `'alice'`), so it may neither skip the rule nor share a key with other requests.
 */
function material(
  normalize: Normalizer | undefined,
  field: string | undefined,
  rule: string | undefined,
): (value: unknown) => Material | undefined {
  const norm = normalize === undefined ? undefined : memoized(normalize);
  return (value) => {
    if (value === undefined || value === null || value === '') return undefined;
    let s: string;
    if (typeof value === 'string') s = value;
    else if (
      (typeof value === 'number' && Number.isFinite(value)) ||
      typeof value === 'boolean' ||
      typeof value === 'bigint'
    )
      s = String(value);
    else throw refusedValue(field, value, rule);
    if (s.length > MAX_KEY_LENGTH) return OVERSIZED;
    const out = norm === undefined ? s : norm(s);
    return out === '' ? undefined : out;
  };
}

/** The error for a value no key can be made of: an object, an array, a number that is not finite. */
function refusedValue(
  field: string | undefined,
  value: unknown,
  rule: string | undefined,
): RateLimitRequestError {
  const kind = Array.isArray(value)
    ? 'an array'
    : typeof value === 'number'
      ? String(value)
      : typeof value === 'object'
        ? 'an object'
        : `a ${typeof value}`;
  const what = field === undefined ? 'the key function returned' : `${field} is`;
  return new RateLimitRequestError(
    'ERR_KEY_VALUE',
    `${ruleLabel(rule)}${what} ${kind}, where a key must be a string, a number or a boolean; nothing was consumed`,
    field === undefined ? {} : { field },
  );
}

/**
 * A `body.*` key for a request whose body is not a parsed object: none when it carries no body (the rule
 * does not apply), else `UNPARSED_BODY`, with a one-time warning.
 */
function unparsedBody(
  spec: string,
  rule: string | undefined,
): (req: RequestInfo, body: unknown) => ReservedKey | undefined {
  const warn = warnOnce(UNPARSED_BODY_WARNING);
  return (req, body) => {
    const headers = req.headers;
    const length = ownValue(headers, 'content-length');
    const carries =
      (typeof length === 'string' && length !== '0') || ownValue(headers, 'transfer-encoding') !== undefined;
    if (body === undefined && !carries) return undefined;
    const seen =
      body === undefined
        ? 'body was not parsed'
        : `body is ${body instanceof Uint8Array ? 'raw bytes' : body === null ? 'null' : `a ${typeof body}`}, not a parsed object`;
    warn(
      `${ruleLabel(rule)}keys on '${spec}', but a request reached it whose ${seen}, so the rule counted it on the key '${UNPARSED_BODY_KEY}', which every such request shares: put a body parser (express.json(), @koa/bodyparser) before the rate limiter, for each content type clients send`,
    );
    return UNPARSED_BODY;
  };
}

function ruleLabel(rule: string | undefined): string {
  return rule === undefined ? '' : `rule "${rule}": `;
}

const SOURCES: ReadonlyArray<readonly [string, (req: RequestInfo) => unknown]> = [
  ['body.', (req) => req.body],
  ['query.', (req) => req.query],
  ['param.', (req) => req.params],
];

/**
 * A template such as `'sms:{body.phone}'`. With one placeholder its value is used as it is (a leading `#`
 * doubled, apart from the reserved keys); an absent value: the rule does not apply. With several, each value is
 * escaped for the template's own characters (and a leading `#`), and an absent value is an empty one, as in
 * a composite key: the rule applies while any is present.
 */
function template(spec: string, options: KeyOptions): Reader {
  const pieces: Array<string | Reader> = [];
  const re = /\{([^{}]+)\}/g;
  let last = 0;
  for (let m = re.exec(spec); m !== null; m = re.exec(spec)) {
    if (m.index > last) pieces.push(spec.slice(last, m.index));
    pieces.push(field(m[1] as string, options));
    last = m.index + m[0].length;
  }
  if (last < spec.length) pieces.push(spec.slice(last));
  if (pieces.some((p) => typeof p === 'string' && /[{}]/.test(p)))
    throw new Error(`'${spec}' has unbalanced braces`);
  // Values are escaped for the template's separators, so a separator found in the output is one of the
  // template's own; a gap with none ('{body.org}{body.user}', '{body.a}x{body.b}') would let ('ab', 'c')
  // and ('a', 'bc') share a counter.
  let gap: string | undefined;
  for (const piece of pieces) {
    if (typeof piece === 'string') gap = gap === undefined ? undefined : gap + piece;
    else {
      if (gap !== undefined && !/[^\p{L}\p{N}]/u.test(gap)) {
        throw new Error(
          `'${spec}' has two placeholders with no separator between them other than letters or digits, so ('ab', 'c') and ('a', 'bc') would share a counter: put a character such as ':' between them, or use an array of key forms`,
        );
      }
      gap = '';
    }
  }
  const placeholders = pieces.filter((p) => typeof p !== 'string').length;
  const literal = new Set(
    `${pieces.filter((p): p is string => typeof p === 'string').join('')}%`.replace(/[\p{L}\p{N}]/gu, ''),
  );
  // A user's value never starts with a bare '#', which only a reserved key's does.
  const escapeValue =
    placeholders < 2
      ? (value: string): string => (value.charCodeAt(0) === 35 ? `#${value}` : value)
      : (value: string): string =>
          Array.from(value, (c, i) => (literal.has(c) || (i === 0 && c === '#') ? escapeChar(c) : c)).join(
            '',
          );
  return (req) => {
    let out = '';
    let present = false;
    let reserved = false;
    for (const piece of pieces) {
      if (typeof piece === 'string') out += piece;
      else {
        const value = piece(req);
        if (value === undefined) {
          if (placeholders < 2) return undefined;
          continue;
        }
        present = true;
        if (typeof value === 'string') out += escapeValue(value);
        else {
          reserved = true;
          out += value.text;
        }
      }
    }
    if (!present) return undefined;
    return reserved ? ReservedKey.assembled(out) : out;
  };
}

/** A key function's value, as any request material; a `ReservedKey` it hands on (the login recipe's) stays one. */
function fromFunction(fn: KeyExtractor, options: KeyOptions): Reader {
  const text = material(options.normalize, undefined, options.rule);
  return (req) => {
    const value: unknown = fn(req);
    return value instanceof ReservedKey ? value : text(value);
  };
}

/** Own enumerable data only, so `__proto__` or `constructor` in a body never reaches a prototype. */
function ownValue(source: unknown, name: string): unknown {
  if (source === null || typeof source !== 'object') return undefined;
  return Object.hasOwn(source, name) ? (source as Record<string, unknown>)[name] : undefined;
}

/**
 * `%` and two hex digits below U+0100, else `%u` and six: a prefix code (`u` is no hex digit), so no
 * two escaped values are equal ('!92' and '→' stay apart).
 */
function escapeChar(c: string): string {
  const code = c.codePointAt(0) as number;
  return code < 0x100 ? `%${code.toString(16).padStart(2, '0')}` : `%u${code.toString(16).padStart(6, '0')}`;
}

/**
 * Escapes the separator, so user `a|b` with IP `c` never equals user `a` with IP `b|c`; and, in a user's
 * text (`user`), a leading `#`, so that only a reserved key's part starts with one.
 */
function escapePart(value: string, user: boolean): string {
  const escaped = /[%|]/.test(value) ? value.replace(/%/g, '%25').replace(/\|/g, '%7C') : value;
  return user && escaped.charCodeAt(0) === 35 ? `%23${escaped.slice(1)}` : escaped;
}
