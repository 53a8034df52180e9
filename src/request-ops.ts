// Request to operations: which rules match a request, the key each one counts, the cost, as store ops.
import { describe, RateLimitConfigError, RateLimitRequestError } from './errors.js';
import { boundIdentity } from './keys.js';
import { assertCost, type CompiledRule } from './rules.js';
import type { StoreOp } from './stores/store.js';
import type { RequestInfo } from './types.js';

/**
 * A store op that carries the rule it was built from: whoever reads the store's answer (reservations,
 * the deny cache) finds `countOn`, `resetOnSuccess` and the rest here, never by looking a name up.
 */
export interface RuleOp extends StoreOp {
  readonly compiled: CompiledRule;
}

/** Builds the ops of requests and of direct calls (`consume`, `record`, `status`) for one rule set. */
export class OpBuilder {
  readonly #rules: readonly CompiledRule[];
  readonly #byName = new Map<string, CompiledRule>();
  /** The store's clock: calendar periods are computed on it. */
  readonly #now: () => number;

  constructor(rules: readonly CompiledRule[], now: () => number) {
    this.#rules = rules;
    for (const rule of rules) this.#byName.set(rule.name, rule);
    this.#now = now;
  }

  get rules(): readonly CompiledRule[] {
    return this.#rules;
  }

  /** The rule called `name`; a `RateLimitConfigError` naming the rules there are when none is. */
  rule(name: string): CompiledRule {
    const rule = this.#byName.get(name);
    if (rule === undefined) {
      throw new RateLimitConfigError(
        'ERR_UNKNOWN_RULE',
        `no rule named ${describe(name)}; rules are ${this.#rules.map((r) => r.name).join(', ')}`,
      );
    }
    return rule;
  }

  /** The op of one rule for a key given directly: no matching, no key extraction. */
  direct(rule: string, key: unknown, cost: number): RuleOp {
    const compiled = this.rule(rule);
    assertRequestCost(cost, compiled.name);
    return this.op(compiled, identityOf(key), cost);
  }

  op(rule: CompiledRule, key: string, cost: number): RuleOp {
    if (rule.periods === undefined) return { rule: rule.store, key, cost, compiled: rule };
    const { endMs, nextEndMs } = rule.periods(this.#now());
    return { rule: rule.store, key, cost, periodEndMs: endMs, nextPeriodEndMs: nextEndMs, compiled: rule };
  }

  /** The ops of every rule that matches the request and finds its key. Throws before anything is consumed. */
  forRequest(req: RequestInfo): RuleOp[] {
    const ops: RuleOp[] = [];
    for (const rule of this.#rules) {
      let view = req;
      if (rule.matcher !== undefined) {
        const params = rule.matcher(req.method, req.path);
        if (params === undefined) continue;
        for (const _ in params) {
          view = withParams(req, params);
          break;
        }
      }
      let key: string | undefined;
      try {
        key = rule.extract(view);
      } catch (error) {
        throw new RateLimitRequestError(
          'ERR_KEY_FUNCTION',
          `rule "${rule.name}": key function threw: ${(error as Error)?.message ?? error}`,
          { cause: error },
        );
      }
      if (key === undefined) continue;
      let cost = rule.cost;
      if (typeof cost === 'function') {
        try {
          cost = cost(view);
        } catch (error) {
          throw new RateLimitRequestError(
            'ERR_COST',
            `rule "${rule.name}": cost function threw: ${(error as Error)?.message ?? error}`,
            { cause: error },
          );
        }
        assertRequestCost(cost, rule.name);
      }
      ops.push(this.op(rule, key, cost));
    }
    return ops;
  }
}

/** The identity string of a key given directly: a non-empty string or a finite number, bounded in length. */
export function identityOf(key: unknown): string {
  if (typeof key === 'number' && Number.isFinite(key)) return String(key);
  if (typeof key !== 'string' || key === '') {
    throw new RateLimitRequestError('ERR_KEY', `key must be a non-empty string, got ${describe(key)}`);
  }
  return boundIdentity(key);
}

function assertRequestCost(cost: unknown, rule: string): asserts cost is number {
  try {
    assertCost(cost, rule);
  } catch (error) {
    throw new RateLimitRequestError('ERR_COST', (error as Error).message);
  }
}

/**
 * The request with the params a rule's `match` captured merged in. The spread keeps any extra field of
 * a plain request; the named fields are read explicitly, since the adapters' requests compute some
 * lazily (getters, which a spread skips).
 */
function withParams(req: RequestInfo, params: Record<string, unknown>): RequestInfo {
  return {
    ...req,
    method: req.method,
    path: req.path,
    ip: req.ip,
    headers: req.headers,
    query: req.query,
    params: { ...req.params, ...params },
    body: req.body,
    user: req.user,
  };
}
