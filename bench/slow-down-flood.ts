// One client opening 1500 connections to a slowDown route (the outside attack on slowDown): how many requests
// the app holds waiting at once (counted until each one's connection closes), the longest delay, the app's RSS
// at the peak, and its heap after a full GC while the requests are held and once the client went.
// `npx tsx bench/slow-down-flood.ts [express|koa|fastify|hono ...]`; the app runs in a process of its own
// (bench/slow-down-flood-server.ts).
import { fork } from 'node:child_process';
import http from 'node:http';

interface Stats {
  held: number;
  mostHeld: number;
  longestMs: number;
  rss: number;
  peakRss: number;
  heapUsed: number;
}

const CONNECTIONS = 1500;
const MB = 1024 * 1024;
const settle = () => new Promise((resolve) => setTimeout(resolve, 100));

async function run(framework: string) {
  const child = fork(new URL('./slow-down-flood-server.ts', import.meta.url).pathname, [framework], {
    execArgv: ['--import', 'tsx', '--expose-gc'],
  });
  const port = await new Promise<number>((resolve) =>
    child.once('message', (m: { port: number }) => resolve(m.port)),
  );
  const stats = () =>
    new Promise<Stats>((resolve) => {
      child.once('message', (m: Stats) => resolve(m));
      child.send('stats');
    });
  const before = await stats();
  let answered = 0;
  let refused = 0;
  const requests: http.ClientRequest[] = [];
  for (let i = 0; i < CONNECTIONS; i++) {
    const req = http.get({ host: '127.0.0.1', port, path: '/items', agent: false }, (res) => {
      answered++;
      if (res.statusCode === 429) refused++;
      res.resume();
    });
    req.on('error', () => {});
    requests.push(req);
  }
  // Every request either answered or waiting, and no wait started for a while: the peak is behind us.
  let peak = await stats();
  for (let quiet = 0; quiet < 10; ) {
    await settle();
    const now = await stats();
    quiet = answered + now.held >= CONNECTIONS && now.mostHeld === peak.mostHeld ? quiet + 1 : 0;
    peak = now;
  }
  for (const req of requests) req.destroy();
  let after = await stats();
  while (after.held > 0) {
    await settle();
    after = await stats();
  }
  child.send('exit');
  return {
    framework,
    mostHeld: peak.mostHeld,
    refused,
    longestS: peak.longestMs / 1000,
    rssPeakMB: ((peak.peakRss - before.rss) / MB).toFixed(1),
    heldHeapMB: ((peak.heapUsed - before.heapUsed) / MB).toFixed(1),
    heapAfterMB: ((after.heapUsed - before.heapUsed) / MB).toFixed(1),
    rssAfterMB: ((after.rss - before.rss) / MB).toFixed(1),
    heldAfter: after.held,
  };
}

const frameworks = process.argv.slice(2);
for (const framework of frameworks.length > 0 ? frameworks : ['express', 'koa', 'fastify', 'hono'])
  console.log(JSON.stringify(await run(framework)));
