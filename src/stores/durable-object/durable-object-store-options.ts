// DurableObjectStore's options: read once when the store is made, each refused with the field named.
import { assertKnownFields, fieldsOf } from '../../config/known-fields.js';
import { mustBe, refuse } from '../../config/refuse.js';
import { DURABLE_OBJECT_STORE_DEFAULTS } from '../../defaults.js';
import { type LeasingOptions, type LeasingSettings, leasingSettings } from '../leasing/leasing-options.js';
import type { DurableObjectNamespaceLike } from './cloudflare-types.js';

export interface DurableObjectStoreOptions {
  /**
   * Starts every object's name: `<prefix>:<identity>` decides an identity's rules, `<prefix>#locks:<rule>`
   * lists a rule's locks. Two stores on one namespace with different prefixes share no count.
   * @default 'rk'
   */
  prefix?: string;
  /**
   * Replaces the objects' clock (epoch ms), for tests: sent with every call, and the objects then set no
   * alarm (their expired rows are dropped when next read instead). @default each object's own `Date.now()`
   */
  clock?: () => number;
  /**
   * Rule-wide limits (`limiter.setLimit`, `limiter.limits`; docs/edge.md): the Worker holds a lease on
   * them from the object `<prefix>#limits`, asked for again once half of it has passed (one object
   * request, in the background), and sends them with each decision; a change is in force once every other
   * Worker's lease has ended, so `setLimit` resolves at most `leaseMs` after it was called. Off, the store
   * has no `limits` and decisions cost what they did. `true`: a lease of 2000 ms. @default false
   */
  ruleLimits?: boolean | { leaseMs?: number };
  /**
   * Leasing for hot keys (docs/exactness.md, "Leasing"): blocks of a hot identity's units reserved in its
   * object in one request and admitted from in this isolate. `true` takes every default. @default false
   */
  leasing?: boolean | LeasingOptions;
}

const FIELDS = fieldsOf<DurableObjectStoreOptions>({
  prefix: true,
  clock: true,
  ruleLimits: true,
  leasing: true,
});

const RULE_LIMITS_FIELDS = fieldsOf<{ leaseMs?: number }>({ leaseMs: true });

/** The options with their defaults filled in; `leasing` undefined when off. */
export interface StoreSettings {
  prefix: string;
  clock: (() => number) | undefined;
  /** The lease on the rule-wide limits, ms; undefined when they are off. */
  limitsLeaseMs: number | undefined;
  leasing: LeasingSettings | undefined;
}

/** The store's arguments checked: a clear ERR_OPTION naming the first one wrong. */
export function readStoreOptions(namespace: unknown, options: DurableObjectStoreOptions): StoreSettings {
  const where = 'DurableObjectStore';
  const ns = namespace as Partial<DurableObjectNamespaceLike> | null;
  if (typeof ns?.idFromName !== 'function' || typeof ns.get !== 'function')
    refuse(
      'ERR_OPTION',
      where,
      mustBe('its first argument', 'a Durable Object namespace binding (env.RATE_LIMITER)', namespace),
    );
  assertKnownFields(options, FIELDS, where);
  const prefix = options.prefix ?? DURABLE_OBJECT_STORE_DEFAULTS.prefix;
  if (typeof prefix !== 'string' || prefix.length === 0 || prefix.length > 200)
    refuse('ERR_OPTION', where, mustBe('prefix', 'a string of 1 to 200 characters', prefix));
  if (options.clock !== undefined && typeof options.clock !== 'function')
    refuse('ERR_OPTION', where, mustBe('clock', 'a function returning epoch ms', options.clock));
  const ruleLimits = options.ruleLimits ?? false;
  let leaseMs: number | undefined;
  if (typeof ruleLimits === 'object' && ruleLimits !== null && !Array.isArray(ruleLimits)) {
    assertKnownFields(ruleLimits, RULE_LIMITS_FIELDS, `${where} ruleLimits`);
    leaseMs = ruleLimits.leaseMs ?? DURABLE_OBJECT_STORE_DEFAULTS.limitsLeaseMs;
    if (!Number.isSafeInteger(leaseMs) || leaseMs < 10 || leaseMs > 600_000)
      refuse('ERR_OPTION', where, mustBe('ruleLimits.leaseMs', 'an integer from 10 to 600000 (ms)', leaseMs));
  } else if (ruleLimits === true) leaseMs = DURABLE_OBJECT_STORE_DEFAULTS.limitsLeaseMs;
  else if (ruleLimits !== false)
    refuse('ERR_OPTION', where, mustBe('ruleLimits', 'a boolean or { leaseMs }', ruleLimits));
  return {
    prefix,
    clock: options.clock,
    limitsLeaseMs: leaseMs,
    leasing: leasingSettings(options.leasing, where),
  };
}
