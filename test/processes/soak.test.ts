// The soak's short form: a minute of mixed traffic from 4 app processes on a Cluster and a standalone
// Redis, every fault once, then the exactness audit (bench/soak). Counts and the audit, no timings.
import { expect } from 'chai';
import { FAULT_ORDER, shortSoakConfig } from '../../bench/soak/config.js';
import type { SoakOutcome } from '../../bench/soak/report.js';
import { runSoak } from '../../bench/soak/run.js';
import { makeTempDir } from '../support/processes.js';

describe('Soak, short form: 4 app processes, a Cluster and a standalone Redis, every fault once', function () {
  this.timeout(300_000);
  let outcome: SoakOutcome;

  before(async () => {
    outcome = await runSoak(shortSoakConfig(makeTempDir('soak-test')));
  });

  const findings = () => outcome.audit.findings.join('\n');

  it('ran every fault, with traffic decided by Redis and by the failure policy', () => {
    expect(outcome.faults.map((f) => f.kind)).to.have.members([...FAULT_ORDER]);
    const a = outcome.audit;
    expect(a.decisions).to.be.greaterThan(1000);
    expect(a.admissions).to.be.greaterThan(100);
    expect(a.policyDecisions, 'faults sent decisions to the policy').to.be.greaterThan(0);
    expect(a.keys).to.be.greaterThan(100);
  });

  it('admitted nothing over a limit outside an outage, and Redis never counted past its own limit', () => {
    expect(outcome.audit.overAdmissionsOutsideOutages, findings()).to.equal(0);
    expect(outcome.audit.redisOverOutsideFaults, findings()).to.equal(0);
  });

  it('stayed within the failure policy bound during outages', () => {
    expect(outcome.audit.outageWindowsOverBound, findings()).to.equal(0);
  });

  it('never admitted a key while Redis held its lock, and locked() lists exactly the locks in force', () => {
    const a = outcome.audit;
    expect(a.admittedWhileLocked, findings()).to.equal(0);
    expect(a.locksMissing).to.deep.equal([]);
    expect(a.locksExtra).to.deep.equal([]);
  });

  it("agrees with the store's receipts and clock, and left no rejection unhandled", () => {
    const a = outcome.audit;
    expect(a.receiptMismatches, findings()).to.equal(0);
    expect(a.storeTimesOutside).to.equal(0);
    expect(outcome.unhandled).to.deep.equal([]);
  });
});
