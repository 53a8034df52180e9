// Limit overrides on Redis: lua/set-override.lua sets one beside its key's count; the scripts read those of the
// rules that have had one, so that every other rule's decisions cost what they did before overrides.

import { overrideCall } from './calls.js';
import type { RedisConnection } from './connection/connection.js';
import { type KeySpace, type OverrideReads, overriddenRulesKey } from './keys.js';
import type { ScriptTime } from './op-text.js';
import type { Resets } from './resets.js';
import { type RedisScript, runScriptThen } from './scripts.js';

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
export class Overrides implements OverrideReads {
  readonly #connection: RedisConnection;
  readonly #script: RedisScript;
  readonly #space: KeySpace;
  readonly #resets: Resets;
  readonly #rules = new Set<string>();
  #known = false;
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
   * Whether the overrides of `rule` must be read by the scripts: always where announcements cannot be
   * heard (Redis over HTTP), for another process's first override of a rule would go unnoticed.
   */
  reads(rule: string): boolean {
    if (this.#known) return this.#rules.has(rule);
    if (!this.#resets.hears) return true;
    // A load that fails (Redis unreachable) is tried again by a later decision; meanwhile all are read.
    this.#loading ??= this.#load()
      .catch(() => {})
      .finally(() => {
        this.#loading = undefined;
      });
    return true;
  }

  /** Sets (or, `limit` null, clears) the override of `rule` for `key`, and tells every process. */
  async set(
    rule: string,
    key: string,
    limit: number | null,
    forMs: number | undefined,
    time: ScriptTime,
  ): Promise<void> {
    if (limit !== null) {
      this.#rules.add(rule);
      const listed = overriddenRulesKey(this.#space.prefix);
      await this.#connection.send('SADD', [listed, rule], listed);
    }
    const { keys, args } = overrideCall(this.#space, rule, key, limit, forMs, time);
    await runScriptThen(this.#connection, this.#script, keys, args, () =>
      this.#resets.announceOverride(rule, key),
    );
  }

  /** Forgets what it knew (the store closes its subscription). */
  close(): void {
    this.#known = false;
    this.#listening = false;
    this.#generation++;
  }

  async #load(): Promise<void> {
    const generation = this.#generation;
    if (!this.#listening) {
      this.#listening = true;
      this.#resets.listen((rule, _key, override) => {
        if (rule === '') {
          this.#known = false;
          this.#generation++;
        } else if (override) this.#rules.add(rule);
      });
    }
    await this.#resets.heard();
    const listed = overriddenRulesKey(this.#space.prefix);
    const rules = await this.#connection.send('SMEMBERS', [listed], listed);
    if (Array.isArray(rules)) for (const rule of rules) if (typeof rule === 'string') this.#rules.add(rule);
    if (generation === this.#generation) this.#known = true;
  }
}
