// Limit overrides on Redis: lua/set-override.lua sets one beside its key's count; the scripts read those of the
// rules that have had one, so that every other rule's decisions cost what they did before overrides.

import type { RuleLimit } from '../../types.js';
import { overrideCall } from './calls.js';
import { type KeySpace, OverrideReads, ruleLimitsKey } from './check-call.js';
import type { RedisConnection } from './connection/connection.js';
import type { RedisScript } from './function-library.js';
import { overriddenRulesKey, ruleLimitsVersionKey, SLOTS } from './keys.js';
import { escapeRuleName, luaNumber, type ScriptTime, timeArgument } from './op-text.js';
import { runScriptThen } from './replies.js';
import type { Resets } from './resets.js';

/**
 * Sets overrides, and knows which rules' overrides the scripts must read: the rules listed at
 * `<prefix>:overridden` (every rule that has had an override), read once this process's subscription
 * is live, and those announced since. Until it knows (at start, and after the subscriber reconnected:
 * announcements may have been missed), every rule's overrides are read.
 *
 * A rule's first override is obeyed by every process from its next decision: the rule is listed
 * before the override is written, and announced right after it in the same write, so Redis sends the
 * news to the other processes before its reply to this one (off a Cluster; a Cluster passes it between
 * nodes on its own bus).
 */
