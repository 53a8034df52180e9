// The soak's exactness audit against the library: what the memory store admits under random traffic
// passes the audit's own window model for every window type, and one admission more is caught.
import { expect } from 'chai';
import { windowSpecs } from '../bench/soak/audit.js';
import { type Unit, windowExcess } from '../bench/soak/windows.js';
import type { Rule } from '../src/index.js';
import { compileRules } from '../src/rules.js';
import { MemoryStore } from '../src/stores/memory-store.js';
import type { StoreOp } from '../src/stores/store.js';

const RULES: Rule[] = [
  { name: 'fixed', key: 'ip', limit: 5, window: { type: 'fixed', size: '2s' } },
  { name: 'calendar', key: 'ip', limit: 20, window: { type: 'calendar', unit: 'minute' } },
  { name: 'sliding-log', key: 'ip', limit: 4, window: { type: 'sliding-log', size: '1500ms' } },
  { name: 'sliding', key: 'ip', limit: 6, window: { type: 'sliding', size: '2s', buckets: 4 } },
  { name: 'token-bucket', key: 'ip', limit: 4, window: { type: 'token-bucket', size: '2s', burst: 6 } },
  { name: 'gcra', key: 'ip', limit: 5, window: { type: 'gcra', size: '1s', burst: 3 } },
];

/** A small deterministic generator, so a failure can be replayed. */
function random(seed: number): () => number {
  let state = seed;
  return () => {
    state = (state * 1103515245 + 12345) % 2 ** 31;
    return state / 2 ** 31;
  };
}

/** Hits at random times on one key: what the memory store admitted, as the audit's units. */
function admitted(rule: Rule, seed: number, refundShare = 0): Unit[] {
  const next = random(seed);
  let now = Date.UTC(2026, 0, 1, 0, 0, 50);
  const store = new MemoryStore({ clock: () => now });
  const compiled = compileRules([rule], { ipv6Subnet: 64 })[0];
  if (compiled === undefined) throw new Error('no rule');
  const units: Unit[] = [];
  const pending: Array<{ op: StoreOp; receipt: number; unit: Unit }> = [];
  for (let i = 0; i < 600; i++) {
    now += Math.floor(next() * (next() < 0.2 ? 900 : 120));
    const cost = next() < 0.2 ? 2 : 1;
    const periods = compiled.periods?.(now);
    const op = {
      rule: compiled.store,
      key: 'k',
      cost,
      limit: rule.limit as number,
      ...(periods && { periodEndMs: periods.endMs, nextPeriodEndMs: periods.nextEndMs }),
    };
    const r = store.evaluateSync([op], 'check').results[0];
    if (!r?.allowed) continue;
    const unit: Unit = { t: now, tMax: now, cost, receipt: r.receipt, policy: false, refundedAt: Infinity };
    units.push(unit);
    if (next() < refundShare) pending.push({ op, receipt: r.receipt, unit });
    // A reservation given back a few hits later, as a reported outcome is.
    if (pending.length > 0 && next() < refundShare) {
      const given = pending.splice(Math.floor(next() * pending.length), 1)[0];
      if (given !== undefined) {
        void store.refund([{ op: given.op, receipt: given.receipt }]);
        given.unit.refundedAt = now;
      }
    }
  }
  return units;
}

describe('soak audit: window model', () => {
  const specs = windowSpecs(RULES);

  for (const rule of RULES) {
    const spec = specs.get(rule.name);
    if (spec === undefined) throw new Error(`no spec for ${rule.name}`);

    it(`${rule.name}: the memory store's admissions under random traffic are within every window`, () => {
      for (let seed = 1; seed <= 5; seed++) {
        const units = admitted(rule, seed);
        expect(units.length, 'some admitted').to.be.greaterThan(20);
        expect(windowExcess(spec, units), `seed ${seed}`).to.deep.equal([]);
      }
    });

    it(`${rule.name}: with reservations given back hits later, still within every window`, () => {
      for (let seed = 11; seed <= 13; seed++)
        expect(windowExcess(spec, admitted(rule, seed, 0.3)), `seed ${seed}`).to.deep.equal([]);
    });

    it(`${rule.name}: one admission more at the same time as a full window's last is caught`, () => {
      const units = admitted(rule, 7);
      // The admission that left the least room: adding one unit beside it must overflow its window.
      const fullest = units.reduce((best, u) => {
        const probe = [...units, { ...u }];
        return windowExcess(spec, probe).length > 0 ? u : best;
      }, units[0] as Unit);
      const extra = [...units, { ...fullest }];
      expect(windowExcess(spec, extra).length).to.be.greaterThan(0);
    });
  }
});
