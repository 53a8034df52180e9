// The HTTP, example, plans and attack suites on NestJS, on the Express and the Fastify platform: through
// @nestjs/testing apps driven by supertest, and the attack suite on a listening server.
import '../support/nest-decorators.js';
import { memoryStores, redisStores } from '../support/stores.js';
import { attackSuite } from './suites/attack-suite.js';
import { bypassSuite } from './suites/bypass-suite.js';
import { exampleSuite, httpSuite } from './suites/http-suite.js';
import { planSuite } from './suites/plans-suite.js';
import { wiringSuite } from './suites/wiring-suite.js';

// After the hooks are registered: the Nest files compile with legacy decorators.
const { nestFramework, nestHarness } = await import('./suites/nest-harness.js');

for (const platform of ['express', 'fastify'] as const) {
  const harness = nestHarness(platform);
  for (const stores of [memoryStores, redisStores]) {
    httpSuite(harness, stores);
    exampleSuite(harness, stores);
    planSuite(harness, stores);
    attackSuite(nestFramework(platform), stores);
  }
}

const { nestCases, nestUnits } = await import('./suites/nest-cases.js');
nestUnits();
for (const platform of ['express', 'fastify'] as const) nestCases(platform);

// The bypass suite and the wirings, on the Express platform (the guard's code is the same on Fastify).
const { nestApps } = await import('./suites/nest-bypass.js');
for (const stores of [memoryStores, redisStores]) {
  bypassSuite(nestApps, stores);
  wiringSuite(nestApps, stores);
}
