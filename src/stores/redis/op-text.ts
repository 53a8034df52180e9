// Ops as the scripts read them: the time argument (and the store's clock, RedisClock: the server's, whose
// offset this process keeps, or an injected one), and each op as one text (readOp in lua/protocol.lua),
// made once per rule and reused while a rule's requests look alike.

import { windowKind } from '../../algorithms/index.js';
import { digest } from '../../digest.js';
import { unrefTimer } from '../../timers.js';
import type { StoreOp, StoreRule } from '../store.js';
import type { RedisConnection } from './connection/connection.js';

/** Identities and rule names up to this long, of safe characters, are used as they are (readable in redis-cli). */
export const MAX_PLAIN_LENGTH = 64;
/** Rule names also exclude `:` so that no rule's count key is another rule's lock key (`<rule>:l`). */
const PLAIN_RULE = /^[\w.\-~]+$/;

/** A rule name as used in keys: rule names are validated at compile time, this guards direct store use. */
export function escapeRuleName(name: string): string {
  return name.length <= MAX_PLAIN_LENGTH && PLAIN_RULE.test(name) ? name : digest(name);
}

/**
 * What a rule's name must be for its state to go in a record, where it is the state's label and travels
 * in the op's text: a limiter's rule names always are (rules/compile.ts); a StoreRule made by hand
 * with another name keeps a key of its own.
 */
const RECORD_NAME = /^[\w.~-]{1,64}$/;

/** Whether a rule's state is in its identity's record (identityKey) rather than a key of its own. */
export function isGrouped(rule: StoreRule): boolean {
  return rule.grouped === true && windowKind(rule.type).groupable && RECORD_NAME.test(rule.name);
}

/** The `now` argument asking a script for the server's own clock (TIME); SERVER_TIME in lua/protocol.lua. */
export const SERVER_TIME = 'server';

/** When a script call decides: an injected clock's epoch ms, or the Redis server's own clock. */
export type ScriptTime = number | typeof SERVER_TIME;

/**
 * Scripts decide on the Redis server's own clock, so every process agrees. This process also needs the
 * time between script calls (calendar periods are computed here): the local clock plus the offset to
 * the server's, read again every `syncIntervalMs`. The offset is the smallest the TIME reply allows
 * (as if the server read its clock just as the reply arrived), so once a TIME has answered this clock
 * is not ahead of the server's: a script runs at or after the time the calendar periods it was sent
 * were computed for, and picks between this period's end and the next one's correctly (a midpoint
 * estimate could be ahead by half a round trip, and a request decided in the last ms of a period was
 * then counted in the next). An injected clock replaces both (tests).
 */
export class RedisClock {
  readonly #connection: RedisConnection;
  readonly #injected: (() => number) | undefined;
  readonly #syncIntervalMs: number;
  /** Started by the first use, not the constructor: a Worker refuses timers and I/O at import. */
  #timer: ReturnType<typeof setInterval> | undefined;
  #started = false;
  /** Server time minus local time, ms, from the last TIME. */
  #offsetMs = 0;
  /** Last time handed out: the store's clock never runs backwards. */
  #lastNow = 0;

  constructor(connection: RedisConnection, injected: (() => number) | undefined, syncIntervalMs: number) {
    this.#connection = connection;
    this.#injected = injected;
    this.#syncIntervalMs = syncIntervalMs;
  }

