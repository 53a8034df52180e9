// Limiter options: what `createLimiter` takes, validated once and resolved to the figures the parts run on.

import { assertKnownFields, fieldsOf } from '../config/known-fields.js';
import { mustBe, refuse } from '../config/refuse.js';
import { LIMITER_DEFAULTS } from '../defaults.js';
import { describe } from '../errors.js';
import { type CompiledRule, compileRules } from '../rules/compile.js';
import { parseDuration } from '../rules/duration.js';
import { MemoryStore } from '../stores/memory/memory-store.js';
import { isSyncStore, type Store, type SyncStore } from '../stores/store.js';
import type { Duration, Rule } from '../types.js';
import { hostProcess } from '../warnings.js';

export interface LimiterOptions {
  /** Where counts live. @default new MemoryStore() */
  store?: Store;
  /** The rules, decided together for each request in this order. */
  rules: Rule[];
  /**
   * What a decision becomes when a shared store fails or is slower than `storeTimeout`: `'allow'` admits,
   * `'deny'` refuses, `'insurance'` decides on a per-process memory store until the store answers again.
   * @default 'insurance'
   */
  onStoreError?: 'allow' | 'deny' | 'insurance';
  /**
   * A shared store that has answered none of the calls in flight for this long has failed: its decisions
   * go to `onStoreError`. Time a call spends in this process (queued behind its other calls, or waiting
   * for the first connection) does not count. Not applied to the memory store. @default 500
   */
  storeTimeout?: Duration;
  /**
   * The longest a decision waits for a shared store that is alive but slow (answering other calls of
   * this process first) or still making its first connection; then it goes to `onStoreError`. At least
   * `storeTimeout`. @default 5000
   */
  storeMaxWait?: Duration;
  /** After a store failure, decisions skip the store for this long before trying it again. @default 1000 */
  storeRetryInterval?: Duration;
  /**
   * Remember keys a shared store denied (locked, or no unit left) and answer them in-process until
   * they could pass. Not used with the memory store. @default true ({ maxKeys: 10000 })
   */
  denyCache?: boolean | { maxKeys?: number };
  /**
   * The insurance store (`onStoreError: 'insurance'`): `share` is the part of each limit (and explicit
   * burst) it admits in this process while the shared store fails, rounded down, at least 1. With N
   * processes, `share: 1 / N` keeps the fleet near the limit during an outage. `store` is the store that
   * decides meanwhile: one that decides synchronously (`Store.evaluateSync`), such as a
   * `new MemoryStore({ maxKeys })` of your own bound; the limiter closes it with itself.
   * @default { share: 1, store: new MemoryStore() } (the store made only in front of a shared store)
   */
  insurance?: { share?: number; store?: Store };
  /** IPv6 addresses are keyed by this prefix length (48-128): users are commonly given a /56 or a /48. @default 56 */
  ipv6Subnet?: number;
  /** Log decisions and store failures: `true` writes to stderr, a function receives each line. Also `RATEKEEPER_DEBUG=1`. @default false */
  debug?: boolean | ((line: string) => void);
}

const LIMITER_FIELDS = fieldsOf<LimiterOptions>({
  store: true,
  rules: true,
  onStoreError: true,
  storeTimeout: true,
  storeMaxWait: true,
  storeRetryInterval: true,
  denyCache: true,
  insurance: true,
  ipv6Subnet: true,
  debug: true,
});

export type StoreErrorPolicy = NonNullable<LimiterOptions['onStoreError']>;

