// The soak's short form: a minute of mixed traffic and work in flight from 4 app processes on a Redis
// Cluster, a standalone Redis and PostgreSQL, every fault once, then the audits (bench/soak). Counts and
// the audits, no timings.
import { expect } from 'chai';
import { FAULT_ORDER, shortSoakConfig } from '../../bench/soak/config.js';
import { postgresCutsReachingTheApp, type SoakOutcome } from '../../bench/soak/report.js';
import { runSoak } from '../../bench/soak/run.js';
import { makeTempDir } from '../support/processes.js';

describe('Soak, short form: 4 app processes on a Redis Cluster, a standalone Redis and PostgreSQL, every fault once', function () {
  this.timeout(400_000);
  let outcome: SoakOutcome;

  before(async () => {
    outcome = await runSoak(shortSoakConfig(makeTempDir('soak-test')));
  });

  const findings = () =>
    [...outcome.audit.findings, ...outcome.slots.findings, ...outcome.settle.findings].join('\n');

  it('ran every fault, with traffic decided by the stores and by the failure policy', () => {
    expect(outcome.faults.map((f) => f.kind)).to.have.members([...FAULT_ORDER]);
    const a = outcome.audit;
    expect(a.decisions).to.be.greaterThan(1000);
    expect(a.admissions).to.be.greaterThan(100);
    expect(a.policyDecisions, 'faults sent decisions to the policy').to.be.greaterThan(0);
    expect(a.keys).to.be.greaterThan(100);
  });

  it('admitted nothing over a limit outside an outage, and no store counted past its own limit', () => {
    expect(outcome.audit.overAdmissionsOutsideOutages, findings()).to.equal(0);
    expect(outcome.audit.redisOverOutsideFaults, findings()).to.equal(0);
  });

  it("rode through PostgreSQL's role lock_timeout and ended connections: none reached the app as a store error", () => {
    expect(postgresCutsReachingTheApp(outcome.audit), findings()).to.equal(0);
  });

  it('stayed within the failure policy bound during outages', () => {
    expect(outcome.audit.outageWindowsOverBound, findings()).to.equal(0);
  });

  it('never admitted a key while the store held its lock, and locked() lists exactly the locks in force', () => {
    const a = outcome.audit;
    expect(a.admittedWhileLocked, findings()).to.equal(0);
    expect(a.locksMissing).to.deep.equal([]);
    expect(a.locksExtra).to.deep.equal([]);
  });

  it('ran handlers holding slots, some streams abandoned, and never more of one key at once than its limit outside outages', () => {
    const s = outcome.slots;
    expect(s.handlers).to.be.greaterThan(100);
    expect(s.abortedStreams).to.be.greaterThan(0);
    expect(s.overOutsideOutages, findings()).to.equal(0);
  });

  it('left no slot held after the last request, and counted every lapse', () => {
    expect(outcome.slots.leftHolders, findings()).to.deep.equal([]);
    expect(outcome.slots.lapsesMissed, findings()).to.deep.equal([]);
  });

  it('settled costs above and below their estimates within the documented bound', () => {
    const s = outcome.settle;
    expect(s.above).to.be.greaterThan(0);
    expect(s.below).to.be.greaterThan(0);
    expect(s.overBoundOutsideOutages, findings()).to.equal(0);
  });

  it("agrees with the stores' receipts and clocks, and left no rejection unhandled", () => {
    const a = outcome.audit;
    expect(a.receiptMismatches, findings()).to.equal(0);
    expect(a.storeTimesOutside).to.equal(0);
    expect(outcome.unhandled).to.deep.equal([]);
  });
});
