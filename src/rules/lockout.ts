// A rule's `lockout`: validated, durations in ms, the defaults of defaults.ts filled in.

import { assertKnownFields, fieldsOf } from '../config/known-fields.js';
import type { FieldRefusal } from '../config/refuse.js';
import { RULE_DEFAULTS } from '../defaults.js';
import type { StoreLockout } from '../stores/store-ops.js';
import type { LockoutSpec } from '../types.js';
import { parsePeriod, periodAllowed } from './duration.js';

const LOCKOUT_FIELDS = fieldsOf<LockoutSpec>({
  duration: true,
  escalate: true,
  maxDuration: true,
  forgetAfter: true,
});

/** The lockout as the stores apply it, or undefined when the rule has none; `fail` names the rule. */
export function compileLockout(spec: unknown, where: string, fail: FieldRefusal): StoreLockout | undefined {
  if (spec === undefined) return undefined;
  const l = spec as Record<string, unknown>;
  if (l === null || typeof l !== 'object') fail('ERR_LOCKOUT', 'lockout', 'an object with a duration', l);
  assertKnownFields(l, LOCKOUT_FIELDS, where, 'lockout');
  const escalate = l.escalate ?? RULE_DEFAULTS.lockoutEscalate;
  if (typeof escalate !== 'number' || !Number.isFinite(escalate) || escalate < 1) {
    fail('ERR_LOCKOUT', 'lockout.escalate', 'a number of at least 1', l.escalate);
  }
  const duration = (field: string, value: unknown): number =>
    parsePeriod(value) ?? fail('ERR_DURATION', field, periodAllowed(value, '1d'), value);
  return {
    durationMs: duration('lockout.duration', l.duration),
    escalate: escalate as number,
    maxDurationMs: l.maxDuration === undefined ? 0 : duration('lockout.maxDuration', l.maxDuration),
    forgetAfterMs:
      l.forgetAfter === undefined
        ? RULE_DEFAULTS.lockoutForgetAfterMs
        : duration('lockout.forgetAfter', l.forgetAfter),
  };
}
