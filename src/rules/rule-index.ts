// The rule index: finds the rules a request may match by its method and the static start of each rule's path,
// so a request costs about as much with 10,000 rules as with 10 (only the candidates run their matcher); below,
// each rule's limit (a number or a limit function), checked at construction, read and checked per request.
import { type StoreRule, windowKind } from '../algorithms/index.js';
import { mustBe, refuse } from '../config/refuse.js';
import { describe, RateLimitRequestError } from '../errors.js';
import type { LimitFunction, RequestInfo } from '../types.js';
import type { Matcher } from './match.js';

/** What the index needs of a rule: its matcher (undefined: every request) and its place in rule order. */
export interface Indexed {
  readonly matcher: Matcher | undefined;
  readonly index: number;
}

/**
 * Rules whose static path prefix ends in one segment: `/api/items/:id` waits at the node `API` → `ITEMS`
 * with the partial segment `''`; `/v:version` waits at the root with `V`. Keys are upper case, as
 * path-to-regexp matches without case (its `i` flag canonicalizes by upper case).
 */
interface Node<R> {
  readonly children: Map<string, Node<R>>;
  readonly partials: Array<{ readonly start: string; readonly rule: R }>;
}

const node = <R>(): Node<R> => ({ children: new Map(), partials: [] });

/**
 * Candidates for a request are a superset of the rules that match it, in rule order; each still runs its
 * matcher. A rule with no path (or no `match`) is a candidate for every request of its methods.
 */
export class RuleIndex<R extends Indexed> {
  /** Per upper-case method ('' for rules of any method): the rules of every path, and the path tree. */
  readonly #byMethod = new Map<string, { always: R[]; tree: Node<R> | undefined }>();
  readonly #size: number;
  /** When every rule is of every method and has no path prefix: those rules, in rule order. */
  readonly #everyRequest: readonly R[] | undefined;

  constructor(rules: readonly R[]) {
    this.#size = rules.length;
    for (const rule of rules) {
      const methods = rule.matcher?.methods;
      for (const method of methods ?? ['']) {
        let group = this.#byMethod.get(method);
        if (group === undefined) {
          group = { always: [], tree: undefined };
          this.#byMethod.set(method, group);
        }
        const prefixes = rule.matcher?.prefixes;
        if (prefixes === undefined) group.always.push(rule);
        else {
          group.tree ??= node();
          // A rule with two paths under one node would be listed twice: once is enough.
          for (const prefix of new Set(prefixes)) insert(group.tree, prefix, rule);
        }
      }
    }
    const any = this.#byMethod.get('');
    this.#everyRequest =
      this.#byMethod.size === 1 && any !== undefined && any.tree === undefined
        ? Object.freeze([...any.always])
        : undefined;
  }

