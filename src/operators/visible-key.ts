// Keys as operators see them: every character that prints as nothing, moves the cursor or reorders text is
// written as an escape, so two keys that differ never look alike; and the escaped form read back to the key.

/**
 * Characters shown as escapes, every one that does not print as itself: C0 and C1 controls (a terminal obeys
 * escape sequences), format characters (zero-width spaces and joiners, word joiner, byte order mark, soft
 * hyphen, bidirectional marks, embeddings, overrides and isolates, tag characters), every other default-
 * ignorable character (variation selectors, the combining grapheme joiner, the Hangul fillers U+115F, U+1160,
 * U+3164 and U+FFA0), every space and line or paragraph separator (U+00A0, U+3000, U+2028 ...; a plain
 * space too, where it is not a single space between two other characters: see `visibleKey`), the braille
 * blank U+2800, lone surrogates, private-use and unassigned code points, and the backslash that starts an
 * escape, so that a key holding the text `\u200b` and one holding U+200B are told apart.
 */
const HIDDEN = /[\p{Cc}\p{Cf}\p{Cs}\p{Co}\p{Cn}\p{Z}\p{Default_Ignorable_Code_Point}\u2800\\]/gu;

/** Whether the plain space at `at` reads as itself: one space between two characters that are not spaces. */
function innerSpace(key: string, at: number): boolean {
  return at > 0 && at < key.length - 1 && key[at - 1] !== ' ' && key[at + 1] !== ' ';
}

function escapeHidden(c: string, at: number, key: string): string {
  if (c === '\\') return '\\\\';
  if (c === ' ' && innerSpace(key, at)) return c;
  const code = c.codePointAt(0) as number;
  if (code < 0x100) return `\\x${code.toString(16).padStart(2, '0')}`;
  if (code < 0x10000) return `\\u${code.toString(16).padStart(4, '0')}`;
  return `\\u{${code.toString(16)}}`;
}

/**
 * `key` with every hidden character escaped: `\\` for a backslash, `\xNN` below U+0100 (a leading or
 * trailing space, or one of several in a row, is `\x20`), `\uNNNN` in the basic plane (a lone surrogate
 * too), `\u{NNNNN}` above it. A key without one is returned as it is. `readVisibleKey` undoes it.
 * @example visibleKey('alice\u200b') // 'alice\\u200b'; visibleKey('alice ') // 'alice\\x20'
 */
export function visibleKey(key: string): string {
  return key.replace(HIDDEN, escapeHidden);
}

/** Whether `visibleKey` shows `key` otherwise than it is. */
export function hasHiddenCharacters(key: string): boolean {
  return visibleKey(key) !== key;
}

const ESCAPE = /\\(?:\\|x([0-9a-fA-F]{2})|u\{([0-9a-fA-F]{1,6})\}|u([0-9a-fA-F]{4}))/g;

/**
 * The key a `visibleKey` text stands for, so an operator can act on the exact key by typing what was shown.
 * A backslash that starts none of the escapes `visibleKey` writes is an error (the text was not copied from
 * a view), and so is a code point above U+10FFFF.
 */
export function readVisibleKey(text: string): string {
  let out = '';
  let last = 0;
  ESCAPE.lastIndex = 0;
  for (let m = ESCAPE.exec(text); m !== null; m = ESCAPE.exec(text)) {
    const before = text.slice(last, m.index);
    if (before.includes('\\')) throw badEscape(text, last + before.indexOf('\\'));
    out += before;
    const hex = m[1] ?? m[2] ?? m[3];
    if (hex === undefined) out += '\\';
    else {
      const code = Number.parseInt(hex, 16);
      if (code > 0x10ffff) throw badEscape(text, m.index);
      out += String.fromCodePoint(code);
    }
    last = m.index + m[0].length;
  }
  const rest = text.slice(last);
  if (rest.includes('\\')) throw badEscape(text, last + rest.indexOf('\\'));
  return out + rest;
}

function badEscape(text: string, at: number): Error {
  return new Error(
    `'${visibleKey(text)}' has a backslash at position ${at + 1} that starts no escape: write a backslash as \\\\, a character as \\xNN, \\uNNNN or \\u{NNNNN}`,
  );
}
