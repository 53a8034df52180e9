// Key extraction: turns a rule's key form into a function from a request to an identity string.
import { createHash } from 'node:crypto';
import { ipKey } from './ip.js';
import type { KeyExtractor, KeySpec, RequestInfo } from './types.js';

/** Returns the identity for a request, or undefined when the rule does not apply to it. */
export type Extractor = (req: RequestInfo) => string | undefined;

export interface KeyOptions {
  ipv6Subnet: number;
  normalize: ((value: string) => string) | undefined;
}

/** Identities longer than this are replaced by a digest, so a 1 MB username costs 64 bytes of state. */
export const MAX_IDENTITY_LENGTH = 256;

/** NFKC, trimmed, lower-cased: `' ＡＬＩＣＥ '` and `'alice'` share a bucket. */
export function normalizeIdentity(value: string): string {
  return value.normalize('NFKC').trim().toLowerCase();
}

const DIGEST = /^#[\w-]{43}$/;

/**
 * Bounds an identity's length: long identities become `#` + a SHA-256 digest (base64url) of their UTF-16
 * code units (so lone surrogates cannot collide). Any other identity starting with `#` is digested too,
 * except a digest itself: bounding is idempotent, so a key extractor may bound and the core bound again.
 */
export function boundIdentity(identity: string): string {
  if (identity.charCodeAt(0) !== 35 ? identity.length <= MAX_IDENTITY_LENGTH : DIGEST.test(identity))
    return identity;
  return `#${createHash('sha256').update(identity, 'utf16le').digest('base64url')}`;
}

/** Builds the extractor for a key form; throws an Error (with the reason) for an unknown form. */
export function createExtractor(spec: KeySpec, options: KeyOptions): Extractor {
  if (Array.isArray(spec)) {
    if (spec.length === 0) throw new Error('a composite key needs at least one part');
    const parts = spec.map((part) => single(part, options));
    return (req) => {
      let out = '';
      for (let i = 0; i < parts.length; i++) {
        const value = (parts[i] as Extractor)(req);
        if (value === undefined) return undefined;
        out += i === 0 ? escapePart(value) : `|${escapePart(value)}`;
      }
      return boundIdentity(out);
    };
  }
  const one = single(spec as string | KeyExtractor, options);
  return (req) => {
    const value = one(req);
    return value === undefined ? undefined : boundIdentity(value);
  };
}

function single(spec: string | KeyExtractor, options: KeyOptions): Extractor {
  if (typeof spec === 'function') return fromFunction(spec, options);
  if (typeof spec !== 'string' || spec === '')
    throw new Error('a key form must be a non-empty string or a function');
  if (spec.includes('{')) return template(spec, options);
  return field(spec, options);
}

function field(spec: string, options: KeyOptions): Extractor {
  const norm = options.normalize;
  const text = (value: unknown): string | undefined => {
    const s = scalar(value);
    if (s === undefined) return undefined;
    const out = norm ? norm(s) : s;
    return out === '' ? undefined : out;
  };
  if (spec === 'ip') return (req) => ipKey(req.ip, options.ipv6Subnet);
  if (spec === 'user') {
    return (req) => {
      const user = req.user;
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
    return (req) => {
      let value: unknown = source(req);
      for (const segment of path) value = ownValue(value, segment);
      return text(value);
    };
  }
  throw new Error(
    `unknown key form '${spec}': use 'ip', 'user', 'header:<name>', 'body.<path>', 'query.<name>', 'param.<name>', a template such as 'sms:{body.phone}', a function, or an array of these`,
  );
}

const SOURCES: ReadonlyArray<readonly [string, (req: RequestInfo) => unknown]> = [
  ['body.', (req) => req.body],
  ['query.', (req) => req.query],
  ['param.', (req) => req.params],
];

function template(spec: string, options: KeyOptions): Extractor {
  const pieces: Array<string | Extractor> = [];
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
  // Values are escaped for every character the template itself uses between them, so two
  // placeholders can never be shifted into one another ('{body.a}:{body.b}').
  const placeholders = pieces.filter((p) => typeof p !== 'string').length;
  const literal = new Set(
    `${pieces.filter((p): p is string => typeof p === 'string').join('')}%`.replace(/[\p{L}\p{N}]/gu, ''),
  );
  const escapeValue = (value: string): string =>
    placeholders < 2
      ? value
      : Array.from(value, (c) =>
          literal.has(c) ? `%${c.charCodeAt(0).toString(16).padStart(2, '0')}` : c,
        ).join('');
  return (req) => {
    let out = '';
    for (const piece of pieces) {
      if (typeof piece === 'string') out += piece;
      else {
        const value = piece(req);
        if (value === undefined) return undefined;
        out += escapeValue(value);
      }
    }
    return out;
  };
}

function fromFunction(fn: KeyExtractor, options: KeyOptions): Extractor {
  const norm = options.normalize;
  return (req) => {
    const s = scalar(fn(req));
    if (s === undefined) return undefined;
    const out = norm ? norm(s) : s;
    return out === '' ? undefined : out;
  };
}

/** Only strings and finite numbers become keys: objects such as `{"$ne": ""}` never do. */
function scalar(value: unknown): string | undefined {
  if (typeof value === 'string') return value === '' ? undefined : value;
  if (typeof value === 'number' && Number.isFinite(value)) return String(value);
  return undefined;
}

/** Own enumerable data only, so `__proto__` or `constructor` in a body never reaches a prototype. */
function ownValue(source: unknown, name: string): unknown {
  if (source === null || typeof source !== 'object') return undefined;
  return Object.hasOwn(source, name) ? (source as Record<string, unknown>)[name] : undefined;
}

/** Escapes the separator, so user `a|b` with IP `c` never equals user `a` with IP `b|c`. */
function escapePart(value: string): string {
  return /[%|]/.test(value) ? value.replace(/%/g, '%25').replace(/\|/g, '%7C') : value;
}
