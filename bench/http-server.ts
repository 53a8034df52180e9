// Child process of the HTTP scenario: builds every app of one framework, each on its own loopback port.

import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { errorMessage } from './contender.js';
import { type Message, serve } from './fork.js';
import { type BuiltApp, type Framework, httpVariants } from './http-apps.js';
import { loadRatekeeper } from './ratekeeper.js';

const running: Array<{ server: Server; app: BuiltApp }> = [];

function listen(app: BuiltApp): Promise<Server> {
  return new Promise((resolve, reject) => {
    const server = createServer({ keepAliveTimeout: 60_000 }, app.listener);
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => resolve(server));
  });
}

async function start(message: Message): Promise<Message> {
  const framework = String(message.framework) as Framework;
  const filter = message.filter ? new RegExp(String(message.filter)) : undefined;
  let unavailable: string | null = null;
  try {
    await loadRatekeeper();
  } catch (error) {
    unavailable = errorMessage(error);
  }
  const servers: Array<{ name: string; group: string; port: number }> = [];
  const failed: Array<{ name: string; reason: string }> = [];
  for (const [index, variant] of httpVariants(framework).entries()) {
    if (variant.group === 'ratekeeper' && unavailable) continue;
    if (filter && variant.group !== 'bare' && !filter.test(variant.name)) continue;
    try {
      const app = await variant.build({
        limit: Number(message.limit),
        windowMs: Number(message.windowMs),
        redisPort: Number(message.redisPort),
        keyHeader: String(message.keyHeader),
        prefix: `http-${framework}-${String(message.label)}-${index}:`,
      });
      const server = await listen(app);
      running.push({ server, app });
      servers.push({
        name: variant.name,
        group: variant.group,
        port: (server.address() as AddressInfo).port,
      });
    } catch (error) {
      failed.push({ name: variant.name, reason: errorMessage(error) });
    }
  }
  return { type: 'ready', servers, failed, unavailable };
}

async function stopAll(): Promise<Message> {
  for (const { server, app } of running.splice(0)) {
    server.closeAllConnections();
    await new Promise((resolve) => server.close(resolve));
    await app.close().catch(() => {});
  }
  return { type: 'stopped' };
}

serve(async (message) => {
  if (message.type === 'start') return start(message);
  if (message.type === 'stop') return stopAll();
  throw new Error(`unknown message ${message.type}`);
});
