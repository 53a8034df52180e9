// Child process of bench/node-callgrind.ts, run under valgrind: serves every measured app of one framework, each
// on its own loopback port, and prints their ports as one JSON line.
// Usage: node --import tsx bench/node-callgrind-server.ts <framework> <redis port> <name regex>

import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { type Framework, httpVariants } from './http-apps.js';

const [framework, redisPort, pattern] = process.argv.slice(2) as [Framework, string, string];
const wanted = new RegExp(pattern);
const servers: Array<{ name: string; group: string; port: number }> = [];
for (const [index, variant] of httpVariants(framework).entries()) {
  if (variant.group !== 'bare' && !wanted.test(variant.name)) continue;
  const app = await variant.build({
    limit: 1_000_000,
    windowMs: 60_000,
    redisPort: Number(redisPort),
    keyHeader: 'x-api-key',
    prefix: `ncg-${framework}-${index}:`,
  });
  const server = await new Promise<Server>((resolve, reject) => {
    const s = createServer({ keepAliveTimeout: 600_000 }, app.listener);
    s.once('error', reject);
    s.listen(0, '127.0.0.1', () => resolve(s));
  });
  servers.push({ name: variant.name, group: variant.group, port: (server.address() as AddressInfo).port });
}
process.stdout.write(`${JSON.stringify(servers)}\n`);
// Serves until killed.
setInterval(() => {}, 1 << 30);
