// The conformance suite, unchanged (rule-wide limits included), on DurableObjectStore: the store runs here, its objects (RateLimitObject,
// from the built package) on workerd, each message handed to the object it names by a small Worker.
// nodejs_compat is on until the core imports no `node:` module (the Worker bundles the whole package).
import { randomBytes } from 'node:crypto';
import { join } from 'node:path';
import {
  type DurableObjectNamespaceLike,
  DurableObjectStore,
} from '../../../src/stores/durable-object/index.js';
import { ensureBuilt } from '../../support/pack.js';
import { type RunningWorker, startWorker } from '../../support/workerd.js';
import { identitySuite } from '../conformance/identities.js';
import { overrideWindowSuite } from '../conformance/override-window.js';
import { overrideSuite } from '../conformance/overrides.js';
import { ruleLimitSuite } from '../conformance/rule-limits.js';
import { conformanceSuite, type StoreUnderTest } from '../conformance/suite.js';
import { windowFunctionSuite } from '../conformance/window-function.js';

const entry = join(import.meta.dirname, '../../runtimes/apps/durable-worker.ts');

describe('DurableObjectStore (objects on workerd)', function () {
  // Building the package and starting workerd take a while on a busy machine.
  this.timeout(300_000);
  let worker: RunningWorker;
  before(async () => {
    ensureBuilt();
    worker = await startWorker({
      entry,
      durableObjects: { RATE_LIMITER: 'InspectedRateLimitObject' },
      nodejsCompat: false,
    });
  });
  after(() => worker?.close());

  /** A namespace whose stubs reach the real objects through the Worker's /do/<name>. */
  const namespace: DurableObjectNamespaceLike<string> = {
    idFromName: (name) => name,
    get: (name) => ({
      fetch: async (request) =>
        worker.fetch(`/do/${encodeURIComponent(name)}`, { method: 'POST', body: await request.text() }),
    }),
  };
  const target: StoreUnderTest = {
    name: 'DurableObjectStore',
    makeStore: (clock) =>
      new DurableObjectStore(namespace, {
        prefix: `rkt${randomBytes(5).toString('hex')}`,
        clock,
        ruleLimits: true,
      }),
  };
  conformanceSuite(target);
  overrideSuite(target);
  overrideWindowSuite(target, false);
  identitySuite(target);
  ruleLimitSuite(target);
  windowFunctionSuite(target);
});
