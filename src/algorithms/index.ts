// The window algorithms by type, and the names a rule may give them.

import type { WindowType } from '../stores/store-ops.js';
import type { Algorithm, WindowKind } from './algorithm.js';
import { calendar } from './calendar.js';
import { concurrency } from './concurrency.js';
import { fixed } from './fixed.js';
import { gcra } from './gcra.js';
import { sliding } from './sliding.js';
import { slidingLog } from './sliding-log.js';
import { tokenBucket } from './token-bucket.js';

export type { OpResult, StoreLockout, StoreOp, StoreRule } from '../stores/store-ops.js';
export {
  type Algorithm,
  bucketWindow,
  countingWindow,
  type LeaseKind,
  type Verdict,
  verdict,
  type WindowField,
  type WindowKind,
  type WindowTraits,
} from './algorithm.js';

/**
 * The registry of window types. Every list or check of types elsewhere is read from here (`WINDOW_TYPES`, a
 * type's `kind`) or from a rule's facts; the unions that name them (`WindowType`, the public `WindowSpec`),
 * the Lua and the PL/pgSQL twins are held to it by test/unit/algorithms/registry-lists.test.ts.
 */
export const algorithms: Readonly<Record<WindowType, Algorithm<unknown>>> = {
  fixed,
  calendar,
  'sliding-log': slidingLog,
  sliding,
  'token-bucket': tokenBucket,
  gcra,
  concurrency,
  // Each its own state type: `satisfies` holds the keys to WindowType (none missing, none extra).
} satisfies Record<WindowType, Pick<Algorithm<unknown>, 'kind'>> as Record<WindowType, Algorithm<unknown>>;

/** The window types, in the registry's order (PostgreSQL numbers them 1, 2, ... in this order). */
export const WINDOW_TYPES: readonly WindowType[] = Object.keys(algorithms) as WindowType[];

/** Every name a rule's `window.type` may give (types, then aliases), to the type it names. */
const BY_NAME: ReadonlyMap<string, WindowType> = new Map([
  ...WINDOW_TYPES.map((type) => [type, type] as const),
  ...(Object.entries(algorithms) as Array<[WindowType, Algorithm<unknown>]>).flatMap(([type, a]) =>
    a.kind.aliases.map((alias) => [alias, type] as const),
  ),
]);

/** The names a rule may give a window type, aliases included, in the order of the types. */
export const WINDOW_NAMES: readonly string[] = [...BY_NAME.keys()];

/** The window type a rule's `window.type` names (an alias resolved), or undefined when it names none. */
export function windowTypeOf(name: unknown): WindowType | undefined {
  return typeof name === 'string' ? BY_NAME.get(name) : undefined;
}

/** What a window type is: its fields, capacity, bound and plain-words name. */
export function windowKind(type: WindowType): WindowKind {
  return algorithms[type].kind;
}