export class Overrides {
  readonly #connection: RedisConnection;
  readonly #script: RedisScript;
  readonly #space: KeySpace;
  readonly #resets: Resets;
  /** Which rules' overrides the scripts read: what this learns, kept up to date. */
  readonly reads = new OverrideReads(() => this.#learn());
  #listening = false;
  #loading: Promise<void> | undefined;
  /** Counts reconnections of the subscriber: a load begun before one cannot vouch for what was missed. */
  #generation = 0;

  constructor(connection: RedisConnection, script: RedisScript, space: KeySpace, resets: Resets) {
    this.#connection = connection;
    this.#script = script;
    this.#space = space;
    this.#resets = resets;
  }

  /**
   * Starts learning which rules' overrides the scripts must read, where announcements can be heard: not
   * over Redis over HTTP, where another process's first override of a rule would go unnoticed, so every
   * rule's are read.
   */
  #learn(): void {
    if (!this.#resets.hears) return;
    // A load that fails (Redis unreachable) is tried again by a later decision; meanwhile all are read.
    this.#loading ??= this.#load()
      .catch(() => {})
      .finally(() => {
        this.#loading = undefined;
      });
  }

  /**
   * Sets (or, `limit` null and no `windowMs`, clears) the override of `rule` for `key`, and tells every
   * process.
   */
  async set(
    rule: string,
    key: string,
    limit: number | null,
    forMs: number | undefined,
    time: ScriptTime,
    windowMs?: number,
  ): Promise<void> {
    if (limit !== null || windowMs !== undefined) {
      this.reads.rules.add(rule);
      const listed = overriddenRulesKey(this.#space.prefix);
      await this.#connection.send('SADD', [listed, rule], listed);
    }
    const { keys, args } = overrideCall(this.#space, rule, key, limit, forMs, time, windowMs);
    await runScriptThen(this.#connection, this.#script, keys, args, () =>
      this.#resets.announceOverride(rule, key),
    );
  }

  /**
   * Sets (or, `limit` null, clears) the rule-wide limit of `rule`, and tells every process: their scripts
   * read it from their next decision, their deny caches forget the rule's keys. Standalone, one hash,
   * written in one script call with the announcement right behind it. On a Cluster, every slot's copy:
   * announced first (processes start reading the copies), versioned by a counter so that changes raced
   * by several processes leave every copy with the same last one, and announced again once all are
   * written; the end (`forMs`) is computed once, on the store's clock, by the first copy's call.
   */
  async setRule(
    rule: string,
    limit: number | null,
    forMs: number | undefined,
    time: ScriptTime,
  ): Promise<void> {
    const field = escapeRuleName(rule);
    this.reads.limited.add(field);
    const args = [
      timeArgument(time),
      limit === null ? '' : luaNumber(limit),
      forMs === undefined ? '' : luaNumber(forMs),
      field,
    ];
    const announce = () => this.#resets.announceRuleLimit(rule);
    const prefix = this.#space.prefix;
    if (!this.#space.cluster) {
      await runScriptThen(
        this.#connection,
        this.#script,
        [ruleLimitsKey(prefix, undefined)],
        [...args, '', ''],
        announce,
      );
      return;
    }
    await announce();
    const counter = ruleLimitsVersionKey(prefix);
    const version = String(await this.#connection.send('INCR', [counter], counter));
    const first = await runScriptThen(
      this.#connection,
      this.#script,
      [ruleLimitsKey(prefix, 0)],
      [...args, version, ''],
      undefined,
    );
    const untilMs = Number(first) === 0 ? '' : String(first);
    // Slots in chunks: every copy is written before the second announcement, without 16384 calls queued at once.
    const CHUNK = 512;
    for (let from = 1; from < SLOTS; from += CHUNK) {
      const calls: Array<Promise<unknown>> = [];
      for (let slot = from; slot < Math.min(SLOTS, from + CHUNK); slot++) {
        calls.push(
          runScriptThen(
            this.#connection,
            this.#script,
            [ruleLimitsKey(prefix, slot)],
            [...args, version, untilMs],
            undefined,
          ),
        );
      }
      await Promise.all(calls);
    }
    await announce();
  }

  /** The rule-wide limits in force at `nowMs` among `rules` (names), read from one hash (slot 0's on a Cluster). */
  async list(rules: readonly string[], nowMs: number): Promise<RuleLimit[]> {
    const key = ruleLimitsKey(this.#space.prefix, this.#space.cluster ? 0 : undefined);
    const reply = await this.#connection.send('HGETALL', [key], key);
    const held = new Map<string, string>();
    if (Array.isArray(reply)) {
      for (let i = 0; i + 1 < reply.length; i += 2) held.set(String(reply[i]), String(reply[i + 1]));
    } else if (reply !== null && typeof reply === 'object') {
      for (const [name, value] of Object.entries(reply)) held.set(name, String(value));
    }
    const out: RuleLimit[] = [];
    for (const rule of rules) {
      const value = held.get(escapeRuleName(rule));
      if (value === undefined) continue;
      const [limit, untilMs] = value.split(':').map(Number) as [number, number];
      if (!(limit > 0) || (untilMs !== 0 && untilMs <= nowMs)) continue;
      out.push(untilMs === 0 ? { rule, limit } : { rule, limit, untilMs });
    }
    return out;
  }

  /** Forgets what it knew (the store closes its subscription). */
  close(): void {
    this.reads.known = false;
    this.#listening = false;
    this.#generation++;
  }

  async #load(): Promise<void> {
    const generation = this.#generation;
    if (!this.#listening) {
      this.#listening = true;
      this.#resets.listen((rule, key, override) => {
        if (rule === '') {
          this.reads.known = false;
          this.#generation++;
        } else if (override && key === '') this.reads.limited.add(escapeRuleName(rule));
        else if (override) this.reads.rules.add(rule);
      });
    }
    await this.#resets.heard();
    const listed = overriddenRulesKey(this.#space.prefix);
    const limits = ruleLimitsKey(this.#space.prefix, this.#space.cluster ? 0 : undefined);
    const [rules, limited] = await Promise.all([
      this.#connection.send('SMEMBERS', [listed], listed),
      this.#connection.send('HKEYS', [limits], limits),
    ]);
    if (Array.isArray(rules))
      for (const rule of rules) if (typeof rule === 'string') this.reads.rules.add(rule);
    if (Array.isArray(limited))
      for (const rule of limited) if (typeof rule === 'string') this.reads.limited.add(rule);
    if (generation === this.#generation) this.reads.known = true;
  }
}
