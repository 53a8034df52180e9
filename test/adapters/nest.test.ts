// The HTTP, example, plans and attack suites on NestJS, on the Express and the Fastify platform: through
// @nestjs/testing apps driven by supertest, and the attack suite on a listening server.
import { readFileSync } from 'node:fs';
import { expect } from 'chai';
import { NEST_MAJOR } from '../support/nest-decorators.js';
import { memoryStores, redisStores } from '../support/stores.js';
import { attackSuite } from './suites/attack-suite.js';
import { bypassSuite } from './suites/bypass-suite.js';
import { exampleSuite, httpSuite } from './suites/http-suite.js';
import { keyValuesSuite } from './suites/key-values-suite.js';
import { planSuite } from './suites/plans-suite.js';
import { routePrefixSuite, wiringSuite } from './suites/wiring-suite.js';

describe(`NestJS ${NEST_MAJOR}`, () => {
  it('is the major these tests run on, for the guard as for the app (RATEKEEPER_NEST=11 for NestJS 11)', () => {
    for (const name of ['@nestjs/common', '@nestjs/core', '@nestjs/testing']) {
      const entry = new URL(import.meta.resolve(name));
      const manifest = new URL(
        `${entry.href.slice(0, entry.href.lastIndexOf(name) + name.length)}/package.json`,
      );
      const { version } = JSON.parse(readFileSync(manifest, 'utf8')) as { version: string };
      expect(Number(version.split('.')[0]), name).to.equal(NEST_MAJOR);
    }
  });
});

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
const { nestApps, nestPrefixed } = await import('./suites/nest-bypass.js');
for (const stores of [memoryStores, redisStores]) {
  bypassSuite(nestApps, stores);
  wiringSuite(nestApps, stores);
  keyValuesSuite(nestApps, stores);
  routePrefixSuite('Nest (fastify)', (limiter) => nestPrefixed('fastify', limiter), stores);
}

// Client addresses on a real Unix domain socket, on both platforms.
const { unixSocketSuite } = await import('./suites/unix-socket-suite.js');
const { nestSocketApps } = await import('./suites/nest-unix-socket.js');
for (const platform of ['express', 'fastify'] as const) unixSocketSuite(nestSocketApps(platform));

// Concurrency rules: slots held while the handler works, freed when the response ends.
const { nestConcurrencySuite, nestWsConcurrencySuite } = await import('./suites/nest-concurrency.js');
for (const platform of ['express', 'fastify'] as const) nestConcurrencySuite(platform);

// Streamed responses (StreamableFile) abandoned mid-way free their slots.
const { nestStreamsSuite } = await import('./suites/nest-streams.js');
for (const platform of ['express', 'fastify'] as const) {
  for (const stores of [memoryStores, redisStores]) nestStreamsSuite(platform, stores);
}

// GraphQL resolvers and WebSocket gateways, on NestJS 12 (the GraphQL and WebSocket packages are those of 12).
if (NEST_MAJOR === 12) {
  const { nestContextSuite } = await import('./suites/nest-contexts.js');
  for (const stores of [memoryStores, redisStores]) {
    nestContextSuite(stores);
    nestWsConcurrencySuite(stores);
  }
}
