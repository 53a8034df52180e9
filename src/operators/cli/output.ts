// Writing answers for people (aligned text, keys made harmless for the terminal) or for scripts (JSON).

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

// C0 and C1 controls (escape sequences could rewrite the operator's terminal), and bidirectional
// overrides (could make one key read as another).
const UNPRINTABLE = /[\p{Cc}\u202a-\u202e\u2066-\u2069]/gu;

/** A key or rule name for a terminal: control and bidi characters shown as `\xNN` / `\uNNNN`. */
export function printable(text: string): string {
  return text.replace(UNPRINTABLE, (c) => {
    const code = c.charCodeAt(0);
    return code < 0x100
      ? `\\x${code.toString(16).padStart(2, '0')}`
      : `\\u${code.toString(16).padStart(4, '0')}`;
  });
}

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
