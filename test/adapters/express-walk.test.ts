// The walk ARCHITECTURE.md draws (one Express request on RedisStore, file by file) is the one scripts/walk.ts
// measures: a file that joins or leaves the request's path fails here until the drawing follows.
import { execFile } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { promisify } from 'node:util';
import { expect } from 'chai';
import type { Walk } from '../../scripts/walk.js';

const ROOT = resolve(import.meta.dirname, '../..');

/** Files to the headers at most: what the walk is now. The goal (issue 44) is 20; lower this as it falls. */
const MOST_FILES_TO_HEADERS = 27;

/** The drawing: the numbered files, and the code spans of the release paragraph before its count. */
function drawn(): { toHeaders: string[]; release: string[] } {
  const map = readFileSync(join(ROOT, 'ARCHITECTURE.md'), 'utf8');
  const section = map.slice(map.indexOf('### The walk'), map.indexOf('## Where each concern lives'));
  const toHeaders = [...section.matchAll(/^\d+\. `([^`]+)`/gm)].map((m) => m[1] as string);
  const paragraph = section.slice(section.indexOf('then the release'), section.indexOf('Count:'));
  const release = [...paragraph.matchAll(/`([^`]+\.(?:ts|lua))`/g)].map((m) => m[1] as string);
  return { toHeaders, release };
}

describe('the walk of one Express request on RedisStore', function () {
  this.timeout(120_000);

  it('runs the files ARCHITECTURE.md draws, to the headers and on to the release, and no more than it did', async () => {
    const { stdout } = await promisify(execFile)(
      process.execPath,
      ['--import', 'tsx', join(ROOT, 'scripts/walk.ts'), '--json'],
      { cwd: ROOT, maxBuffer: 1 << 20 },
    );
    const walk = JSON.parse(stdout) as Walk;
    const toHeaders = [...walk.toHeaders.ts, ...walk.toHeaders.lua];
    const release = [...walk.release.ts, ...walk.release.lua].filter((file) => !toHeaders.includes(file));
    const drawing = drawn();
    expect([...drawing.toHeaders].sort()).to.deep.equal([...toHeaders].sort());
    expect(new Set(drawing.release)).to.deep.equal(new Set([...release, ...walk.release.lua]));
    expect(toHeaders.length).to.be.at.most(MOST_FILES_TO_HEADERS);
  });
});
