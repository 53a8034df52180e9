// Issue 14's bypasses through Express, Koa, Fastify and Hono, on the memory store and on a real Redis: test/adapters/suites/bypass-suite.ts,
// test/adapters/suites/wiring-suite.ts and test/adapters/suites/key-values-suite.ts, one run per framework and store.

import { expressApps, koaApps } from '../fixtures/bypass-apps.js';
import { fastifyApps } from '../fixtures/bypass-fastify.js';
import { honoApps } from '../fixtures/bypass-hono.js';
import { memoryStores, redisStores } from '../support/stores.js';
import { bypassSuite } from './suites/bypass-suite.js';
import { keyValuesSuite } from './suites/key-values-suite.js';
import { wiringSuite } from './suites/wiring-suite.js';

for (const framework of [expressApps, koaApps, fastifyApps, honoApps]) {
  for (const stores of [memoryStores, redisStores]) {
    bypassSuite(framework, stores);
    wiringSuite(framework, stores);
    keyValuesSuite(framework, stores);
  }
}
