// One app process of the soak (forked by run.ts): its limiters on the Cluster, the standalone Redis and
// PostgreSQL, traffic and work in flight until told to stop, its resources minute by minute, probes after
// faults, the locks it lists and the slots still held at the end.
import { type Message, serve } from '../fork.js';
import { SoakApp } from './app.js';
import type { StoreTarget } from './backends.js';
import type { SoakConfig } from './config.js';
import { Ledger, STORE_NAMES, type StoreName } from './ledger.js';
import { ResourceSampler } from './resources.js';
import { LOCKOUT_RULES } from './rules.js';
import { Traffic } from './traffic.js';
import { FlightApp, type LeftHolder, patiently } from './work-in-flight.js';

export type { MinuteFigures } from './resources.js';

/** Locks `locked()` listed for one rule, and the server-time bracket of the listing. */
export interface LockListing {
  store: StoreName;
  rule: string;
  lo: number;
  hi: number;
  locks: Array<{ key: string; lockedUntil: number }>;
}

const apps = new Map<StoreName, SoakApp>();
const flights: FlightApp[] = [];
const timers: NodeJS.Timeout[] = [];
const unhandled: string[] = [];
let ledger: Ledger | undefined;
let flightLedger: Ledger | undefined;
let sampler: ResourceSampler | undefined;
const traffic: Traffic[] = [];
let stopped: Promise<void> | undefined;

process.on('unhandledRejection', (reason) =>
  unhandled.push(reason instanceof Error ? (reason.stack ?? reason.message) : String(reason)),
);
process.on('uncaughtException', (error) => unhandled.push(`uncaught: ${error.stack ?? error.message}`));

async function start(
  config: SoakConfig,
  worker: number,
  targets: Record<StoreName, StoreTarget>,
): Promise<void> {
  ledger = new Ledger(`${config.dir}/worker-${worker}.jsonl`);
  flightLedger = new Ledger(`${config.dir}/worker-${worker}-flight.jsonl`);
  sampler = new ResourceSampler(config.sampleEveryMs);
  const timed = sampler.timed;
  for (const store of STORE_NAMES) {
    const app = new SoakApp({
      store,
      target: targets[store],
      worker,
      ledger,
      storeTimeoutMs: config.storeTimeoutMs,
      storeRetryMs: config.storeRetryMs,
      timed,
    });
    apps.set(store, app);
  }
  await Promise.all([...apps.values()].map((app) => app.ready()));
  for (const [store, app] of apps) {
    traffic.push(new Traffic(app, worker, config.sessions, config.thinkMs));
    const flight = new FlightApp({
      store,
      backend: app.backend,
      worker,
      ledger: flightLedger,
      sessions: config.flightSessions,
      storeTimeoutMs: config.storeTimeoutMs,
      storeRetryMs: config.storeRetryMs,
      timed,
    });
    flights.push(flight);
    await flight.start();
  }
  const every = (ms: number, fn: () => unknown) => timers.push(setInterval(fn, ms));
  every(5_000, () => Promise.all([...apps.values()].map((app) => app.clockSample())));
  every(2_000, () => Promise.all([...apps.values()].map((app) => app.unlockOne())));
}

/** Stops the traffic and waits for the requests in flight (once, however often asked). */
function stop(): Promise<void> {
  stopped ??= (async () => {
    for (const timer of timers) clearInterval(timer);
    sampler?.stop();
    await Promise.all([...traffic.map((t) => t.stop()), ...flights.map((f) => f.stop())]);
  })();
  return stopped;
}

async function finish(listLocks: boolean): Promise<Message> {
  await stop();
  const listings: LockListing[] = [];
  if (listLocks) {
    for (const [store, app] of apps) {
      for (const { limiter, rule } of LOCKOUT_RULES) {
        const lo = Date.now();
        const locks = await patiently(() => (limiter === 'api' ? app.api : app.service).locked(rule));
        listings.push({
          store,
          rule,
          lo,
          hi: Date.now(),
          locks: locks.map((l) => ({ key: l.key, lockedUntil: l.lockedUntil })),
        });
      }
    }
  }
  const leftHolders: LeftHolder[] = (await Promise.all(flights.map((f) => f.leftHolders()))).flat();
  await Promise.all(flights.map((f) => f.close()));
  await Promise.all([...apps.values()].map((app) => app.close()));
  await ledger?.close();
  await flightLedger?.close();
  return { type: 'finished', minutes: sampler?.minutes ?? [], listings, leftHolders, unhandled };
}

serve(async (message) => {
  if (message.type === 'start') {
    await start(
      message.config as SoakConfig,
      message.worker as number,
      message.targets as Record<StoreName, StoreTarget>,
    );
    return { type: 'started', pid: process.pid };
  }
  if (message.type === 'probe') {
    // Each store's own probe; the answer is the longer wait.
    const waits = await Promise.all(
      (message.stores as StoreName[]).map((store) => {
        const app = apps.get(store);
        if (app === undefined) throw new Error(`no app on ${store}`);
        return app.probe();
      }),
    );
    return { type: 'probed', ms: Math.max(...waits) };
  }
  if (message.type === 'stop') {
    await stop();
    return { type: 'stopped' };
  }
  if (message.type === 'finish') return finish(message.listLocks === true);
  throw new Error(`unknown message ${message.type}`);
});
