// The project packed as npm would publish it, built first only when dist/ is missing or older than the sources.
import { execFileSync } from 'node:child_process';
import { readdirSync, statSync } from 'node:fs';
import { join } from 'node:path';

const root = new URL('../..', import.meta.url).pathname;

function newest(dir: string): number {
  const files = readdirSync(join(root, dir), { recursive: true }) as string[];
  return Math.max(0, ...files.map((file) => statSync(join(root, dir, file)).mtimeMs));
}

/** Builds dist/ when it is missing or older than the sources (CI has just built: no second build). */
export function ensureBuilt(): void {
  let builtMs = 0;
  try {
    builtMs = statSync(join(root, 'dist', 'index.d.ts')).mtimeMs;
  } catch {
    // Not built yet.
  }
  if (builtMs < Math.max(newest('src'), newest('adapters'), newest('lua'))) {
    execFileSync('npm', ['run', 'build', '--silent'], { cwd: root, stdio: 'ignore' });
  }
}

/** `npm pack` into `destination`, built first if needed; resolves the tarball's file name. */
export function packProject(destination: string): string {
  ensureBuilt();
  const out = execFileSync(
    'npm',
    ['pack', '--silent', '--ignore-scripts', '--pack-destination', destination],
    {
      cwd: root,
      encoding: 'utf8',
    },
  );
  return out.trim().split('\n').pop() as string;
}
