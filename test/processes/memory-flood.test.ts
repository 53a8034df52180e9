// The memory store under a flood of distinct keys: it stays within maxKeys, its heap stops growing, it never
// evicts a locked key and never clears everything.
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { expect } from 'chai';
import { createLimiter, MemoryStore } from '../../src/index.js';

interface FloodResult {
  checkpoints: Array<{ keys: number; size: number; heapUsedMB: number; elapsedMs: number }>;
  attackerLocked: boolean;
  attackerAdmitted: boolean;
  locks: string[];
  latestCount: number;
}

describe('MemoryStore under a flood of distinct keys', function () {
  this.timeout(60_000);

  it('stays within maxKeys 10,000 through 1,000,000 keys, its heap stops growing, and every lock survives', async () => {
    // A child process of its own, so that gc() and the heap figures are this flood's alone.
    const { stdout } = await promisify(execFile)(
      process.execPath,
      ['--expose-gc', '--import', 'tsx', 'test/fixtures/memory-flood.ts'],
      { timeout: 40_000 },
    );
    const result = JSON.parse(stdout) as FloodResult;
    const figures = result.checkpoints.map(
      (c) =>
        `${c.keys / 1000}k: ${c.size} keys, ${c.heapUsedMB.toFixed(2)} MB at ${(c.elapsedMs / 1000).toFixed(1)} s`,
    );
    console.log(`      heap after gc: ${figures.join('; ')}`);
    expect(result.checkpoints.map((c) => c.keys)).to.deep.equal([250_000, 500_000, 750_000, 1_000_000]);
    for (const checkpoint of result.checkpoints) expect(checkpoint.size).to.be.at.most(10_000);
    const [first, , third, last] = result.checkpoints.map((c) => c.heapUsedMB) as [
      number,
      number,
      number,
      number,
    ];
    expect(last - third, 'growth over the last 250,000 keys, MB').to.be.below(5);
    expect(last - first, 'growth from 250,000 to 1,000,000 keys, MB').to.be.below(5);
    expect(result.attackerLocked, 'the attacker is still locked').to.equal(true);
    expect(result.attackerAdmitted).to.equal(false);
    expect(result.locks).to.deep.equal(
      ['attacker', ...Array.from({ length: 10 }, (_, i) => `locked-${(i + 1) * 100_000}`)].sort(),
    );
    expect(result.latestCount, 'the latest key is still counted').to.equal(1);
  });

  it('stays within maxKeys when its oldest 1000 keys are locked (regression: every insert grew the store by one)', async () => {
    const store = new MemoryStore({ maxKeys: 5000 });
    const limiter = createLimiter({
      store,
      rules: [
        {
          name: 'r',
          key: 'ip',
          limit: 2,
          window: { type: 'fixed', size: '1h' },
          lockout: { duration: '1h' },
        },
      ],
    });
    for (let i = 0; i < 1000; i++) {
      for (let n = 0; n < 3; n++) await limiter.consume('r', `locked-${i}`);
    }
    for (let i = 0; i < 50_000; i++) await limiter.consume('r', `flood-${i}`);
    // One scan may pass 1000 locked keys in a row and give up: then the store holds one key more.
    expect(store.size).to.be.at.most(5001);
    expect((await limiter.locked('r', { limit: 10_000 })).length, 'no lock released').to.equal(1000);
    await limiter.close();
  });
});
