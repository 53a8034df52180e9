// Key extraction: turns a rule's key form into a function from a request to an identity string.

import type { KeyExtractor, KeySpec, RequestInfo } from '../types.js';
import { quoted, UNPARSED_BODY_WARNING, UNRESOLVED_IP_WARNING, warnOnce } from '../warnings.js';
import { ipKey } from './ip.js';
import {
  boundIdentity,
  MAX_KEY_LENGTH,
  memoized,
  NON_SCALAR_KEY,
  type Normalizer,
  OVERSIZED_KEY,
  UNPARSED_BODY_KEY,
  UNRESOLVED_IP_KEY,
} from './material.js';

export {
  boundIdentity,
  MAX_IDENTITY_LENGTH,
  MAX_KEY_LENGTH,
  NON_SCALAR_KEY,
  normalizeIdentity,
  OVERSIZED_KEY,
  UNPARSED_BODY_KEY,
  UNRESOLVED_IP_KEY,
} from './material.js';

/** Returns the identity for a request, or undefined when the rule does not apply to it. */
export type Extractor = (req: RequestInfo) => string | undefined;

export interface KeyOptions {
  ipv6Subnet: number;
  normalize: Normalizer | undefined;
  /** The rule's name, for its warnings. */
  rule?: string | undefined;
  /**
   * What a value that is neither a string nor a finite number keys as: `'shared'`, the rule's one bucket
   * `NON_SCALAR_KEY` (requests: a handler may coerce it); `'none'`, no key (service calls refuse the call).
   * @default 'shared'
   */
  nonScalar?: 'shared' | 'none';
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
  const text = material(options.normalize, options.nonScalar);
  if (spec === 'ip') return ipExtractor(options);
  if (spec === 'user') {
    return (req) => {
      const user = req.user;
      // No user (or a user without an id) is an anonymous request: the rule does not apply.
      const id = user !== null && typeof user === 'object' ? ownValue(user, 'id') : user;
      return id === null ? undefined : text(id);
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
 * Request material to key text: strings and finite numbers; any other value present (an array, an object,
 * a boolean, a null) becomes `NON_SCALAR_KEY`, so no shape of a field skips the rule; a value longer than
 * `MAX_KEY_LENGTH` becomes `OVERSIZED_KEY` before any work is done on it; then the normalizer, at most once
 * per value per request (memoized). Undefined (the rule does not apply) for a missing or empty value.
 */
function material(
  normalize: Normalizer | undefined,
  nonScalar: KeyOptions['nonScalar'] = 'shared',
): (value: unknown) => string | undefined {
  const norm = normalize === undefined ? undefined : memoized(normalize);
  const other = nonScalar === 'shared' ? NON_SCALAR_KEY : undefined;
  return (value) => {
    if (value === undefined || value === '') return undefined;
    const s = scalar(value);
    if (s === undefined) return other;
    if (s.length > MAX_KEY_LENGTH) return OVERSIZED_KEY;
    const out = norm === undefined ? s : norm(s);
    return out === '' ? undefined : out;
  };
}

/** `'ip'`: the canonical address, or `UNRESOLVED_IP_KEY` (with a one-time warning) when there is none. */
function ipExtractor(options: KeyOptions): Extractor {
  const warn = warnOnce(UNRESOLVED_IP_WARNING);
  const subnet = options.ipv6Subnet;
  return (req) => {
    const raw = req.ip;
    const key = ipKey(raw, subnet);
    if (key !== undefined) return key;
    const why =
      raw === undefined || raw === ''
        ? 'a request has no client address (the client reset the connection before it was read, or the server listens on a Unix socket)'
        : `the client address ${quoted(raw)} is not an IP address (an entry a trusted proxy wrote into X-Forwarded-For)`;
    warn(
      `${ruleLabel(options.rule)}${why}; such requests share the key '${UNRESOLVED_IP_KEY}', so the rule still limits them, together`,
    );
    return UNRESOLVED_IP_KEY;
  };
}

/**
 * A `body.*` key for a request whose body is not a parsed object: none when it carries no body (the rule
 * does not apply), else `UNPARSED_BODY_KEY`, with a one-time warning.
 */
function unparsedBody(
  spec: string,
  rule: string | undefined,
): (req: RequestInfo, body: unknown) => string | undefined {
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
    return UNPARSED_BODY_KEY;
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
  const escapeValue = (value: string): string =>
    placeholders < 2 ? value : Array.from(value, (c) => (literal.has(c) ? escapeChar(c) : c)).join('');
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
  const text = material(options.normalize, options.nonScalar);
  return (req) => {
    const value: unknown = fn(req);
    return value === null ? undefined : text(value);
  };
}

/** Only strings and finite numbers become key text: objects such as `{"$ne": ""}` never do. */
function scalar(value: unknown): string | undefined {
  if (typeof value === 'string') return value;
  if (typeof value === 'number' && Number.isFinite(value)) return String(value);
  return undefined;
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

/** Escapes the separator, so user `a|b` with IP `c` never equals user `a` with IP `b|c`. */
function escapePart(value: string): string {
  return /[%|]/.test(value) ? value.replace(/%/g, '%25').replace(/\|/g, '%7C') : value;
}
