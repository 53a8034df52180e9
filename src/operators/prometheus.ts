// ratekeeper/prometheus: a limiter's decisions, shared-store calls, store errors and lockouts as prom-client metrics.

import { Counter, Gauge, register as globalRegistry, type Metric, type Registry } from 'prom-client';
import { assertKnownFields, fieldsOf } from '../config/known-fields.js';
import { mustBe, refuse } from '../config/refuse.js';
import { describe } from '../errors.js';
import type { Limiter } from '../limiter/limiter.js';
import type { DecisionInfo, DecisionSource, SlotEvent, StoreCallInfo } from '../limiter/observers.js';
import type { Decision, RuleResult } from '../types.js';

export interface PrometheusMetricsOptions {
  /** The registry the metrics join. @default prom-client's global `register` */
  registry?: Registry;
  /** Replaces `ratekeeper_` at the start of every metric name (`''` for none). @default 'ratekeeper_' */
  prefix?: string;
  /** Upper bounds, in seconds, of the store-call histogram's buckets. @default STORE_SECONDS_BUCKETS */
  buckets?: readonly number[];
}

/** What `prometheusMetrics` returns. */
export interface PrometheusMetrics {
  /** The registry the metrics are in (to serve `registry.metrics()` on /metrics). */
  readonly registry: Registry;
  /** Stops counting this limiter; the metrics stay registered with what they counted. */
  stop(): void;
}

/** A decision's result per rule, the `result` label. */
export type DecisionResult = 'allowed' | 'denied' | 'locked' | 'dry_run';

/**
 * The store-call histogram's default buckets, in seconds: a Redis round trip on a LAN is 0.1-1 ms, a
 * stalled server runs into `storeTimeout` (its default 500 ms shows in the 0.5 bucket).
 */
export const STORE_SECONDS_BUCKETS: readonly number[] = Object.freeze([
  0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5,
]);

const OPTION_FIELDS = fieldsOf<PrometheusMetricsOptions>({ registry: true, prefix: true, buckets: true });
const RESULTS: readonly DecisionResult[] = ['allowed', 'denied', 'locked', 'dry_run'];
const SOURCES: readonly DecisionSource[] = ['store', 'insurance', 'deny_cache', 'policy'];
const SOURCE_INDEX: Record<DecisionSource, number> = { store: 0, insurance: 4, deny_cache: 8, policy: 12 };
const CELLS = RESULTS.length * SOURCES.length;
/** Operations of a shared store whose errors are counted from zero (see `StoreCallInfo.operation`). */
const STORE_OPERATIONS = ['check', 'record', 'report', 'reset', 'override', 'status', 'locked', 'ping'];

/** The metrics of one registry and prefix, shared by every limiter counted into them. */
interface Sink {
  decisions: Counter<'rule' | 'result' | 'source'>;
  storeSeconds: StoreSeconds;
  storeErrors: Counter<'operation'>;
  lockouts: Counter<'rule'>;
  limitChanges: Counter<'rule'>;
  slotsInFlight: Gauge<'rule'>;
  slotChanges: Counter<'rule' | 'change'>;
  /** Per limiter counted: decision counts per rule, flushed into `decisions` at each scrape. */
  tallies: Set<Tally>;
  /** The limiters counted into these metrics now: asked again, the same handle (never counted twice). */
  handles: WeakMap<Limiter, PrometheusMetrics>;
}

/**
 * A limiter's decision counts: plain numbers per rule, 16 cells (source x result), so a decision costs
 * a Map lookup and an increment per rule; `flush` adds what was counted since the last scrape.
 */
class Tally {
  readonly #cells = new Map<string, { counted: Float64Array; flushed: Float64Array }>();

  count(rule: string, cell: number): void {
    let entry = this.#cells.get(rule);
    if (entry === undefined) {
      entry = { counted: new Float64Array(CELLS), flushed: new Float64Array(CELLS) };
      this.#cells.set(rule, entry);
    }
    (entry.counted[cell] as number)++;
  }

  flush(counter: Sink['decisions']): void {
    for (const [rule, { counted, flushed }] of this.#cells) {
      for (let cell = 0; cell < CELLS; cell++) {
        const delta = (counted[cell] as number) - (flushed[cell] as number);
        if (delta === 0) continue;
        flushed[cell] = counted[cell] as number;
        const source = SOURCES[Math.floor(cell / RESULTS.length)] as DecisionSource;
        const result = RESULTS[cell % RESULTS.length] as DecisionResult;
        counter.inc({ rule, result, source }, delta);
      }
    }
  }
}

