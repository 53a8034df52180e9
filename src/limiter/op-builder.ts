// Request to operations: which rules match a request, the key each one counts, the cost, as store ops.
import { refuse } from '../config/refuse.js';
import { describe, RateLimitRequestError } from '../errors.js';
import { identityOf } from '../keys/direct-key.js';
import { assertCost, type CompiledRule } from '../rules/compile.js';
import { DIRECT_REQUEST, RuleIndex, requestLimit } from '../rules/rule-index.js';
import { assertChosenHolds, requestWindow, type WindowChoice } from '../rules/window-choice.js';
import type { StoreOp } from '../stores/store.js';
import type { RequestInfo } from '../types.js';

/**
 * A store op that carries the rule it was built from: whoever reads the store's answer (reservations,
 * the deny cache) finds `countOn`, `resetOnSuccess` and the rest here, never by looking a name up.
 */
export interface RuleOp extends StoreOp {
  readonly compiled: CompiledRule;
  /** The window its request chose (a `window` function: rules/window-choice.ts); undefined: the rule's own. */
  readonly choice?: WindowChoice | undefined;
}

/**
 * Asks the store which of these ops' rule and key have an override in force: the limit it sets, or
 * undefined where none is. Rejects when the store cannot tell.
 */
export type OverrideProbe = (ops: RuleOp[]) => Promise<ReadonlyArray<number | undefined>>;

/** Builds the ops of requests and of direct calls (`consume`, `record`, `status`) for one rule set. */
export class OpBuilder {
  readonly #rules: readonly CompiledRule[];
  readonly #byName = new Map<string, CompiledRule>();
  /** Finds the rules a request may match without running every rule's matcher. */
  readonly #index: RuleIndex<CompiledRule>;
  /** The store's clock: calendar periods are computed on it. */
  readonly #now: () => number;
  /** Only where the store keeps overrides. */
  readonly #probe: OverrideProbe | undefined;

  constructor(rules: readonly CompiledRule[], now: () => number, probe?: OverrideProbe) {
    this.#rules = rules;
    this.#probe = probe;
    for (const rule of rules) this.#byName.set(rule.name, rule);
    this.#index = new RuleIndex(rules);
    this.#now = now;
  }

  get rules(): readonly CompiledRule[] {
    return this.#rules;
  }

  /** The rule called `name`; a `RateLimitConfigError` naming the rules there are when none is. */
  rule(name: string): CompiledRule {
    const rule = this.#byName.get(name);
    if (rule === undefined) {
      refuse(
        'ERR_UNKNOWN_RULE',
        undefined,
        `no rule named ${describe(name)}; rules are ${this.#rules.map((r) => r.name).join(', ')}`,
      );
    }
    return rule;
  }

  /**
   * The ops of rules applied to a key given directly (no matching, no key extraction), decided
   * together: `consume`, `record`, `status`, `acquire`, `wrap`. A promise only when a limit function
   * gave one.
   */
  direct(rules: readonly string[], key: unknown, cost: number): RuleOp[] | Promise<RuleOp[]> {
    const compiled = rules.map((name) => this.rule(name));
    const identity = identityOf(key);
    for (const rule of compiled) assertRequestCost(cost, rule.name);
    if (this.#probe !== undefined && compiled.some((rule) => typeof rule.limit === 'function')) {
      return this.#directOverridden(compiled, identity, cost, this.#probe);
    }
    const ops: Array<RuleOp | Promise<RuleOp>> = [];
    try {
      for (const rule of compiled) ops.push(this.#withLimit(rule, identity, cost, DIRECT_REQUEST));
    } catch (error) {
      abandon(ops);
      throw error;
    }
    return settled(ops);
  }

  /**
   * Direct ops where some rule's limit is a function: a direct call has no request for it to read (it sees
   * DIRECT_REQUEST, and may well throw), so a key with an override in force takes the override's limit
   * and the function is not called. The store is asked first, one peek for those rules; when it cannot
   * answer, the functions are called and the decision meets the store's failure as any other does.
   */
  async #directOverridden(
    compiled: readonly CompiledRule[],
    key: string,
    cost: number,
    probe: OverrideProbe,
  ): Promise<RuleOp[]> {
    const functions = compiled.filter((rule) => typeof rule.limit === 'function');
    // The limit sent with the peek is never read: an override's wins, and only overrides are looked at.
    const inForce = await probe(functions.map((rule) => this.op(rule, key, 0, 1))).catch(() => []);
    const ops: Array<RuleOp | Promise<RuleOp>> = [];
    try {
      for (const rule of compiled) {
        const overridden = inForce[functions.indexOf(rule)];
        ops.push(
          overridden === undefined
            ? this.#withLimit(rule, key, cost, DIRECT_REQUEST)
            : this.op(rule, key, cost, overridden, windowOf(rule, DIRECT_REQUEST)),
        );
      }
    } catch (error) {
      abandon(ops);
      throw error;
    }
    return Promise.all(ops);
  }

