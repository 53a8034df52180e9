// bench/RESULTS.md has three writers: `npm run bench` (everything above the marker), `npm run soak`
// (its block below the marker) and people (the History section at the end). Each keeps the others' part.
import { existsSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { fileURLToPath } from 'node:url';
import { writeText } from './report.js';

export const RESULTS_PATH = fileURLToPath(new URL('./RESULTS.md', import.meta.url));

/** `npm run bench` rewrites the file above this line and keeps what follows it as it is. */
export const KEPT_MARKER =
  '<!-- npm run bench rewrites everything above this line and keeps everything below it -->';

export async function readResults(path = RESULTS_PATH): Promise<string> {
  return existsSync(path) ? readFile(path, 'utf8') : '';
}

/** The part of an existing results file that `npm run bench` keeps: the marker line and what follows. */
export function keptPart(existing: string): string {
  const at = existing.indexOf(KEPT_MARKER);
  return at === -1 ? `${KEPT_MARKER}\n` : existing.slice(at);
}

/** Everything but the kept part: the benchmark's own output (the whole text when there is no marker). */
export function generatedPart(existing: string): string {
  const at = existing.indexOf(KEPT_MARKER);
  return at === -1 ? existing : existing.slice(0, at);
}

const begin = (name: string) => `<!-- ${name}:begin (written by npm run ${name}; do not edit by hand) -->`;
const end = (name: string) => `<!-- ${name}:end -->`;

/**
 * `text` with the block `name` (between its begin and end comments) replaced by `body`; a block not
 * there yet goes right after the marker, above the hand-written sections.
 */
export function replaceBlock(text: string, name: string, body: string): string {
  const block = `${begin(name)}\n${body.trim()}\n${end(name)}`;
  const first = text.indexOf(begin(name));
  const last = text.indexOf(end(name));
  if (first !== -1 && last > first) return text.slice(0, first) + block + text.slice(last + end(name).length);
  const generated = generatedPart(text);
  const kept = keptPart(text).slice(KEPT_MARKER.length).replace(/^\n+/, '');
  return `${generated}${KEPT_MARKER}\n\n${block}\n\n${kept}`.replace(/\n*$/, '\n');
}

/** Writes the block `name` into bench/RESULTS.md (or `path`), leaving the rest of the file as it is. */
export async function writeBlock(name: string, body: string, path = RESULTS_PATH): Promise<void> {
  await writeText(path, replaceBlock(await readResults(path), name, body));
}
