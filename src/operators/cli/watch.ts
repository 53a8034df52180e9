// `ratekeeper watch`: live decisions per rule, from every app process publishing its counts (publishDecisionCounts)
// on `<prefix>:decisions`; redrawn in place on a terminal, one JSON object per line with --json.
import type { Redis } from 'ioredis';
import { type DecisionCountsMessage, decisionChannel } from '../decision-feed.js';
import type { CliArgs } from './args.js';
import { OperatorError } from './connect.js';
import { type Output, printable, table } from './output.js';
import type { Targets } from './targets.js';

type Cells = [allowed: number, denied: number, locked: number, dryRun: number];

/** One rule in a view: counts over the window, per second, and since watch started. */
export interface WatchRow {
  rule: string;
  allowed: number;
  denied: number;
  locked: number;
  dryRun: number;
  /** Decisions per second over the window (all results). */
  perSecond: number;
  /** Since watch started: [allowed, denied, locked, dryRun]. */
  total: Cells;
}

/** What `watch --json` prints at each refresh. */
export interface WatchView {
  atMs: number;
  /** The span the counts cover: `--window`, or less right after start. */
  windowMs: number;
  /** Processes heard from within the last three of their intervals. */
  publishers: number;
  rules: WatchRow[];
  /** Decisions over the window by where they came from (store, insurance, deny_cache, policy). */
  sources: Record<string, number>;
}

const HOME_CLEAR = '\u001b[H\u001b[2J';

export async function watch(targets: Targets, args: CliArgs, out: Output): Promise<void> {
  const redis = targets.redis as Redis;
  const only = args.positionals;
  for (const rule of only) if (targets.names.length > 0) targets.limiterFor(rule); // unknown rule: an error
  const feed = new Feed(Date.now());
  const channel = decisionChannel(args.prefix);
  redis.on('message', (from: string, text: string) => {
    if (from === channel) feed.add(text, Date.now());
  });
  try {
    await redis.subscribe(channel);
  } catch (error) {
    throw new OperatorError(`cannot subscribe to ${channel}: ${(error as Error).message}`);
  }
  // Rules the module names are shown from the start, at zero.
  const known = only.length > 0 ? only : [...targets.names];
  // The command line's connection does not reconnect: a lost Redis ends watch with the cause, not a view of zeros.
  const lost = new Promise<never>((_, reject) => {
    redis.once('end', () =>
      reject(
        new OperatorError(
          `lost the connection to Redis (${redis.options.host}:${redis.options.port}); watch stopped`,
        ),
      ),
    );
  });
  lost.catch(() => {}); // the loop below is what reports it
  for (;;) {
    await Promise.race([new Promise((resolve) => setTimeout(resolve, args.intervalMs)), lost]);
    const view = feed.view(Date.now(), args.windowMs, known, only);
    if (out.json) out.value(view);
    else render(view, args, out);
    if (args.once) return;
  }
}

/** The messages heard, kept for the window; totals since start. */
class Feed {
  readonly #startMs: number;
  readonly #heard: Array<{ atMs: number; message: DecisionCountsMessage }> = [];
  readonly #totals = new Map<string, Cells>();
  readonly #lastFrom = new Map<string, { atMs: number; intervalMs: number }>();

  constructor(startMs: number) {
    this.#startMs = startMs;
  }

  add(text: string, nowMs: number): void {
    let message: DecisionCountsMessage;
    try {
      message = JSON.parse(text) as DecisionCountsMessage;
    } catch {
      return; // not one of ours
    }
    if (message?.v !== 1 || typeof message.rules !== 'object' || message.rules === null) return;
    this.#heard.push({ atMs: nowMs, message });
    this.#lastFrom.set(String(message.from), { atMs: nowMs, intervalMs: Number(message.intervalMs) || 1000 });
    for (const [rule, cells] of Object.entries(message.rules)) {
      const total = this.#totals.get(rule) ?? [0, 0, 0, 0];
      for (let i = 0; i < 4; i++) total[i] = (total[i] as number) + (Number(cells[i]) || 0);
      this.#totals.set(rule, total);
    }
  }

  view(nowMs: number, windowMs: number, known: readonly string[], only: readonly string[]): WatchView {
    while (this.#heard.length > 0 && (this.#heard[0]?.atMs as number) <= nowMs - windowMs)
      this.#heard.shift();
    const spanMs = Math.max(1, Math.min(windowMs, nowMs - this.#startMs));
    const inWindow = new Map<string, Cells>();
    const sources: Record<string, number> = {};
    for (const { message } of this.#heard) {
      for (const [rule, cells] of Object.entries(message.rules)) {
        const sum = inWindow.get(rule) ?? [0, 0, 0, 0];
        for (let i = 0; i < 4; i++) sum[i] = (sum[i] as number) + (Number(cells[i]) || 0);
        inWindow.set(rule, sum);
      }
      for (const [source, n] of Object.entries(message.sources ?? {}))
        sources[source] = (sources[source] ?? 0) + (Number(n) || 0);
    }
    const names = [...new Set([...known, ...this.#totals.keys()])].filter(
      (rule) => only.length === 0 || only.includes(rule),
    );
    const rules = names.map((rule): WatchRow => {
      const [allowed, denied, locked, dryRun] = inWindow.get(rule) ?? [0, 0, 0, 0];
      return {
        rule,
        allowed,
        denied,
        locked,
        dryRun,
        perSecond: round(((allowed + denied + locked + dryRun) * 1000) / spanMs),
        total: [...(this.#totals.get(rule) ?? [0, 0, 0, 0])] as Cells,
      };
    });
    let publishers = 0;
    for (const { atMs, intervalMs } of this.#lastFrom.values())
      if (nowMs - atMs <= 3 * intervalMs) publishers++;
    return { atMs: nowMs, windowMs: spanMs, publishers, rules, sources };
  }
}

function round(n: number): number {
  return Math.round(n * 10) / 10;
}

function render(view: WatchView, args: CliArgs, out: Output): void {
  const lines: string[] = [];
  const apps =
    view.publishers === 0
      ? `no app publishing on ${decisionChannel(args.prefix)} (the app calls publishDecisionCounts)`
      : `${view.publishers} app process${view.publishers === 1 ? '' : 'es'} publishing`;
  lines.push(
    `ratekeeper watch  prefix ${printable(args.prefix)}  ${apps}  last ${Math.round(view.windowMs / 1000)}s  ${new Date(view.atMs).toISOString()}`,
  );
  const rows = view.rules.map((r) => {
    const decided = r.allowed + r.denied + r.locked;
    const refused = decided === 0 ? '-' : `${Math.round(((r.denied + r.locked) * 100) / decided)}%`;
    return [
      printable(r.rule),
      String(r.perSecond),
      String(r.allowed),
      String(r.denied),
      String(r.locked),
      String(r.dryRun),
      refused,
      r.total.join(' / '),
    ];
  });
  lines.push(
    ...table(
      ['rule', 'per s', 'allowed', 'denied', 'locked', 'dry-run', 'refused', 'since start (a / d / l / dry)'],
      rows,
    ),
  );
  const sources = Object.entries(view.sources).filter(([source, n]) => source !== 'store' && n > 0);
  if (sources.length > 0)
    lines.push(`not from the store: ${sources.map(([s, n]) => `${s} ${n}`).join(', ')}`);
  if (out.tty && !args.once) {
    out.line(`${HOME_CLEAR}${lines.join('\n')}\n(Ctrl-C to stop)`);
  } else {
    for (const line of lines) out.line(line);
    if (!args.once) out.line('');
  }
}
