// One app process of the soak (forked by run.ts): its limiters on the Cluster and on the standalone
// server, traffic until told to stop, figures per minute, probes after faults, the locks it lists.
import { monitorEventLoopDelay } from 'node:perf_hooks';
import { type Message, serve } from '../fork.js';
import { type RedisTarget, SoakApp } from './app.js';
import type { SoakConfig } from './config.js';
import { Ledger, type StoreName } from './ledger.js';
import { LOCKOUT_RULES } from './rules.js';
import { Traffic } from './traffic.js';

/** What one process measured in one minute of traffic. */
export interface MinuteFigures {
  minute: number;
  heapAfterGcBytes: number;
  eventLoopP99Ms: number;
  storeCallP99Ms: number;
  storeCalls: number;
}

/** Locks `locked()` listed for one rule, and the server-time bracket of the listing. */
export interface LockListing {
  store: StoreName;
  rule: string;
  lo: number;
  hi: number;
  locks: Array<{ key: string; lockedUntil: number }>;
}

const gc = (globalThis as { gc?: () => void }).gc;
const apps = new Map<StoreName, SoakApp>();
const timers: NodeJS.Timeout[] = [];
const minutes: MinuteFigures[] = [];
const unhandled: string[] = [];
let ledger: Ledger | undefined;
const traffic: Traffic[] = [];
let storeDurations: number[] = [];

process.on('unhandledRejection', (reason) =>
  unhandled.push(reason instanceof Error ? (reason.stack ?? reason.message) : String(reason)),
);
process.on('uncaughtException', (error) => unhandled.push(`uncaught: ${error.stack ?? error.message}`));

function percentile(values: number[], p: number): number {
  if (values.length === 0) return 0;
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)] as number;
}

async function start(
  config: SoakConfig,
  worker: number,
  targets: Record<StoreName, RedisTarget>,
): Promise<void> {
  ledger = new Ledger(`${config.dir}/worker-${worker}.jsonl`);
  for (const store of ['cluster', 'standalone'] as const) {
    const app = new SoakApp({
      store,
      target: targets[store],
      worker,
      ledger,
      storeTimeoutMs: config.storeTimeoutMs,
      storeRetryMs: config.storeRetryMs,
      timed: (ms) => storeDurations.push(ms),
    });
    apps.set(store, app);
  }
  await Promise.all([...apps.values()].map((app) => app.ready()));
  for (const app of apps.values()) traffic.push(new Traffic(app, worker, config.sessions, config.thinkMs));
  const loopDelay = monitorEventLoopDelay({ resolution: 10 });
  loopDelay.enable();
  const every = (ms: number, fn: () => unknown) => timers.push(setInterval(fn, ms));
  every(60_000, () => {
    gc?.();
    minutes.push({
      minute: minutes.length + 1,
      heapAfterGcBytes: process.memoryUsage().heapUsed,
      eventLoopP99Ms: loopDelay.percentile(99) / 1e6,
      storeCallP99Ms: percentile(storeDurations, 99),
      storeCalls: storeDurations.length,
    });
    loopDelay.reset();
    storeDurations = [];
  });
  every(5_000, () => Promise.all([...apps.values()].map((app) => app.clockSample())));
  every(2_000, () => Promise.all([...apps.values()].map((app) => app.unlockOne())));
}

/** Stops the traffic and waits for the requests in flight. */
async function stop(): Promise<void> {
  for (const timer of timers) clearInterval(timer);
  await Promise.all(traffic.map((t) => t.stop()));
}

async function finish(listLocks: boolean): Promise<Message> {
  await stop();
  const listings: LockListing[] = [];
  if (listLocks) {
    for (const [store, app] of apps) {
      for (const { limiter, rule } of LOCKOUT_RULES) {
        const lo = Date.now();
        const locks = await (limiter === 'api' ? app.api : app.service).locked(rule);
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
  const totals = [...apps].map(([store, app]) => ({
    store,
    decisions: app.decisions,
    admitted: app.admitted,
  }));
  await Promise.all([...apps.values()].map((app) => app.close()));
  await ledger?.close();
  return { type: 'finished', minutes, listings, totals, unhandled };
}

serve(async (message) => {
  if (message.type === 'start') {
    await start(
      message.config as SoakConfig,
      message.worker as number,
      message.targets as Record<StoreName, RedisTarget>,
    );
    return { type: 'started' };
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
