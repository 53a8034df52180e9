// The `leasing` option of the shared stores (RedisStore, PostgresStore): validated once, defaults filled in.

import { assertKnownFields, fieldsOf } from '../../config/known-fields.js';
import { mustBe, refuse } from '../../config/refuse.js';
import { LEASING_DEFAULTS } from '../../defaults.js';

/**
 * Leasing for hot keys (docs/exactness.md, "Leasing"): a process that decides a key often reserves a
 * block of its units in the store in one call (counted there at once) and admits from the block without
 * a round trip; what it did not use goes back to the store, within the same window. A concurrency key's
 * slots are pooled likewise, and given back when idle. Only fixed, calendar, token-bucket, GCRA and
 * concurrency rules without lockout, outcome counting (`countOn`, `resetOnSuccess`) or `settle` are
 * leased. `true` takes every default.
 * @example
 * const store = new RedisStore({ client, leasing: { hotAfter: 200 } });
 */
export interface LeasingOptions {
  /** Decisions of one key (one rule) in this process within one second that make it hot. @default 100 */
  hotAfter?: number;
  /** The most units one block holds. @default 500 */
  maxBlock?: number;
  /** A block takes at most 1/share of what the store has left of the key, so blocks shrink with the remainder. @default 16 */
  share?: number;
  /**
   * A block holds about what this process admitted of the key in this many ms; a token bucket's or GCRA's
   * block is usable this long at most (its refill over that time is reserved with it). @default 250
   */
  blockMs?: number;
  /** A block not used for this long goes back to the store. @default 250 */
  idleMs?: number;
  /** The most keys tracked (blocks and decision counts) at once; the oldest goes first. @default 1000 */
  maxKeys?: number;
}

/** `LeasingOptions` with every field filled in. */
export type LeasingSettings = Required<LeasingOptions>;

const LEASING_FIELDS = fieldsOf<LeasingOptions>({
  hotAfter: true,
  maxBlock: true,
  share: true,
  blockMs: true,
  idleMs: true,
  maxKeys: true,
});

/** The settings of a store's `leasing` option; undefined when leasing is off (absent or false). */
export function leasingSettings(value: unknown, where: string): LeasingSettings | undefined {
  if (value === undefined || value === false) return undefined;
  if (value === true) return { ...LEASING_DEFAULTS };
  if (value === null || typeof value !== 'object' || Array.isArray(value))
    refuse('ERR_OPTION', where, mustBe('leasing', 'a boolean or an object of leasing options', value));
  const options = value as LeasingOptions;
  assertKnownFields(options, LEASING_FIELDS, `${where} leasing`);
  const field = (name: keyof LeasingOptions, min: number, max: number): number => {
    const got = options[name] ?? LEASING_DEFAULTS[name];
    if (!Number.isSafeInteger(got) || got < min || got > max)
      refuse('ERR_OPTION', where, mustBe(`leasing.${name}`, `an integer from ${min} to ${max}`, got));
    return got;
  };
  // Timers take at most 2^31 - 1 ms; a block of 2 units is the least worth a call.
  return {
    hotAfter: field('hotAfter', 1, 2 ** 31 - 1),
    maxBlock: field('maxBlock', 2, 2 ** 31 - 1),
    share: field('share', 2, 2 ** 31 - 1),
    blockMs: field('blockMs', 1, 2 ** 31 - 1),
    idleMs: field('idleMs', 1, 2 ** 31 - 1),
    maxKeys: field('maxKeys', 1, 2 ** 31 - 1),
  };
}