  /** `choice`: the window the op's request chose (rules/window-choice.ts); undefined: the rule's own. */
  op(rule: CompiledRule, key: string, cost: number, limit: number, choice?: WindowChoice): RuleOp {
    if (cost > limit && rule.facts.holdsSlots) throw slotCostRefused(rule.name, cost, limit);
    if (choice === undefined) {
      if (rule.periods === undefined) return { rule: rule.store, key, cost, limit, compiled: rule };
      const { endMs, nextEndMs } = rule.periods(this.#now());
      return {
        rule: rule.store,
        key,
        cost,
        limit,
        periodEndMs: endMs,
        nextPeriodEndMs: nextEndMs,
        compiled: rule,
      };
    }
    const { store, periods } = choice;
    if (store !== rule.store) assertChosenHolds(store, limit);
    if (periods === undefined) return { rule: store, key, cost, limit, compiled: rule, choice };
    const { endMs, nextEndMs } = periods(this.#now());
    return {
      rule: store,
      key,
      cost,
      limit,
      periodEndMs: endMs,
      nextPeriodEndMs: nextEndMs,
      compiled: rule,
      choice,
    };
  }

  /** The op with the rule's limit for `req`: at once, unless the rule's limit function gave a promise. */
  #withLimit(rule: CompiledRule, key: string, cost: number, req: RequestInfo): RuleOp | Promise<RuleOp> {
    // The window first: a window function is synchronous, and its refusal must not leave a limit's promise.
    const choice = windowOf(rule, req);
    const limit = requestLimit(rule.limit, rule.store, req);
    if (typeof limit === 'number') return this.op(rule, key, cost, limit, choice);
    return limit.then((value) => this.op(rule, key, cost, value, choice));
  }

  /**
   * The ops of every rule that matches the request and finds its key. Throws (or rejects) before
   * anything is consumed. A promise only when a limit function gave one: the memory store decides
   * every other request in the same turn.
   */
  forRequest(req: RequestInfo): RuleOp[] | Promise<RuleOp[]> {
    const ops: Array<RuleOp | Promise<RuleOp>> = [];
    try {
      this.#collect(req, ops);
    } catch (error) {
      abandon(ops);
      throw error;
    }
    return settled(ops);
  }

  /** The names of the rules whose `match` accepts this method and path, in rule order. */
  matching(method: string, path: string): string[] {
    const names: string[] = [];
    for (const rule of this.#index.candidates(method, () => path))
      if (rule.matcher === undefined || rule.matcher(method, path) !== undefined) names.push(rule.name);
    return names;
  }

  #collect(req: RequestInfo, ops: Array<RuleOp | Promise<RuleOp>>): void {
    // The adapters always give both; a caller of check, peek or recordRequest from JavaScript may not.
    if (typeof req?.method !== 'string' || typeof req.path !== 'string') throw requestRefused(req);
    for (const rule of this.#index.candidates(req.method, req)) {
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
        // An object or array where the rule reads a key (ERR_KEY_VALUE) is the client's, not a fault.
        if (error instanceof RateLimitRequestError && error.code === 'ERR_KEY_VALUE') throw error;
        throw new RateLimitRequestError(
          'ERR_KEY_FUNCTION',
          `rule "${rule.name}": key function threw: ${(error as Error)?.message ?? error}`,
          { cause: error },
        );
      }
      if (key === undefined) {
        // The rule does not apply; a rule with missing: 'refuse' throws here, before anything is consumed.
        rule.missing();
        continue;
      }
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
      ops.push(this.#withLimit(rule, key, cost, view));
    }
  }
}

/** The window the request chose, where the rule's window is chosen per request; else undefined (the rule's own). */
function windowOf(rule: CompiledRule, req: RequestInfo): WindowChoice | undefined {
  return rule.chosen === undefined ? undefined : requestWindow(rule.chosen, req);
}

/** Ops given up on (a later rule threw): a limit function's promise already made must not reject unheard. */
function abandon(ops: Array<RuleOp | Promise<RuleOp>>): void {
  for (const op of ops) if (op instanceof Promise) op.catch(() => undefined);
}

/** The ops as they are when none is a promise, else one promise of all of them. */
function settled(ops: Array<RuleOp | Promise<RuleOp>>): RuleOp[] | Promise<RuleOp[]> {
  for (const op of ops) if (op instanceof Promise) return Promise.all(ops);
  return ops as RuleOp[];
}

function assertRequestCost(cost: unknown, rule: string): asserts cost is number {
  try {
    assertCost(cost, rule);
  } catch (error) {
    throw new RateLimitRequestError('ERR_COST', (error as Error).message);
  }
}

/** A request without a string `method` and `path`: `ERR_REQUEST`, naming the first missing. */
function requestRefused(req: unknown): RateLimitRequestError {
  if (typeof req !== 'object' || req === null) {
    return new RateLimitRequestError(
      'ERR_REQUEST',
      `ratekeeper: a request must be an object with a string method and path, got ${describe(req)}`,
    );
  }
  const field = typeof (req as { method?: unknown }).method !== 'string' ? 'method' : 'path';
  return new RateLimitRequestError(
    'ERR_REQUEST',
    `ratekeeper: the request's ${field} must be a string (e.g. ${field === 'method' ? "'POST'" : "'/login'"}), got ${describe((req as Record<string, unknown>)[field])}`,
    { field },
  );
}

/**
 * A concurrency rule's cost is the number of slots the op takes, each a holder the store writes: more than
 * the limit in force is never admitted, and `record` (which counts past the limit) would make that many.
 */
function slotCostRefused(rule: string, cost: number, limit: number): RateLimitRequestError {
  return new RateLimitRequestError(
    'ERR_COST',
    `rule "${rule}": cost must be at most the limit (${limit}) on a concurrency window, each unit a slot held, got ${cost}; nothing was consumed`,
  );
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
