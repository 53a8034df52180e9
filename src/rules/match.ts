// Request matching: methods and path-to-regexp patterns, compiled once per rule.
import { match as compilePath } from 'path-to-regexp';
import type { MatchSpec } from '../types.js';

/**
 * Returns the params the pattern captured, or undefined when the request does not match. Carries what
 * the rule index needs to skip it cheaply: its methods and the static start of each of its paths.
 */
export type Matcher = ((method: string, path: string) => Record<string, unknown> | undefined) & {
  /** Upper-case methods, HEAD added beside GET; undefined: any method. */
  readonly methods: ReadonlySet<string> | undefined;
  /** Per path pattern, the text before its first parameter, wildcard, group or escape; undefined: any path. */
  readonly prefixes: readonly string[] | undefined;
};

const NO_PARAMS: Record<string, unknown> = Object.freeze({}) as Record<string, unknown>;

/**
 * Parses `'POST /login'`, `'/login'` or `{ method, path }`; a rule matching GET matches HEAD too. Throws
 * the parser's error for a bad pattern.
 */
export function createMatcher(spec: string | MatchSpec | undefined): Matcher | undefined {
  if (spec === undefined) return undefined;
  let methods: string[] | undefined;
  let paths: string[] | undefined;
  if (typeof spec === 'string') {
    const parts = spec.trim().split(/\s+/);
    if (parts.length === 1) paths = [parts[0] as string];
    else if (parts.length === 2) {
      methods = [(parts[0] as string).toUpperCase()];
      paths = [parts[1] as string];
    } else throw new Error(`expected 'METHOD /path' or '/path'`);
  } else {
    if (spec.method !== undefined)
      methods = (Array.isArray(spec.method) ? spec.method : [spec.method]).map(upper);
    if (spec.path !== undefined) paths = Array.isArray(spec.path) ? spec.path : [spec.path];
  }
  // HEAD is GET without the body: Express and @koa/router answer it with the GET handler, so a GET rule
  // that let HEAD through would let anyone probe the route's status codes unlimited.
  if (methods?.includes('GET') && !methods.includes('HEAD')) methods.push('HEAD');
  const methodSet = methods && !methods.includes('*') ? new Set(methods) : undefined;
  const pathFns = paths?.map((p) => {
    if (typeof p !== 'string' || !p.startsWith('/'))
      throw new Error(`path must start with '/', got ${String(p)}`);
    return compilePath(p, { decode: safeDecode });
  });
  const matcher = (method: string, path: string) => {
    if (methodSet && !methodSet.has(method.toUpperCase())) return undefined;
    if (!pathFns) return NO_PARAMS;
    for (const fn of pathFns) {
      const found = fn(path);
      if (found) return found.params as Record<string, unknown>;
    }
    return undefined;
  };
  return Object.assign(matcher, { methods: methodSet, prefixes: paths?.map(staticPrefix) });
}

/** The literal start of a path-to-regexp pattern: up to its first `:`, `*`, `{` or `\`. */
function staticPrefix(pattern: string): string {
  const end = pattern.search(/[:*{\\]/);
  return end < 0 ? pattern : pattern.slice(0, end);
}

function upper(method: unknown): string {
  if (typeof method !== 'string' || method === '') throw new Error(`method must be a non-empty string`);
  return method.toUpperCase();
}

// A malformed percent-escape in a request path must not throw out of the matcher: keep it as sent.
function safeDecode(value: string): string {
  try {
    return decodeURIComponent(value);
  } catch {
    return value;
  }
}
