// The decision feed `npx ratekeeper watch` reads: each app process counts its decisions per rule and result, and
// publishes the counts on a Redis channel once a second. Counts only: no key, no request data.

import { assertKnownFields, fieldsOf } from '../config/known-fields.js';
import { mustBe, refuse } from '../config/refuse.js';
import { OPERATOR_DEFAULTS, REDIS_STORE_DEFAULTS } from '../defaults.js';
import { describe } from '../errors.js';
import type { Limiter } from '../limiter/limiter.js';
import type { DecisionInfo, DecisionSource } from '../limiter/observers.js';
import { parseDuration } from '../rules/duration.js';
import { unrefTimer } from '../timers.js';
import type { Decision, Duration } from '../types.js';
import { hostProcess } from '../warnings.js';

/** What publishes: an ioredis `Redis` or `Cluster` (or any client with this method, node-redis included). */
export interface FeedPublisher {
  publish(channel: string, message: string): Promise<unknown>;
}

export interface PublishDecisionCountsOptions {
  /** The connection to publish on: the app's own Redis client (the one its RedisStore uses is fine). */
  client: FeedPublisher;
  /** The RedisStore's prefix (the channel is `<prefix>:decisions`); `watch --prefix` reads it. @default 'rk' */
  prefix?: string;
  /** How often the counts are sent (one PUBLISH each time, decisions or not). @default '1s' */
  interval?: Duration;
}

/** What `publishDecisionCounts` returns. */
export interface DecisionCountsFeed {
  /** Sends what was counted since the last message, stops counting and publishing. */
  stop(): Promise<void>;
}

/**
 * One message of the feed (JSON on `<prefix>:decisions`): the decisions one process made since its
 * previous message. `rules[name]` is `[allowed, denied, locked, dryRun]`, as `ratekeeper_decisions_total`
 * counts them; rules without decisions are left out; `sources` counts decisions by where they came from.
 */
export interface DecisionCountsMessage {
  v: 1;
  /** The publishing process: `<host>:<pid>:<random>`. */
  from: string;
  /** When the message was sent (the process's clock), epoch ms. */
  atMs: number;
  /** The interval the process publishes at. */
  intervalMs: number;
  rules: Record<string, [allowed: number, denied: number, locked: number, dryRun: number]>;
  sources: Partial<Record<DecisionSource, number>>;
}

/** The channel of a prefix's decision feed. */
export function decisionChannel(prefix: string): string {
  return `${prefix}:decisions`;
}

const FIELDS = fieldsOf<PublishDecisionCountsOptions>({ client: true, prefix: true, interval: true });

/**
 * Publishes this process's decision counts per rule for `npx ratekeeper watch` (which sees every
 * process publishing under the prefix). Opt-in: a decision costs a map lookup and an increment per
 * rule; each interval costs one PUBLISH (a few dozen bytes per rule that decided something). A publish
 * that fails is dropped (those counts are lost to watch; decisions are never affected).
 * @example
 * const redis = new Redis(process.env.REDIS_URL);
 * const limiter = createLimiter({ store: new RedisStore({ client: redis, prefix: 'shop' }), rules });
 * publishDecisionCounts(limiter, { client: redis, prefix: 'shop' });
 * // then, from a shell: npx ratekeeper watch --prefix shop
 */
export function publishDecisionCounts(
  limiter: Limiter,
  options: PublishDecisionCountsOptions,
): DecisionCountsFeed {
  if (limiter === null || typeof limiter !== 'object' || typeof limiter.observe !== 'function') {
    refuse(
      'ERR_OPTION',
      'publishDecisionCounts',
      `expects a limiter (createLimiter(...)), got ${describe(limiter)}`,
    );
  }
  if (options === null || typeof options !== 'object') {
    refuse('ERR_OPTION', 'publishDecisionCounts', mustBe('options', 'an object with a client', options));
  }
  assertKnownFields(options, FIELDS, 'publishDecisionCounts');
  const { client } = options;
  if (client === null || typeof client !== 'object' || typeof client.publish !== 'function') {
    refuse(
      'ERR_OPTION',
      'publishDecisionCounts',
      mustBe('client', 'a Redis client with publish() (ioredis Redis or Cluster)', client),
    );
  }
  const prefix = options.prefix ?? REDIS_STORE_DEFAULTS.prefix;
  if (typeof prefix !== 'string' || prefix === '') {
    refuse(
      'ERR_OPTION',
      'publishDecisionCounts',
      mustBe('prefix', `a non-empty string (the RedisStore's)`, prefix),
    );
  }
  const intervalMs =
    options.interval === undefined ? OPERATOR_DEFAULTS.publishIntervalMs : parseDuration(options.interval);
  if (intervalMs === undefined) {
    refuse(
      'ERR_DURATION',
      'publishDecisionCounts',
      mustBe('interval', `a duration such as '1s' or 500`, options.interval),
    );
  }

  const channel = decisionChannel(prefix);
  const from = `${hostName()}:${hostProcess()?.pid ?? 0}:${Math.random().toString(36).slice(2, 8)}`;
  let counts = new Map<string, [number, number, number, number]>();
  let sources: Partial<Record<DecisionSource, number>> = {};
  const unobserve = limiter.observe({
    decision(decision: Decision, info: DecisionInfo) {
      if (info.mode === 'peek') return;
      sources[info.source] = (sources[info.source] ?? 0) + 1;
      for (const r of decision.rules) {
        let cells = counts.get(r.rule);
        if (cells === undefined) {
          cells = [0, 0, 0, 0];
          counts.set(r.rule, cells);
        }
        cells[r.allowed ? 0 : r.dryRun === true ? 3 : r.locked ? 2 : 1]++;
      }
    },
  });
  const send = async (): Promise<void> => {
    const message: DecisionCountsMessage = {
      v: 1,
      from,
      atMs: Date.now(),
      intervalMs,
      rules: Object.fromEntries(counts),
      sources,
    };
    counts = new Map();
    sources = {};
    try {
      await client.publish(channel, JSON.stringify(message));
    } catch {
      // Redis is down or slow: these counts are lost to watch; the next interval sends its own.
    }
  };
  const timer = setInterval(() => void send(), intervalMs);
  unrefTimer(timer);
  let stopped: Promise<void> | undefined;
  return {
    stop() {
      stopped ??= (async () => {
        clearInterval(timer);
        unobserve();
        await send();
      })();
      return stopped;
    },
  };
}

/** This machine's name for the watch's table: Node's `os.hostname()` where the runtime lends its modules, else `HOSTNAME`. */
function hostName(): string {
  const host = hostProcess() as
    | { getBuiltinModule?: (id: string) => unknown; env?: Record<string, string | undefined> }
    | undefined;
  const os = host?.getBuiltinModule?.('node:os') as { hostname?: () => string } | undefined;
  return os?.hostname?.() ?? host?.env?.HOSTNAME ?? 'host';
}
