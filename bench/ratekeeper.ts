// Our limiter as contenders: every window type on both stores, multi-rule checks and the deny cache.
// Loaded with a dynamic import so that the benchmark runs, peers only, before src/ exists.

import { resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import type { Redis } from 'ioredis';
import {
  type Contender,
  type ContenderContext,
  closeRedis,
  type LimitSpec,
  namespace,
  openRedis,
} from './contender.js';

/** The slice of ratekeeper's public API the benchmark uses (its documented contract: README.md and docs/api.md). */
export interface RatekeeperDecision {
  allowed: boolean;
}
export interface RatekeeperLimiter {
  consume(rule: string, key: string, cost?: number): Promise<RatekeeperDecision>;
  check(req: {
    method: string;
    path: string;
    headers: Record<string, string>;
    user?: unknown;
  }): Promise<RatekeeperDecision>;
  close(): Promise<void>;
}
export interface RatekeeperRule {
  name: string;
  key: string;
  limit: number;
  window: Record<string, unknown>;
}
export interface RatekeeperOptions {
  store?: unknown;
  rules: RatekeeperRule[];
  denyCache?: boolean | { maxKeys?: number };
}
export interface RatekeeperModule {
  createLimiter(options: RatekeeperOptions): RatekeeperLimiter;
  MemoryStore: new () => unknown;
  RedisStore: new (options: { client: Redis; prefix?: string }) => unknown;
}

let loaded: Promise<RatekeeperModule> | undefined;

/** Which module stands for ratekeeper in this run, for the report. */
export function ratekeeperSource(): string {
  return process.env.BENCH_RATEKEEPER_MODULE ?? 'src/index.ts (through tsx)';
}

/**
 * Imports `src/index.ts` once (or the module at BENCH_RATEKEEPER_MODULE, a path from the working
 * directory, e.g. a built `dist/index.js`); rejects while it does not exist yet.
 */
export function loadRatekeeper(): Promise<RatekeeperModule> {
  const override = process.env.BENCH_RATEKEEPER_MODULE;
  // A computed specifier: the compiler does not resolve it, so bench/ compiles before src/ exists.
  const url = override
    ? pathToFileURL(resolve(override)).href
    : new URL('../src/index.js', import.meta.url).href;
  loaded ??= import(url) as Promise<RatekeeperModule>;
  return loaded;
}

/** Our window types, each configured for a window of `windowMs`. */
export const windowTypes: ReadonlyArray<{
  type: string;
  window: (windowMs: number) => Record<string, unknown>;
}> = [
  { type: 'fixed', window: (size) => ({ type: 'fixed', size }) },
  // A day: a calendar boundary inside a run would refill the window and blur the exactness count.
  { type: 'calendar', window: () => ({ type: 'calendar', unit: 'day' }) },
  { type: 'sliding-log', window: (size) => ({ type: 'sliding-log', size }) },
  { type: 'sliding', window: (size) => ({ type: 'sliding', size, buckets: 10 }) },
  { type: 'token-bucket', window: (size) => ({ type: 'token-bucket', size }) },
  { type: 'gcra', window: (size) => ({ type: 'gcra', size }) },
];

interface Setup {
  store: 'redis' | 'memory';
  rules: (spec: LimitSpec) => RatekeeperRule[];
  /** consume(rule, key) for one rule; check(request) for several rules of one identity. */
  via: 'consume' | 'check';
  denyCache?: boolean;
}

async function createOurs(setup: Setup, spec: LimitSpec, ctx: ContenderContext) {
  const rk = await loadRatekeeper();
  let client: Redis | undefined;
  let store: unknown;
  if (setup.store === 'redis') {
    if (typeof rk.RedisStore !== 'function') throw new Error('src/index.ts exports no RedisStore yet');
    client = openRedis(ctx.redisPort);
    store = new rk.RedisStore(
      ctx.prefix === undefined ? { client } : { client, prefix: namespace(ctx.prefix) },
    );
  } else {
    store = new rk.MemoryStore();
  }
  const rules = setup.rules(spec);
  // Explicit either way: the plain contenders measure the Redis path even on a hot denied key.
  const options: RatekeeperOptions = { store, rules, denyCache: setup.denyCache === true };
  const limiter = rk.createLimiter(options);
  const ruleName = rules[0]?.name ?? 'r1';
  const headers: Record<string, string> = {};
  const decide =
    setup.via === 'consume'
      ? async (key: string) => (await limiter.consume(ruleName, key)).allowed
      : async (key: string) =>
          (await limiter.check({ method: 'GET', path: '/', headers, user: key })).allowed;
  return {
    decide,
    async close() {
      try {
        await limiter.close();
      } finally {
        if (client) await closeRedis(client);
      }
    },
  };
}

/** `count` fixed-window rules of one identity, windows of 1x..count x the spec's window. */
function fixedRules(count: number) {
  return (spec: LimitSpec): RatekeeperRule[] =>
    Array.from({ length: count }, (_, i) => ({
      name: `r${i + 1}`,
      key: 'user',
      limit: spec.limit,
      window: { type: 'fixed', size: spec.windowMs * (i + 1) },
    }));
}

function ours(name: string, setup: Setup, note: string, extra: Partial<Contender> = {}): Contender {
  return {
    name,
    store: setup.store,
    group: 'ratekeeper',
    note,
    ...extra,
    create: (spec, ctx) => createOurs(setup, spec, ctx),
  };
}

/** Every ratekeeper contender; empty (with the reason thrown) while src/index.ts cannot be imported. */
export async function ratekeeperContenders(): Promise<Contender[]> {
  await loadRatekeeper();
  const list: Contender[] = [];
  for (const store of ['redis', 'memory'] as const) {
    for (const { type, window } of windowTypes) {
      const rules = (spec: LimitSpec) => [
        { name: 'r1', key: 'user', limit: spec.limit, window: window(spec.windowMs) },
      ];
      list.push(ours(`ratekeeper ${store} ${type}`, { store, rules, via: 'consume' }, `consume(), ${type}`));
    }
  }
  for (const count of [1, 3, 5]) {
    const setup: Setup = { store: 'redis', rules: fixedRules(count), via: 'check' };
    list.push(
      ours(`ratekeeper redis fixed x${count} rules`, setup, `check(), ${count} rule(s) of one identity`),
    );
  }
  list.push(
    ours(
      'ratekeeper redis fixed + denyCache',
      { store: 'redis', rules: fixedRules(1), via: 'consume', denyCache: true },
      'consume(), local cache of denied keys',
      { scenarios: ['hot'] },
    ),
  );
  return list;
}
