// Dependency ranges as a library should declare them: runtime dependencies with caret ranges, so an app's
// own copy of the same package (Express's path-to-regexp, say) satisfies ours; development ones pinned.
import { readFileSync } from 'node:fs';
import { expect } from 'chai';

const pkg = JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as {
  dependencies: Record<string, string>;
  devDependencies: Record<string, string>;
};
const lock = JSON.parse(readFileSync(new URL('../../package-lock.json', import.meta.url), 'utf8')) as {
  packages: Record<string, { version?: string }>;
};

describe('dependencies', () => {
  it('runtime dependencies take caret ranges', () => {
    const notCaret = Object.entries(pkg.dependencies).filter(([, range]) => !/^\^\d+\.\d+\.\d+$/.test(range));
    expect(notCaret).to.deep.equal([]);
  });

  it('development dependencies are pinned to exact versions (an alias too: ioredis5 npm:ioredis@5.9.2)', () => {
    const notExact = Object.entries(pkg.devDependencies).filter(
      ([, range]) => !/^(npm:[a-z0-9@/._-]+@)?\d+\.\d+\.\d+$/.test(range),
    );
    expect(notExact).to.deep.equal([]);
  });

  it("the lock file installs one path-to-regexp, shared with Express's router", () => {
    const copies = Object.entries(lock.packages)
      .filter(([path]) => path.endsWith('node_modules/path-to-regexp'))
      .map(([path, entry]) => `${path}@${entry.version}`);
    expect(copies).to.deep.equal([
      `node_modules/path-to-regexp@${lock.packages['node_modules/path-to-regexp']?.version}`,
    ]);
  });
});
