// What a compiled rule is, in facts derived once: the parts above the rules (the limiter's deny cache,
// the adapters, slowDown) read these, never a rule's raw fields or a window type's name.
import { windowKind } from '../algorithms/index.js';
import { keyReads } from '../keys/key-reads.js';
import type { WindowType } from '../stores/store-ops.js';
import type { Rule } from '../types.js';

/** Facts of one rule, as `limiter.ruleFacts` lists them. */
export interface RuleFacts {
  readonly name: string;
  /** The window type, an alias resolved (`leaky-bucket` is `gcra`). */
  readonly type: WindowType;
  /** The window type in plain words, such as `'token bucket'`. */
  readonly windowTitle: string;
  /** A bucket (token bucket, GCRA): it takes a burst, and its count drains unit by unit rather than resetting. */
  readonly bucket: boolean;
  /** Units a key holds at `limit`, the limit in force: a bucket's explicit burst, else that limit. */
  capacity(limit: number): number;
  /** The key reads the client address (`'ip'`, `{ip}` in a template). */
  readonly keysOnIp: boolean;
  /** The key reads the parsed body (`'body.<path>'`, `{body.<path>}`). */
  readonly readsBody: boolean;
  /** Counts only failures or successes, or resets on success: its admitted decisions need `report`. */
  readonly countsOutcomes: boolean;
  /** Has a lockout: it may lock a key and refuse every request of it for a while. */
  readonly hasLockout: boolean;
  /** A concurrency window: an admitted request holds slots until it is released (`limiter.release`). */
  readonly holdsSlots: boolean;
  /** `settle: true`: its cost is an estimate, replaced by the actual cost with `limiter.settle`. */
  readonly settles: boolean;
  /** Its `match` names a path: whether it applies to a request depends on the request's path. */
  readonly matchesPath: boolean;
}

/** The facts of a rule the compiler has validated, from its normalized parts. */
export function ruleFacts(
  rule: Pick<Rule, 'name' | 'key'>,
  type: WindowType,
  burst: number,
  counting: { countOn: 'all' | 'failure' | 'success'; resetOnSuccess: boolean },
  hasLockout: boolean,
  settles = false,
  matchesPath = false,
): RuleFacts {
  const kind = windowKind(type);
  const reads = keyReads(rule.key);
  return Object.freeze({
    name: rule.name,
    type,
    windowTitle: kind.title,
    bucket: kind.fields.includes('burst'),
    capacity: (limit: number) => kind.capacity(limit, burst),
    keysOnIp: reads.ip,
    readsBody: reads.body,
    countsOutcomes: counting.countOn !== 'all' || counting.resetOnSuccess,
    hasLockout,
    holdsSlots: kind.holdsSlots,
    settles,
    matchesPath,
  });
}
