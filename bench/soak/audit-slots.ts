// The audit of concurrency slots, from the work in flight's ledgers: handlers running at once per key
// (as the handlers wrote them down) never above the limit outside outages, no slot still held after the
// last request, and every slot the process lost without its release counted by the `lapsed` metric.
import { createReadStream } from 'node:fs';
import { createInterface } from 'node:readline';
import type { FaultWindow } from './audit.js';
import type { FlightRecord, LedgerRecord, StoreName } from './ledger.js';
import { flightRules, SLOT_LEASES } from './rules.js';
import type { LeftHolder } from './work-in-flight.js';

export async function* flightRecords(file: string): AsyncGenerator<LedgerRecord | FlightRecord> {
  for await (const line of createInterface({ input: createReadStream(file), crlfDelay: Infinity })) {
    if (line !== '') yield JSON.parse(line) as LedgerRecord | FlightRecord;
  }
}

export interface SlotAudit {
  handlers: number;
  abortedStreams: number;
  /** The most handlers of one key running at once that no outage, policy decision or lapse excuses. */
  peakOutsideOutages: number;
  /**
   * Moments a handler started while more than the limit ran, no outage excusing it (must be 0), and
   * excused (an outage, a handler admitted by the failure policy, or one whose slot lapsed under it).
   */
  overOutsideOutages: number;
  overInOutages: number;
  /** Slots still held after the last request and the longest lease (must be none). */
  leftHolders: LeftHolder[];
  /** Slots lost without their release, surely (a renewal said so, or the release came after the lease ended), and as counted by the observers' `lapsed`. */
  sureLapses: number;
  observedLapses: number;
  /** Processes and stores whose observer counted fewer lapses than surely happened (must be none). */
  lapsesMissed: string[];
  held: number;
  released: number;
  gaveUp: Record<string, number>;
  findings: string[];
}

interface Held {
  a: number;
  b: number;
  src: string;
  slot: number;
}

interface SlotLife {
  /** The latest local time the store may have extended its lease (a renewal that may have reached it). */
  mayRenewUntil: number;
  /** When a renewal that answered, and was heard, found it gone (the earliest such answer). */
  goneAtRenewal: number;
  /** Whether any renewal found it gone (heard or not). */
  goneAtAnyRenewal: boolean;
  /** Its releases (a failed one is sent again): when each started, and what the store answered. */
  releases: Array<{ lo: number; hi: number; ok: boolean; held: boolean | undefined }>;
}

const LIMITS = new Map(flightRules().map((r) => [r.name, r.limit as number]));

