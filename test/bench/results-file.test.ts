// bench/RESULTS.md's three writers (the benchmark, the soak, people) never overwrite each other's part.
import { expect } from 'chai';
import { generatedPart, KEPT_MARKER, keptPart, readResults, replaceBlock } from '../../bench/results-file.js';

const history = '## History\n\n| date | change |\n| --- | --- |\n| today | faster |\n';

describe('bench/RESULTS.md parts', () => {
  it('a new block goes below the marker and above the hand-written History, which stays as it was', () => {
    const file = `# benchmarks\n\ngenerated\n\n${KEPT_MARKER}\n\n${history}`;
    const once = replaceBlock(file, 'soak', '## Soak\n\nfirst run');
    expect(generatedPart(once)).to.equal('# benchmarks\n\ngenerated\n\n');
    expect(once.indexOf('first run')).to.be.within(once.indexOf(KEPT_MARKER), once.indexOf('## History'));
    expect(once.endsWith(history)).to.equal(true);
  });

  it('writing a block again replaces only that block', () => {
    const file = replaceBlock(`gen\n${KEPT_MARKER}\n\n${history}`, 'soak', 'first run');
    const twice = replaceBlock(file, 'soak', 'second run');
    expect(twice).to.not.include('first run');
    expect(twice.match(/second run/g)).to.have.length(1);
    expect(twice.replace('second run', 'first run')).to.equal(file);
  });

  it('the benchmark keeps everything from the marker on, and a file without a marker gets one', () => {
    const file = replaceBlock(`gen\n${KEPT_MARKER}\n\n${history}`, 'soak', 'soak figures');
    expect(keptPart(file)).to.equal(file.slice(file.indexOf(KEPT_MARKER)));
    expect(keptPart('# an old file\n')).to.equal(`${KEPT_MARKER}\n`);
    expect(replaceBlock('# an old file\n', 'soak', 'x')).to.include(`# an old file\n${KEPT_MARKER}`);
  });

  it('the committed RESULTS.md has the marker and a History section below it', async () => {
    const kept = keptPart(await readResults());
    expect(kept.startsWith(KEPT_MARKER)).to.equal(true);
    expect(kept).to.match(/^## History$/m);
  });
});
