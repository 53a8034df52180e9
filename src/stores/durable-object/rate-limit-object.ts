// RateLimitObject: the Durable Object class users export from their Worker and bind to the namespace that
// DurableObjectStore is given. One object per identity decides that identity's rules; one per rule lists its locks.
import type { DurableObjectStateLike } from './cloudflare-types.js';
import { expiryOf, IdentityTable } from './identity-table.js';
import { type Answers, type Call, ProtocolError, readMessage } from './protocol.js';
import { RuleSettings } from './rule-settings.js';

/**
 * The Durable Object that holds the counts. Its state lives in memory while the object runs, read from the
 * object's storage once when it starts (one `list()`), and each call's changes are written back before it
 * answers (one row per rule state changed), so an object evicted or moved forgets nothing. Each decision is
 * made from memory with no `await` inside it: the runtime delivers one event at a time to an object, so two
 * decisions never interleave. An alarm deletes what has expired (a window ended, a lease lapsed), so an idle
 * object's storage empties.
 *
 * @example
 * // worker.ts
 * export { RateLimitObject } from 'ratekeeper/cloudflare';
 * // wrangler.jsonc: "durable_objects": { "bindings": [{ "name": "RATE_LIMITER", "class_name": "RateLimitObject" }] },
 * //                 "migrations": [{ "tag": "v1", "new_sqlite_classes": ["RateLimitObject"] }]
 */
export class RateLimitObject {
  /** The object's state and storage, as the runtime gave them (as Cloudflare's DurableObject class names it). */
  protected readonly ctx: DurableObjectStateLike;
  /** The Worker's bindings. */
  protected readonly env: unknown;
  readonly #table = new IdentityTable();
  /** The rule-wide limits, in the object `<prefix>#limits` only (rule-settings.ts). */
  readonly #settings = new RuleSettings();
  /** Last time handed out on the object's own clock: it never runs backwards. */
  #lastNow = 0;
  /** When the alarm is set for, as far as this object knows; null: none. */
  #alarmAt: number | null = null;
  /** A store with an injected clock (tests) called: alarms, which fire on real time, are not set. */
  #injected = false;

  constructor(ctx: DurableObjectStateLike, env: unknown) {
    this.ctx = ctx;
    this.env = env;
    void ctx.blockConcurrencyWhile(async () => {
      for (const [name, row] of await ctx.storage.list())
        if (!this.#settings.load(name, row)) this.#table.rows.set(name, row as never);
      this.#alarmAt = await ctx.storage.getAlarm();
    });
  }

  /** One call of DurableObjectStore (a JSON message, see protocol.ts); a malformed one is answered 400, untouched. */
  async fetch(request: Request): Promise<Response> {
    let call: Call;
    let t: number | null;
    try {
      ({ call, t } = readMessage(await request.json()));
    } catch (error) {
      const reason = error instanceof ProtocolError ? error.message : 'the body is not JSON';
      return Response.json({ error: `RateLimitObject refused the message: ${reason}` }, { status: 400 });
    }
    if (t !== null) this.#injected = true;
    const nowMs = t ?? this.#now();
    // A decision on a lease of the rule-wide limits that has ended may lack a change in force: refused.
    const limits = call.call === 'evaluate' ? call.limits : undefined;
    if (limits !== undefined && nowMs >= limits.leaseUntil)
      return Response.json({ nowMs, stale: true }, { status: 409 });
    const answer = this.#answer(call, nowMs);
    await this.#write();
    return Response.json({ nowMs, answer });
  }

  /** Deletes what has expired, then sets the alarm for the next expiry, or empties the object's storage. */
  async alarm(): Promise<void> {
    this.#alarmAt = null;
    if (this.#injected) return;
    const soonest = this.#table.sweep(this.#now());
    if (this.#table.rows.size === 0 && this.#settings.empty) {
      this.#table.changed.clear();
      await this.ctx.storage.deleteAll();
      return;
    }
    await this.#write();
    if (soonest !== Number.POSITIVE_INFINITY) await this.#alarm(soonest);
  }

  #now(): number {
    const now = Date.now();
    if (now > this.#lastNow) this.#lastNow = now;
    return this.#lastNow;
  }

  #answer(call: Call, nowMs: number): Answers[Call['call']] {
    const table = this.#table;
    switch (call.call) {
      case 'evaluate':
        return table.evaluate(call.ops, call.mode, call.quiet, nowMs, call.limits);
      case 'refund':
        return table.refund(call.refunds, nowMs, call.limits);
      case 'renew':
        return table.renew(call.slots, nowMs);
      case 'holders':
        return table.holders(call.rule, call.key, call.limit, nowMs);
      case 'reset':
        return table.reset(call.rule, call.key, call.keepLock, nowMs);
      case 'override': {
        const untilMs = call.forMs === null ? Number.POSITIVE_INFINITY : nowMs + call.forMs;
        table.setTimed('o', call.rule.name, call.key, call.limit, untilMs);
        table.setTimed('w', call.rule.name, call.key, call.windowMs ?? null, untilMs);
        return null;
      }
      case 'list-lock':
        table.setTimed('l', call.rule, call.key, call.level, call.untilMs);
        return null;
      case 'unlist-lock':
        table.setTimed('l', call.rule, call.key, null, 0);
        return null;
      case 'locked':
        return table.locked(call.rule, call.limit, nowMs);
      case 'lease-limits':
        return this.#settings.lease(call.holder, call.leaseMs, nowMs);
      case 'set-limit': {
        const { holder, leaseMs, rule, limit, forMs } = call;
        const fromMs = this.#settings.set(holder, rule, limit, forMs, nowMs);
        return { fromMs, limits: this.#settings.lease(holder, leaseMs, nowMs) };
      }
      case 'rule-limits':
        return this.#settings.inForce(call.rules, nowMs);
    }
  }

  /** Writes the rows the last call changed (one `put` and one `delete` at most), and moves the alarm sooner if due. */
  async #write(): Promise<void> {
    const { rows, changed } = this.#table;
    const settings = this.#settings.changed;
    if (changed.size === 0 && settings.size === 0) return;
    const puts: Record<string, unknown> = {};
    let written = 0;
    const deletes: string[] = [];
    for (const [name, row] of settings) {
      if (row === undefined) deletes.push(name);
      else {
        puts[name] = row;
        written++;
      }
    }
    settings.clear();
    let soonest = Number.POSITIVE_INFINITY;
    for (const name of changed) {
      const row = rows.get(name);
      if (row === undefined) deletes.push(name);
      else {
        puts[name] = row;
        written++;
        soonest = Math.min(soonest, expiryOf(row));
      }
    }
    changed.clear();
    const writes: Promise<unknown>[] = [];
    if (written > 0) writes.push(this.ctx.storage.put(puts));
    if (deletes.length > 0) writes.push(this.ctx.storage.delete(deletes));
    if (!this.#injected && soonest !== Number.POSITIVE_INFINITY) writes.push(this.#alarm(soonest));
    await Promise.all(writes);
  }

  /** Sets the alarm for `atMs` unless one is set sooner already. */
  async #alarm(atMs: number): Promise<void> {
    if (this.#alarmAt !== null && this.#alarmAt <= atMs) return;
    this.#alarmAt = atMs;
    await this.ctx.storage.setAlarm(atMs);
  }
}