export async function auditSlots(input: {
  files: string[];
  faults: FaultWindow[];
  storeRetryMs: number;
  storeTimeoutMs: number;
  leftHolders: LeftHolder[];
  stalledUntil: (store: StoreName, hi: number) => number;
}): Promise<SlotAudit> {
  const out: SlotAudit = {
    handlers: 0,
    abortedStreams: 0,
    peakOutsideOutages: 0,
    overOutsideOutages: 0,
    overInOutages: 0,
    leftHolders: input.leftHolders,
    sureLapses: 0,
    observedLapses: 0,
    lapsesMissed: [],
    held: 0,
    released: 0,
    gaveUp: {},
    findings: [],
  };
  const note = (line: string) => {
    if (out.findings.length < 20) out.findings.push(line);
  };
  const heardWithinMs = 0.8 * input.storeTimeoutMs;
  /**
   * Slots the store let go while their handler may still have run (a renewal or a release found them
   * gone, or the release came after the lease could have ended): their process stalled past the lease
   * (docs/rules.md: it loses its slots), an outage of that process, whose lapses the lapse check counts.
   */
  const lost = new Set<string>();
  const handlers = new Map<string, Held[]>();
  /** Per store, rule and key: spans in which a call of it got no answer (the store may have lost a lease). */
  const unanswered = new Map<string, Array<[number, number]>>();
  const addSpan = (id: string, span: [number, number]) => {
    const list = unanswered.get(id) ?? [];
    list.push(span);
    unanswered.set(id, list);
  };
  for (const [p, file] of input.files.entries()) {
    const slots = new Map<string, SlotLife>();
    const observed = new Map<StoreName, number>();
    const life = (s: StoreName, rule: string, key: string, slot: number) =>
      slots.get(`${s}|${rule}|${key}|${slot}`);
    for await (const r of flightRecords(file)) {
      if (r.t === 'H') {
        out.handlers++;
        if (r.aborted) out.abortedStreams++;
        const id = `${r.s}|${r.rule}|${r.key}`;
        const list = handlers.get(id) ?? [];
        list.push({ a: r.a, b: r.b, src: r.src, slot: r.slot });
        handlers.set(id, list);
      } else if (r.t === 'E') {
        const lease = (rule: string) => SLOT_LEASES.get(rule);
        if (!r.ok) {
          for (const [rule, key] of r.ops)
            if (lease(rule) !== undefined)
              addSpan(`${r.s}|${rule}|${key}`, [r.lo, input.stalledUntil(r.s, r.hi)]);
          continue;
        }
        if (r.mode !== 'check' || r.ops.some((op) => op[3] === 0)) continue;
        for (const [rule, key, cost, , receipt] of r.ops)
          if (lease(rule) !== undefined && cost > 0)
            slots.set(`${r.s}|${rule}|${key}|${receipt}`, {
              mayRenewUntil: r.hi,
              goneAtRenewal: Number.POSITIVE_INFINITY,
              goneAtAnyRenewal: false,
              releases: [],
            });
      } else if (r.t === 'N') {
        r.ops.forEach(([rule, key], i) => {
          const slot = life(r.s, rule, key, r.rc[i] as number);
          if (!r.ok) addSpan(`${r.s}|${rule}|${key}`, [r.lo, input.stalledUntil(r.s, r.hi)]);
          if (slot === undefined) return;
          if (!r.ok) slot.mayRenewUntil = Math.max(slot.mayRenewUntil, input.stalledUntil(r.s, r.hi));
          else if (r.held[i]) slot.mayRenewUntil = Math.max(slot.mayRenewUntil, r.hi);
          else {
            slot.goneAtAnyRenewal = true;
            if (r.hi - r.lo < heardWithinMs) slot.goneAtRenewal = Math.min(slot.goneAtRenewal, r.hi);
          }
        });
      } else if (r.t === 'R' && r.rc !== undefined) {
        r.ops.forEach(([rule, key], i) => {
          const slot = life(r.s, rule, key, r.rc?.[i] as number);
          slot?.releases.push({ lo: r.lo, hi: r.hi, ok: r.ok, held: r.held?.[i] });
          if (!r.ok && SLOT_LEASES.has(rule))
            addSpan(`${r.s}|${rule}|${key}`, [r.lo, input.stalledUntil(r.s, r.hi)]);
        });
      } else if (r.t === 'M') {
        observed.set(r.s, (observed.get(r.s) ?? 0) + r.lapsed);
        out.held += r.held;
        out.released += r.released;
      } else if (r.t === 'G') {
        out.gaveUp[r.what] = (out.gaveUp[r.what] ?? 0) + r.n;
      }
    }
    // Surely lapsed, and surely known to the library (an answer it heard: one within most of
    // storeTimeout; a later one may have come after it gave up): a renewal found it gone before any
    // release of it was sent; or every release of it was answered and each found it gone, or the first
    // started after the latest its lease can have ended (the latest renewal that may have reached the
    // store, plus the lease). A release sent again after one that timed out may run before it on a
    // stalled server (PostgreSQL's connections wake in any order): one finding it held clears the slot.
    const sure = new Map<StoreName, number>();
    const how = new Map<string, number>();
    for (const [id, slot] of slots) {
      const [s, rule] = id.split('|') as [StoreName, string];
      const lease = SLOT_LEASES.get(rule) as number;
      const firstLo = Math.min(Number.POSITIVE_INFINITY, ...slot.releases.map((r) => r.lo));
      if (
        slot.goneAtAnyRenewal ||
        slot.releases.some((r) => r.ok && r.held === false) ||
        (firstLo !== Number.POSITIVE_INFINITY && firstLo > slot.mayRenewUntil + lease)
      )
        lost.add(id);
      const answered = slot.releases.filter((r) => r.ok);
      const heard = answered.some((r) => r.hi - r.lo < heardWithinMs);
      const allGone = answered.length === slot.releases.length && answered.every((r) => r.held === false);
      const reason =
        slot.goneAtRenewal < firstLo
          ? 'gone at a renewal'
          : heard && allGone && answered.length > 0
            ? 'gone at its release'
            : heard && firstLo > slot.mayRenewUntil + lease
              ? 'released after its lease'
              : undefined;
      if (reason === undefined) continue;
      sure.set(s, (sure.get(s) ?? 0) + 1);
      how.set(`${s} ${reason}`, (how.get(`${s} ${reason}`) ?? 0) + 1);
    }
    const reasons = [...how].map(([reason, n]) => `${n} ${reason}`).join(', ');
    for (const s of new Set([...sure.keys(), ...observed.keys()])) {
      const surely = sure.get(s) ?? 0;
      const seen = observed.get(s) ?? 0;
      out.sureLapses += surely;
      out.observedLapses += seen;
      if (seen < surely) {
        out.lapsesMissed.push(`process ${p} on ${s}: ${surely} slots surely lapsed, lapsed metric ${seen}`);
        note(
          `process ${p} on ${s}: ${surely} slots surely lapsed, the lapsed metric counted ${seen} (${reasons})`,
        );
      }
    }
  }
  // Handlers at once per key: ends before starts at the same ms (a release is heard after its handler ended).
  for (const [id, list] of handlers) {
    const [s, rule] = id.split('|') as [StoreName, string];
    const limit = LIMITS.get(rule) as number;
    const lease = SLOT_LEASES.get(rule) as number;
    const spans: Array<[number, number]> = [
      // A stalled app process (no store at fault) held slots that lapsed while its handlers still ran.
      ...input.faults
        .filter((f) => f.stores.includes(s) || f.kind === 'app-stall')
        .map((f): [number, number] => [f.start, f.end + input.storeRetryMs + lease]),
      ...(unanswered.get(id) ?? []).map(([lo, hi]): [number, number] => [lo, hi + lease]),
    ];
    const excused = (h: Held) =>
      h.src !== 'store' || lost.has(`${id}|${h.slot}`) || spans.some(([lo, hi]) => h.a < hi && lo < h.b);
    const events = list.flatMap((h, i) => [
      { t: h.a, d: 1, i },
      { t: h.b, d: -1, i },
    ]);
    events.sort((x, y) => x.t - y.t || x.d - y.d);
    const running = new Set<number>();
    for (const e of events) {
      if (e.d < 0) {
        running.delete(e.i);
        continue;
      }
      running.add(e.i);
      // Counted: the handlers no outage touched, admitted by the store, whose slots the store kept.
      const counted = [...running].filter((i) => !excused(list[i] as Held)).length;
      out.peakOutsideOutages = Math.max(out.peakOutsideOutages, counted);
      if (counted > limit) {
        out.overOutsideOutages++;
        note(`${id}: ${counted} handlers at once at ${e.t} (limit ${limit}), no outage`);
      } else if (running.size > limit) out.overInOutages++;
    }
  }
  for (const h of input.leftHolders)
    note(
      `${h.store} ${h.rule}[${h.key}]: ${h.count} slots still held at the end (${JSON.stringify(h.holders)})`,
    );
  return out;
}