  /** Starts reading the server's clock (once; never for an injected clock or after `stop`). */
  start(): void {
    if (this.#started) return;
    this.#started = true;
    if (this.#injected !== undefined) return;
    void this.#sync();
    this.#timer = setInterval(() => void this.#sync(), this.#syncIntervalMs);
    unrefTimer(this.#timer);
  }

  /** The store's current time, epoch ms. */
  now(): number {
    if (!this.#started) this.start();
    const now = this.#injected !== undefined ? this.#injected() : Date.now() + this.#offsetMs;
    if (now > this.#lastNow) this.#lastNow = now;
    return this.#lastNow;
  }

  /** The time a script call decides at: the injected clock's now, or the server's own TIME. */
  scriptTime(): ScriptTime {
    if (!this.#started) this.start();
    return this.#injected !== undefined ? this.now() : SERVER_TIME;
  }

  stop(): void {
    this.#started = true;
    if (this.#timer !== undefined) clearInterval(this.#timer);
  }

  /** Reads the server's clock. Failures keep the last offset: the next sync tries again. */
  async #sync(): Promise<void> {
    try {
      const reply = await this.#connection.send('TIME', []);
      // The server read its clock before its reply arrived: before the end of this ms (Date.now() rounds
      // down). A request or reply that waited (a stalled server, a busy event loop) only puts this clock
      // further behind the server's, never ahead of it.
      const arrived = Date.now() + 1;
      const [seconds, micros] = reply as [string, string];
      this.#offsetMs = Math.floor(Number(seconds) * 1000 + Number(micros) / 1000 - arrived);
    } catch {
      // Until then the local clock plus the last offset stands in.
    }
  }
}

/** The time a script call decided at: `time` itself when injected, else the server's time it replied. */
export function decidedAt(time: ScriptTime, serverMs: number): number {
  return time === SERVER_TIME ? serverMs : time;
}

/** Numbers as text Lua's tonumber reads back exactly (JavaScript prints the shortest round-trip form). */
export function luaNumber(value: number): string {
  // Integers past 2^31 (slot ids, epoch ms) print faster as two small integers, the same text (bench/RESULTS.md).
  if (value > 0x7fffffff && value <= Number.MAX_SAFE_INTEGER && Number.isInteger(value)) {
    const high = Math.floor(value / 1e9);
    const low = String(value - high * 1e9);
    return `${high}${NINE_ZEROS.slice(low.length)}${low}`;
  }
  return String(value);
}

const NINE_ZEROS = '000000000';

/** A script's `now` argument. */
export function timeArgument(time: ScriptTime): string {
  return time === SERVER_TIME ? SERVER_TIME : luaNumber(time);
}

/**
 * The first 10 of an op's 13 fields (readOp in lua/protocol.lua), its rule's (type, limit, sizeMs,
 * buckets, burst, dryRun, lockout durationMs (0: none), escalate, maxDurationMs, forgetAfterMs), as
 * the text before and after the limit and burst, computed once per rule: rules are immutable once
 * normalized. The op's own limit and burst go between (a limit may differ per request).
 */
interface RuleText {
  /** `type,` */
  readonly head: string;
  /** `,sizeMs,buckets,` */
  readonly size: string;
  /**
   * `,flags,lockout fields,` by what the op reads (`Reads`): nothing, its override, its rule-wide
   * limit, both.
   */
  readonly tails: readonly [string, string, string, string];
  /**
   * After the period fields: `,<rule name>` for a grouped rule (its name in the record), else ''; and
   * `,<rule name>` for an op reading its rule-wide limit (the field of the rule-limits hash).
   */
  readonly field: string;
  readonly ruleField: string;
  /** The last op text made for the rule, and what it was made of. */
  last?: {
    readonly limit: number;
    readonly cost: number;
    readonly reads: Reads;
    readonly periodEndMs: number | undefined;
    readonly nextPeriodEndMs: number | undefined;
    readonly text: string;
  };
}

const ruleTexts = new WeakMap<StoreRule, RuleText>();

function textOf(rule: StoreRule): RuleText {
  let text = ruleTexts.get(rule);
  if (text === undefined) {
    const lockout = rule.lockout;
    const lockFields = [
      luaNumber(lockout?.durationMs ?? 0),
      luaNumber(lockout?.escalate ?? 1),
      luaNumber(lockout?.maxDurationMs ?? 0),
      luaNumber(lockout?.forgetAfterMs ?? 0),
    ].join(',');
    const tail = (reads: Reads) => `,${ruleFlags(rule, reads)},${lockFields},`;
    text = {
      head: `${rule.type},`,
      size: `,${luaNumber(rule.sizeMs)},${luaNumber(rule.buckets)},`,
      tails: [tail(0), tail(1), tail(2), tail(3)],
      field: isGrouped(rule) ? `,${rule.name}` : '',
      // A grouped rule's name is its escaped name (RECORD_NAME): one field serves both.
      ruleField: `,${escapeRuleName(rule.name)}`,
    };
    ruleTexts.set(rule, text);
  }
  return text;
}

/** Whether an op's uses send (and the scripts read) a lock key and a lock index: only rules with a lockout. */
export function hasLockout(rule: StoreRule): boolean {
  return (rule.lockout?.durationMs ?? 0) !== 0;
}

/**
 * What the scripts read for an op besides its state: 0 nothing, + READS_OVERRIDE its key's override,
 * + READS_RULE_LIMIT its rule-wide limit (OverrideReads).
 */
export type Reads = 0 | 1 | 2 | 3;
export const READS_OVERRIDE = 1;
export const READS_RULE_LIMIT = 2;

/**
 * The flags field of an op (readOp in lua/protocol.lua): 1 for a dry run, + 2 when its override is read,
 * + 4 when an override or rule-wide limit is read and its burst follows the limit (the rule has none of
 * its own), + 8 when the rule is grouped (its state in the identity's record, under the rule's name,
 * sent after the period fields), + 16 when its rule-wide limit is read (the rule's name sent there too).
 */
function ruleFlags(rule: StoreRule, reads: Reads): string {
  let flags = rule.dryRun ? 1 : 0;
  if ((reads & READS_OVERRIDE) !== 0) flags += 2;
  if (reads !== 0 && rule.burst === 0) flags += 4;
  if (isGrouped(rule)) flags += 8;
  if ((reads & READS_RULE_LIMIT) !== 0) flags += 16;
  return luaNumber(flags);
}

/**
 * An op as the scripts read it (readOp in lua/protocol.lua): its 13 fields joined by ',', and a 14th,
 * the rule's name, for a grouped rule. The scripts
 * keep what they read of each text, so an op seen before costs them a table lookup.
 */
export function opText(op: StoreOp, reads: Reads): string {
  const rule = op.rule;
  const text = textOf(rule);
  // The last text made for the rule is usually the next one's (the same limit and cost on every request).
  const last = text.last;
  if (
    last !== undefined &&
    last.limit === op.limit &&
    last.cost === op.cost &&
    last.reads === reads &&
    last.periodEndMs === op.periodEndMs &&
    last.nextPeriodEndMs === op.nextPeriodEndMs
  ) {
    return last.text;
  }
  const made = makeOpText(op, text, reads);
  text.last = {
    limit: op.limit,
    cost: op.cost,
    reads,
    periodEndMs: op.periodEndMs,
    nextPeriodEndMs: op.nextPeriodEndMs,
    text: made,
  };
  return made;
}

function makeOpText(op: StoreOp, text: RuleText, reads: Reads): string {
  const rule = op.rule;
  const limit = luaNumber(op.limit);
  // The burst an op gives when its rule has none of its own (StoreRule.burst 0): its limit.
  const burst = rule.burst === 0 ? limit : luaNumber(rule.burst);
  return (
    text.head +
    limit +
    text.size +
    burst +
    text.tails[reads] +
    luaNumber(op.cost) +
    (op.periodEndMs === undefined
      ? ',0,0'
      : `,${luaNumber(op.periodEndMs)},${luaNumber(op.nextPeriodEndMs ?? 0)}`) +
    ((reads & READS_RULE_LIMIT) !== 0 ? text.ruleField : text.field)
  );
}

/** The distinct ops of one call of lua/refund.lua, each sent once as its text; every use is then its index. */
export class OpTable {
  readonly #indexes = new Map<string, string>();
  /** m, then the text of each distinct op. */
  readonly #texts: string[] = ['0'];

  /** The op's index, as text; the op is added on its first use. `reads`: see OverrideReads. */
  index(op: StoreOp, reads: Reads = 0): string {
    const text = opText(op, reads);
    let index = this.#indexes.get(text);
    if (index === undefined) {
      this.#texts.push(text);
      index = luaNumber(this.#texts.length - 1);
      this.#indexes.set(text, index);
    }
    return index;
  }

  /** m, then the text of each distinct op. */
  fields(): string[] {
    this.#texts[0] = luaNumber(this.#texts.length - 1);
    return this.#texts;
  }
}