/** One operation's observations: per bucket (the last one +Inf, not cumulative), their sum and count. */
interface Buckets {
  counts: Float64Array;
  sum: number;
  count: number;
}

/**
 * The store-call histogram as a prom-client metric of its own: an observation is a bucket search and
 * three additions (prom-client's Histogram hashes its labels on every observe: about 1 µs, a fifth of
 * what a Redis decision costs this process). Read through the registry as any histogram: `_bucket`
 * (cumulative, `le`), `_sum`, `_count` per operation.
 */
class StoreSeconds {
  readonly type = 'histogram';
  readonly aggregator = 'sum';
  readonly #bounds: readonly number[];
  readonly #operations = new Map<string, Buckets>();

  constructor(
    readonly name: string,
    readonly help: string,
    bounds: readonly number[],
    registry: Registry,
  ) {
    this.#bounds = [...bounds];
    registry.registerMetric(this as unknown as Metric);
  }

  observe(operation: string, seconds: number): void {
    let entry = this.#operations.get(operation);
    if (entry === undefined) {
      entry = { counts: new Float64Array(this.#bounds.length + 1), sum: 0, count: 0 };
      this.#operations.set(operation, entry);
    }
    const bounds = this.#bounds;
    let i = 0;
    while (i < bounds.length && seconds > (bounds[i] as number)) i++;
    (entry.counts[i] as number)++;
    entry.sum += seconds;
    entry.count++;
  }

  /** The values in prom-client's form: what `registry.metrics()` prints and `getMetricsAsJSON()` returns. */
  async get() {
    const values: Array<{ metricName: string; labels: Record<string, string | number>; value: number }> = [];
    for (const [operation, { counts, sum, count }] of this.#operations) {
      let cumulative = 0;
      for (let i = 0; i <= this.#bounds.length; i++) {
        cumulative += counts[i] as number;
        const le = i < this.#bounds.length ? (this.#bounds[i] as number) : '+Inf';
        values.push({ metricName: `${this.name}_bucket`, labels: { le, operation }, value: cumulative });
      }
      values.push({ metricName: `${this.name}_sum`, labels: { operation }, value: sum });
      values.push({ metricName: `${this.name}_count`, labels: { operation }, value: count });
    }
    return { name: this.name, help: this.help, type: this.type, aggregator: this.aggregator, values };
  }

  /** `registry.resetMetrics()`. */
  reset(): void {
    this.#operations.clear();
  }
}

/** Sinks per registry and prefix: a second limiter on the same registry counts into the same metrics. */
const SINKS = new WeakMap<Registry, Map<string, Sink>>();

/**
 * Counts a limiter's work in prom-client metrics (names with the default prefix):
 * - `ratekeeper_decisions_total{rule,result,source}`: each rule of each decision (`check`, `consume`,
 *   `record`, the adapters, `wrap`, `acquire`'s tries; not `peek`), with that rule's own result
 *   (`allowed`, `denied`, `locked`, `dry_run`: a dry-run rule that would have denied) and where the
 *   answer came from (`store`, `insurance`, `deny_cache`, or `policy`: `onStoreError` 'allow'/'deny').
 * - `ratekeeper_store_seconds{operation}`: a histogram of shared-store calls (not the memory store).
 * - `ratekeeper_store_errors_total{operation}`: shared-store calls that failed or timed out.
 * - `ratekeeper_lockouts_total{rule}`: locks placed.
 * - `ratekeeper_limit_changes_total{rule}`: rule-wide limits set or cleared through this limiter (`setLimit`).
 * - `ratekeeper_slots_in_flight{rule}`: concurrency slots this process holds now (a gauge: summed over
 *   every process sharing the store, the requests in flight).
 * - `ratekeeper_slots_total{rule,change}`: concurrency slots `released`, and `lapsed`: no longer held
 *   when released, or never released (a stall longer than the lease, a reset, a response whose client
 *   went that its handler never ended, the limiter closed while holding them).
 * Label values are rule names and fixed words, never keys. Several limiters may share a registry;
 * their counts add up (give their rules different names to tell them apart). Called again for a limiter
 * already counted into the same registry and prefix, it returns the same handle (nothing counted twice).
 * @example
 * const metrics = prometheusMetrics(limiter);
 * app.get('/metrics', async (_req, res) => {
 *   res.type(metrics.registry.contentType).send(await metrics.registry.metrics());
 * });
 */
export function prometheusMetrics(
  limiter: Limiter,
  options: PrometheusMetricsOptions = {},
): PrometheusMetrics {
  if (limiter === null || typeof limiter !== 'object' || typeof limiter.observe !== 'function') {
    refuse(
      'ERR_OPTION',
      'prometheusMetrics',
      `expects a limiter (createLimiter(...)), got ${describe(limiter)}`,
    );
  }
  if (options === null || typeof options !== 'object') {
    refuse('ERR_OPTION', 'prometheusMetrics', mustBe('options', 'an object', options));
  }
  assertKnownFields(options, OPTION_FIELDS, 'prometheusMetrics');
  const registry = options.registry ?? globalRegistry;
  if (
    registry === null ||
    typeof registry !== 'object' ||
    typeof registry.getSingleMetric !== 'function' ||
    typeof registry.registerMetric !== 'function'
  ) {
    refuse('ERR_OPTION', 'prometheusMetrics', mustBe('registry', 'a prom-client Registry', registry));
  }
  const prefix = options.prefix ?? 'ratekeeper_';
  if (typeof prefix !== 'string' || !/^([a-zA-Z_:][a-zA-Z0-9_:]*)?$/.test(prefix)) {
    refuse(
      'ERR_OPTION',
      'prometheusMetrics',
      mustBe('prefix', `letters, digits, '_' or ':' and not start with a digit`, prefix),
    );
  }
  const buckets = options.buckets ?? STORE_SECONDS_BUCKETS;
  if (
    !Array.isArray(buckets) ||
    buckets.length === 0 ||
    !buckets.every(
      (b, i) => typeof b === 'number' && b > 0 && Number.isFinite(b) && (i === 0 || b > buckets[i - 1]),
    )
  ) {
    refuse(
      'ERR_OPTION',
      'prometheusMetrics',
      mustBe('buckets', 'increasing positive numbers of seconds', buckets),
    );
  }

  const sink = sinkOf(registry, prefix, buckets);
  const counting = sink.handles.get(limiter);
  if (counting !== undefined) return counting;
  const tally = new Tally();
  sink.tallies.add(tally);
  // Series that exist from the start, so rate() and alerts see the first increase.
  for (const rule of limiter.rules) {
    for (const result of ['allowed', 'denied'] as const)
      sink.decisions.inc({ rule: rule.name, result, source: 'store' }, 0);
    if (rule.lockout !== undefined) sink.lockouts.inc({ rule: rule.name }, 0);
    sink.limitChanges.inc({ rule: rule.name }, 0);
  }
  for (const facts of limiter.ruleFacts) {
    if (!facts.holdsSlots) continue;
    sink.slotsInFlight.inc({ rule: facts.name }, 0);
    for (const change of ['released', 'lapsed'] as const)
      sink.slotChanges.inc({ rule: facts.name, change }, 0);
  }

  const { decisions, storeSeconds, storeErrors, lockouts, slotsInFlight, slotChanges } = sink;
  /** The slots this limiter holds per rule, taken off the gauge when it stops being counted. */
  const holding = new Map<string, number>();
  let sharedStore = false;
  const unobserve = limiter.observe({
    decision(decision: Decision, info: DecisionInfo) {
      if (info.mode === 'peek') return;
      const base = SOURCE_INDEX[info.source];
      for (const r of decision.rules) tally.count(r.rule, base + resultIndex(r));
    },
    storeCall(info: StoreCallInfo) {
      // Told only for a shared store: its error series start at zero with its first call.
      if (!sharedStore) {
        sharedStore = true;
        for (const operation of STORE_OPERATIONS) storeErrors.inc({ operation }, 0);
      }
      storeSeconds.observe(info.operation, info.seconds);
      if (info.error !== undefined) storeErrors.inc({ operation: info.operation });
    },
    lockout(event) {
      lockouts.inc({ rule: event.rule });
    },
    limitChange(event) {
      sink.limitChanges.inc({ rule: event.rule });
    },
    slots(event: SlotEvent) {
      const held = event.change === 'held' ? event.slots : -event.slots;
      holding.set(event.rule, (holding.get(event.rule) ?? 0) + held);
      slotsInFlight.inc({ rule: event.rule }, held);
      if (event.change !== 'held') slotChanges.inc({ rule: event.rule, change: event.change }, event.slots);
    },
  });
  let stopped = false;
  const handle: PrometheusMetrics = {
    registry,
    stop() {
      if (stopped) return;
      stopped = true;
      unobserve();
      // What was counted stays: flushed now, then the tally leaves the scrape.
      tally.flush(decisions);
      sink.tallies.delete(tally);
      // Slots still held are this limiter's no more: the gauge counts the limiters counted.
      for (const [rule, held] of holding) if (held !== 0) slotsInFlight.dec({ rule }, held);
      sink.handles.delete(limiter);
    },
  };
  sink.handles.set(limiter, handle);
  return handle;
}

/** The cell of a rule's result within its source's four: allowed, denied, locked, dry_run. */
function resultIndex(r: RuleResult): number {
  if (r.allowed) return 0;
  if (r.dryRun === true) return 3;
  return r.locked ? 2 : 1;
}

function sinkOf(registry: Registry, prefix: string, buckets: readonly number[]): Sink {
  let byPrefix = SINKS.get(registry);
  if (byPrefix === undefined) {
    byPrefix = new Map();
    SINKS.set(registry, byPrefix);
  }
  const known = byPrefix.get(prefix);
  // Still registered (registry.clear() drops them: then they are made anew).
  if (known !== undefined && registry.getSingleMetric(`${prefix}decisions_total`) === known.decisions)
    return known;
  const names = {
    decisions: `${prefix}decisions_total`,
    storeSeconds: `${prefix}store_seconds`,
    storeErrors: `${prefix}store_errors_total`,
    lockouts: `${prefix}lockouts_total`,
    limitChanges: `${prefix}limit_changes_total`,
    slotsInFlight: `${prefix}slots_in_flight`,
    slotChanges: `${prefix}slots_total`,
  };
  for (const name of Object.values(names)) {
    if (registry.getSingleMetric(name) !== undefined) {
      refuse(
        'ERR_OPTION',
        'prometheusMetrics',
        `the registry already has a metric named '${name}' not made by prometheusMetrics; pass another prefix or registry`,
      );
    }
  }
  const tallies = new Set<Tally>();
  const decisions: Sink['decisions'] = new Counter({
    name: names.decisions,
    help: 'Rate-limit decisions per rule, by the rule result and where the answer came from.',
    labelNames: ['rule', 'result', 'source'] as const,
    registers: [registry],
    collect() {
      for (const tally of tallies) tally.flush(decisions);
    },
  });
  const sink: Sink = {
    decisions,
    storeSeconds: new StoreSeconds(
      names.storeSeconds,
      'Duration of calls to the shared rate-limit store (Redis), timeouts included.',
      buckets,
      registry,
    ),
    storeErrors: new Counter({
      name: names.storeErrors,
      help: 'Calls to the shared rate-limit store that failed or timed out, by operation.',
      labelNames: ['operation'] as const,
      registers: [registry],
    }),
    lockouts: new Counter({
      name: names.lockouts,
      help: 'Lockouts placed, per rule.',
      labelNames: ['rule'] as const,
      registers: [registry],
    }),
    limitChanges: new Counter({
      name: names.limitChanges,
      help: 'Rule-wide limits set or cleared through this limiter (setLimit), per rule.',
      labelNames: ['rule'] as const,
      registers: [registry],
    }),
    slotsInFlight: new Gauge({
      name: names.slotsInFlight,
      help: 'Concurrency slots held by this process now, per rule (summed over processes: requests in flight).',
      labelNames: ['rule'] as const,
      registers: [registry],
    }),
    slotChanges: new Counter({
      name: names.slotChanges,
      help: 'Concurrency slots released, or lapsed (gone before their release: a stall past the lease, a reset, a response never ended), per rule.',
      labelNames: ['rule', 'change'] as const,
      registers: [registry],
    }),
    tallies,
    handles: new WeakMap(),
  };
  byPrefix.set(prefix, sink);
  return sink;
}
