// Client addresses on a real Unix domain socket, on Express, Koa, Fastify and Hono (Nest's two platforms: in
// test/adapters/nest.test.ts, so that they run on both Nest majors).
import {
  expressSocketApps,
  fastifySocketApps,
  honoSocketApps,
  koaSocketApps,
} from '../fixtures/unix-socket-apps.js';
import { unixSocketSuite } from './suites/unix-socket-suite.js';

for (const framework of [expressSocketApps, koaSocketApps, fastifySocketApps, honoSocketApps])
  unixSocketSuite(framework);