/** The options with every default filled in and every value checked. */
export interface ResolvedLimiterOptions {
  rules: CompiledRule[];
  store: Store;
  onStoreError: StoreErrorPolicy;
  storeTimeoutMs: number;
  storeMaxWaitMs: number;
  storeRetryIntervalMs: number;
  insuranceShare: number;
  /**
   * The insurance store: `insurance.store`, else a memory store made here when the policy is 'insurance'
   * and the store is shared; undefined otherwise (a local store has no fallback).
   */
  insurance: SyncStore | undefined;
  /** Undefined: no deny cache (turned off, or a local store, which needs none). */
  denyCacheMaxKeys: number | undefined;
  /** The store's `liveness.staleAfterMs`, checked: undefined for a store that hears other processes' changes. */
  staleAfterMs: number | undefined;
  /** Where debug lines go; undefined when debugging is off. */
  log: ((line: string) => void) | undefined;
}

/** Validates `createLimiter`'s options; throws `RateLimitConfigError` naming the option and the value. */
export function resolveLimiterOptions(options: LimiterOptions): ResolvedLimiterOptions {
  if (options === null || typeof options !== 'object' || Array.isArray(options)) {
    const hint = Array.isArray(options) ? ': pass the rules as createLimiter({ rules: [...] })' : '';
    refuse(
      'ERR_OPTION',
      undefined,
      `createLimiter takes an options object { rules: [...] }, got ${describe(options)}${hint}`,
    );
  }
  assertKnownFields(options, LIMITER_FIELDS, 'createLimiter');
  const ipv6Subnet = options.ipv6Subnet ?? LIMITER_DEFAULTS.ipv6Subnet;
  if (!Number.isInteger(ipv6Subnet) || ipv6Subnet < 48 || ipv6Subnet > 128) {
    refuse('ERR_OPTION', undefined, mustBe('ipv6Subnet', 'an integer from 48 to 128', ipv6Subnet));
  }
  const rules = compileRules(options.rules, { ipv6Subnet });
  const onStoreError = options.onStoreError ?? LIMITER_DEFAULTS.onStoreError;
  if (!['allow', 'deny', 'insurance'].includes(onStoreError)) {
    refuse('ERR_OPTION', undefined, mustBe('onStoreError', `'allow', 'deny' or 'insurance'`, onStoreError));
  }
  const storeTimeoutMs = optionMs('storeTimeout', options.storeTimeout, LIMITER_DEFAULTS.storeTimeoutMs);
  const storeMaxWaitMs = optionMs(
    'storeMaxWait',
    options.storeMaxWait,
    Math.max(LIMITER_DEFAULTS.storeMaxWaitMs, storeTimeoutMs),
  );
  if (storeMaxWaitMs < storeTimeoutMs) {
    refuse(
      'ERR_OPTION',
      undefined,
      mustBe('storeMaxWait', `at least storeTimeout (${storeTimeoutMs} ms)`, options.storeMaxWait),
    );
  }
  const storeRetryIntervalMs = optionMs(
    'storeRetryInterval',
    options.storeRetryInterval,
    LIMITER_DEFAULTS.storeRetryIntervalMs,
  );
  const store: Store = options.store ?? new MemoryStore();
  const { share: insuranceShare, store: given } = resolveInsurance(options.insurance, onStoreError, store);
  const insurance = given ?? (onStoreError === 'insurance' && !store.local ? new MemoryStore() : undefined);
  const staleAfterMs = store.liveness?.staleAfterMs;
  if (
    staleAfterMs !== undefined &&
    !(typeof staleAfterMs === 'number' && staleAfterMs >= 1 && staleAfterMs < Infinity)
  )
    refuse(
      'ERR_OPTION',
      undefined,
      mustBe('store.liveness.staleAfterMs', 'a number of ms, at least 1', staleAfterMs),
    );
  const holding = rules.find((rule) => rule.facts.holdsSlots);
  if (holding !== undefined && typeof store.renew !== 'function') {
    refuse(
      'ERR_OPTION',
      `rule "${holding.name}"`,
      'a concurrency window needs a store that renews held slots (Store.renew), and this store has none',
    );
  }
  const cache = options.denyCache ?? LIMITER_DEFAULTS.denyCache;
  let denyCacheMaxKeys: number | undefined;
  if (typeof cache === 'object') assertKnownFields(cache, ['maxKeys'], 'createLimiter', 'denyCache');
  if (cache !== false && !store.local) {
    denyCacheMaxKeys =
      cache === true
        ? LIMITER_DEFAULTS.denyCacheMaxKeys
        : (cache.maxKeys ?? LIMITER_DEFAULTS.denyCacheMaxKeys);
    if (!Number.isSafeInteger(denyCacheMaxKeys) || denyCacheMaxKeys < 1) {
      refuse('ERR_OPTION', undefined, mustBe('denyCache.maxKeys', 'a positive integer', denyCacheMaxKeys));
    }
  }
  const host = hostProcess();
  const debug = options.debug ?? host?.env?.RATEKEEPER_DEBUG === '1';
  const stderr = host?.stderr;
  const log =
    debug === true
      ? (line: string) =>
          stderr ? stderr.write(`ratekeeper ${line}\n`) : console.error(`ratekeeper ${line}`)
      : debug || undefined;
  return {
    rules,
    store,
    onStoreError,
    storeTimeoutMs,
    storeMaxWaitMs,
    storeRetryIntervalMs,
    insuranceShare,
    insurance,
    denyCacheMaxKeys,
    staleAfterMs,
    log,
  };
}

