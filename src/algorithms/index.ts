// The window algorithms by type.

import type { Algorithm } from './algorithm.js';
import { calendar } from './calendar.js';
import { fixed } from './fixed.js';
import { gcra } from './gcra.js';
import { sliding } from './sliding.js';
import { slidingLog } from './sliding-log.js';
import { tokenBucket } from './token-bucket.js';
import type { WindowType } from './types.js';

export { type Algorithm, type Verdict, verdict } from './algorithm.js';
export type { OpResult, StoreLockout, StoreOp, StoreRule } from './types.js';

export const algorithms: Readonly<Record<WindowType, Algorithm<unknown>>> = {
  fixed,
  calendar,
  'sliding-log': slidingLog,
  sliding,
  'token-bucket': tokenBucket,
  gcra,
} as Record<WindowType, Algorithm<unknown>>;