  /**
   * The rules a request with this method and path may match, in rule order. The path is read only when
   * some rule has one: from a function, or from the request itself.
   */
  candidates(method: string, path: (() => string) | { readonly path: string }): readonly R[] {
    // Rules of every method and path only (one rule keyed by IP for a whole app): always all of them.
    if (this.#everyRequest !== undefined && typeof method === 'string') return this.#everyRequest;
    const found: R[] = [];
    let sources = 0;
    let segments: string[] | undefined;
    const upper = method.toUpperCase();
    for (let k = 0; k < (upper === '' ? 1 : 2); k++) {
      const group = this.#byMethod.get(k === 0 ? '' : upper);
      if (group === undefined) continue;
      const before = found.length;
      for (const rule of group.always) found.push(rule);
      if (group.tree !== undefined) {
        segments ??= (typeof path === 'function' ? path() : path.path).toUpperCase().split('/');
        collect(group.tree, segments, found);
      }
      if (found.length > before) sources++;
    }
    // The rules of every path come in order; the tree's come by depth, and a rule with two paths may
    // come twice: put them in rule order, once each.
    if (found.length < 2 || (sources < 2 && segments === undefined)) return found;
    found.sort((a, b) => a.index - b.index);
    let kept = 1;
    for (let i = 1; i < found.length; i++) if (found[i] !== found[kept - 1]) found[kept++] = found[i] as R;
    found.length = kept;
    return found;
  }

  get size(): number {
    return this.#size;
  }
}

function insert<R>(root: Node<R>, prefix: string, rule: R): void {
  // '/api/items/' → ['', 'API', 'ITEMS', '']: complete segments lead down the tree, the last is partial.
  const parts = prefix.toUpperCase().split('/');
  let at = root;
  for (let i = 1; i < parts.length - 1; i++) {
    const segment = parts[i] as string;
    let child = at.children.get(segment);
    if (child === undefined) {
      child = node();
      at.children.set(segment, child);
    }
    at = child;
  }
  const start = parts.length > 1 ? (parts[parts.length - 1] as string) : '';
  at.partials.push({ start, rule });
}

function collect<R>(root: Node<R>, segments: readonly string[], found: R[]): void {
  let at: Node<R> | undefined = root;
  // segments[0] is what precedes the leading '/' (empty for a path).
  for (let depth = 1; at !== undefined && depth <= segments.length; depth++) {
    const segment = segments[depth];
    if (segment !== undefined)
      for (const { start, rule } of at.partials) if (segment.startsWith(start)) found.push(rule);
    at = segment === undefined ? undefined : at.children.get(segment);
  }
}

// Limits: a rule's number or limit function, checked at construction, read and checked per request.

/**
 * What a limit function sees on direct calls (`consume`, `record`, `status`, `acquire`, `wrap`), which
 * have no request: no user, no headers. A limit function answers it with the limit of an unknown
 * caller (a free plan), or throws, which refuses the call.
 */
export const DIRECT_REQUEST: Readonly<RequestInfo> = Object.freeze({
  method: '',
  path: '',
  headers: Object.freeze({}),
});

const POSITIVE = 'a positive integer';

/**
 * Why `limit` cannot be a limit of `rule`, or undefined when it can: a positive safe integer, and within
 * the bound of its window's exact arithmetic where it has one (max(limit, burst) × size in µs: token
 * bucket below 2^53, GCRA at most 2^52).
 */
export function limitProblem(limit: unknown, rule: StoreRule): string | undefined {
  if (typeof limit !== 'number' || !Number.isSafeInteger(limit) || limit < 1) return POSITIVE;
  if (!exceedsExactMath(limit, rule)) return undefined;
  const most = windowKind(rule.type).maxLimit?.(rule.sizeMs);
  return `at most ${most} for a ${rule.type} window of ${rule.sizeMs} ms (max(limit, burst) × size in µs must stay below 2^53 for a token bucket, at most 2^52 for GCRA)`;
}

/** Whether this limit (with the rule's explicit burst) is past what the window's exact arithmetic holds. */
export function exceedsExactMath(limit: number, rule: Pick<StoreRule, 'type' | 'burst' | 'sizeMs'>): boolean {
  const most = windowKind(rule.type).maxLimit?.(rule.sizeMs);
  return most !== undefined && Math.max(limit, rule.burst) > most;
}

/** The limit of one request (or direct call) for a rule, checked: a number, or a promise of one. */
export function requestLimit(
  limit: number | LimitFunction,
  rule: StoreRule,
  req: RequestInfo,
): number | Promise<number> {
  if (typeof limit === 'number') return limit;
  let value: unknown;
  try {
    value = limit(req);
  } catch (error) {
    throw failed(rule, 'threw', error);
  }
  if (
    value !== null &&
    typeof value === 'object' &&
    typeof (value as PromiseLike<unknown>).then === 'function'
  ) {
    return Promise.resolve(value as PromiseLike<unknown>).then(
      (settled) => checked(settled, rule),
      (error: unknown) => {
        throw failed(rule, 'rejected', error);
      },
    );
  }
  return checked(value, rule);
}

function checked(value: unknown, rule: StoreRule): number {
  const problem = limitProblem(value, rule);
  if (problem === undefined) return value as number;
  throw new RateLimitRequestError(
    'ERR_LIMIT',
    `rule "${rule.name}": limit function must give ${problem}, got ${describe(value)}; nothing was consumed`,
  );
}

function failed(rule: StoreRule, how: 'threw' | 'rejected', error: unknown): RateLimitRequestError {
  return new RateLimitRequestError(
    'ERR_LIMIT',
    `rule "${rule.name}": limit function ${how}: ${(error as Error)?.message ?? describe(error)}; nothing was consumed`,
    { cause: error },
  );
}

/** The limit an operator sets with `limiter.override`: null clears; a bad one is a `RateLimitConfigError`. */
export function overrideLimit(limit: unknown, rule: StoreRule): number | null {
  if (limit === null) return null;
  const problem = limitProblem(limit, rule);
  if (problem === undefined) return limit as number;
  const allowed = problem === POSITIVE ? `${POSITIVE} or null` : problem;
  return refuse('ERR_LIMIT', `override: rule "${rule.name}"`, mustBe('limit', allowed, limit));
}

/**
 * The rule-wide limit an operator sets with `limiter.setLimit`: null returns to the configured limit; a
 * bad one is a `RateLimitConfigError`. 0 is refused rather than read as "refuse all": a token bucket or
 * GCRA window has no rate at 0 (its retry-after would be infinite), and the headers would promise
 * nothing; a limit of 1 is the smallest that every window type answers exactly.
 */
export function ruleWideLimit(limit: unknown, rule: StoreRule): number | null {
  if (limit === null) return null;
  const problem = limitProblem(limit, rule);
  if (problem === undefined) return limit as number;
  const allowed =
    problem === POSITIVE
      ? `${POSITIVE} or null (0 is refused: 1 is the smallest limit every window type answers)`
      : problem;
  return refuse('ERR_LIMIT', `setLimit: rule "${rule.name}"`, mustBe('limit', allowed, limit));
}