/**
 * `insurance`: a `share` in (0, 1] and a `store` that decides synchronously and is not the shared store
 * itself, only where there is an insurance store to apply them to.
 */
function resolveInsurance(
  insurance: LimiterOptions['insurance'],
  policy: StoreErrorPolicy,
  shared: Store,
): { share: number; store: SyncStore | undefined } {
  if (insurance === undefined) return { share: LIMITER_DEFAULTS.insuranceShare, store: undefined };
  if (insurance === null || typeof insurance !== 'object' || Array.isArray(insurance)) {
    refuse('ERR_OPTION', undefined, mustBe('insurance', 'an object such as { share: 0.25 }', insurance));
  }
  assertKnownFields(insurance, ['share', 'store'], 'createLimiter', 'insurance');
  if (policy !== 'insurance') {
    refuse(
      'ERR_OPTION',
      undefined,
      `insurance applies with onStoreError 'insurance' only, got onStoreError ${describe(policy)}`,
    );
  }
  const share = insurance.share ?? LIMITER_DEFAULTS.insuranceShare;
  if (typeof share !== 'number' || !Number.isFinite(share) || share <= 0 || share > 1) {
    refuse(
      'ERR_OPTION',
      undefined,
      mustBe(
        'insurance.share',
        'a number above 0 and at most 1 (the part of each limit one process admits during an outage, ' +
          'e.g. 0.25 for 4 processes)',
        share,
      ),
    );
  }
  const store = insurance.store;
  if (store === undefined) return { share, store: undefined };
  if (store === null || typeof store !== 'object' || !isSyncStore(store)) {
    const name = typeof store === 'object' && store !== null ? store.constructor?.name : undefined;
    const shared = name !== undefined && typeof (store as Store).evaluateSync === 'function';
    const got =
      name === undefined ? describe(store) : `${name === 'Object' ? 'an object' : `a ${name}`} without it`;
    refuse(
      'ERR_OPTION',
      undefined,
      'insurance.store must be a local store that decides synchronously (declares evaluateSync), such as ' +
        `new MemoryStore({ maxKeys: 50000 }), got ${shared ? 'a shared store (local false)' : got}`,
    );
  }
  if (store === shared) {
    refuse(
      'ERR_OPTION',
      undefined,
      'insurance.store must be a store of its own, not the store it stands in for',
    );
  }
  return { share, store };
}

function optionMs(name: string, value: Duration | undefined, fallback: number): number {
  if (value === undefined) return fallback;
  const ms = parseDuration(value);
  if (ms === undefined) {
    refuse('ERR_DURATION', undefined, mustBe(name, `a duration such as '250ms' or 250`, value));
  }
  return ms;
}
