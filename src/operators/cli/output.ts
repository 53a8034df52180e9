// Writing answers for people (aligned text, keys made harmless for the terminal) or for scripts (JSON).
import { visibleKey } from '../visible-key.js';

export interface Output {
  readonly json: boolean;
  /** Output is a terminal: views may be redrawn in place. */
  readonly tty: boolean;
  /** Writes one line (a newline is added). */
  line(text: string): void;
  /** Writes a value as one line of JSON. */
  value(value: unknown): void;
}

export function createOutput(json: boolean, tty: boolean, write: (text: string) => void): Output {
  return {
    json,
    tty,
    line: (text) => write(`${text}\n`),
    value: (value) => write(`${JSON.stringify(value)}\n`),
  };
}

/**
 * A key or rule name for a terminal: controls (escape sequences could rewrite the terminal), invisible
 * format characters and bidirectional controls (could make one key read as another) shown as escapes
 * (see `visibleKey`); `--escaped` reads that form back.
 */
export const printable = visibleKey;

/** Rows as aligned columns; the last column is never padded (it holds keys of any length). */
export function table(header: string[], rows: string[][]): string[] {
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => (r[i] ?? '').length)));
  const format = (cells: string[]) =>
    cells
      .map((cell, i) => (i === cells.length - 1 ? cell : cell.padEnd(widths[i] ?? 0)))
      .join('  ')
      .trimEnd();
  return [format(header), ...rows.map(format)];
}
