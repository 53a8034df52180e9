// Keys in operator views: every character that does not print as itself is an escape, so no two keys look
// alike, and `readVisibleKey` gives each key back exactly.
import { expect } from 'chai';
import fc from 'fast-check';
import { hasHiddenCharacters, readVisibleKey, visibleKey } from '../../../src/operators/visible-key.js';

/** Keys that a terminal or a browser shows as 'alice' (or as 'al ice'), each with how it must be shown. */
const LOOKALIKES: Record<string, string> = {
  'alice ': 'alice\\x20',
  ' alice': '\\x20alice',
  'alice  ': 'alice\\x20\\x20',
  'alice\u00a0': 'alice\\xa0',
  'alice\u3164': 'alice\\u3164',
  'alice\u115f': 'alice\\u115f',
  'alice\u1160': 'alice\\u1160',
  'alice\uffa0': 'alice\\uffa0',
  'alice\u2800': 'alice\\u2800',
  'alice\u200b': 'alice\\u200b',
  'alice\u2060': 'alice\\u2060',
  'alice\ufeff': 'alice\\ufeff',
  'alice\u00ad': 'alice\\xad',
  'alice\u034f': 'alice\\u034f',
  'alice\ufe0f': 'alice\\ufe0f',
  'alice\u180e': 'alice\\u180e',
  'alice\u3000': 'alice\\u3000',
  'alice\u2003': 'alice\\u2003',
  'alice\u202f': 'alice\\u202f',
  'alice\u2028': 'alice\\u2028',
  'alice\u0085': 'alice\\x85',
  'alice\t': 'alice\\x09',
  'alice\u{e0041}': 'alice\\u{e0041}',
  'alice\u{f0000}': 'alice\\u{f0000}',
  'alice\ud800': 'alice\\ud800',
  'alice\udfff': 'alice\\udfff',
  '\udc00alice': '\\udc00alice',
  'al  ice': 'al\\x20\\x20ice',
  'al\u00a0ice': 'al\\xa0ice',
};

/** A character `visibleKey` leaves as it is must print as itself: none of these, and no lone surrogate. */
const INVISIBLE = /[\p{Cc}\p{Cf}\p{Cs}\p{Co}\p{Cn}\p{Default_Ignorable_Code_Point}\u2800]|(?! )\p{Z}/u;

describe('visibleKey', () => {
  it('shows every look-alike of alice as an escape, and reads each back to its own key', () => {
    for (const [key, shown] of Object.entries(LOOKALIKES)) {
      expect(visibleKey(key), JSON.stringify(key)).to.equal(shown);
      expect(hasHiddenCharacters(key), JSON.stringify(key)).to.equal(true);
      expect(readVisibleKey(shown), shown).to.equal(key);
    }
  });

  it('leaves what prints as itself alone: a single inner space, letters of every script, emoji', () => {
    for (const key of ['alice', 'al ice', 'a b c', 'Łódź', 'ユーザー', 'пользователь', '😀', '203.0.113.7']) {
      expect(visibleKey(key)).to.equal(key);
      expect(hasHiddenCharacters(key)).to.equal(false);
    }
  });

  it('writes a backslash as \\\\, so a key holding the text \\u200b is not the key holding U+200B', () => {
    expect(visibleKey('a\\u200b')).to.equal('a\\\\u200b');
    expect(readVisibleKey('a\\\\u200b')).to.equal('a\\u200b');
    expect(readVisibleKey('a\\u200b')).to.equal('a\u200b');
  });

  it('for any string: two different keys are shown differently, each reads back, and nothing shown is invisible', () => {
    const unit = fc.oneof(
      fc.string({ unit: 'binary' }),
      fc.string({
        unit: fc.constantFrom(' ', '\u00a0', '\u3164', '\u2800', '\u200b', '\\', 'a', '\ud800', '\udc00'),
      }),
    );
    fc.assert(
      fc.property(unit, unit, (a, b) => {
        const shown = visibleKey(a);
        expect(readVisibleKey(shown)).to.equal(a);
        if (a !== b) expect(visibleKey(b)).not.to.equal(shown);
        const outside = shown.replace(/(?<=[^ ]) (?=[^ ])/g, '');
        expect(INVISIBLE.test(outside) || /^ | $/.test(shown), JSON.stringify(shown)).to.equal(false);
      }),
      { numRuns: 2000 },
    );
  });
});
