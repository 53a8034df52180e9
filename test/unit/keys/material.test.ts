// Property tests of key identities: after normalization, no request value takes a reserved key's or a digest's
// form, and two values a rule tells apart never share an identity, in single, composite and template keys.
import { expect } from 'chai';
import fc from 'fast-check';
import { createExtractor } from '../../../src/keys/extractors.js';
import {
  MAX_KEY_LENGTH,
  normalizeIdentity,
  OVERSIZED_KEY,
  UNPARSED_BODY_KEY,
  UNRESOLVED_IP_KEY,
} from '../../../src/keys/material.js';
import type { KeySpec, RequestInfo } from '../../../src/types.js';

const RESERVED_KEYS = new Set([OVERSIZED_KEY, UNRESOLVED_IP_KEY, UNPARSED_BODY_KEY]);
const DIGEST = /^#[\w-]{43}$/;
const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;
const OVERSIZED_VALUE = 'o'.repeat(MAX_KEY_LENGTH + 1);

/**
 * Values that come close to every reserved form: reserved keys' words in any case and width, '#', '%', '|' and
 * the template characters, lone surrogates, digests sent as names, nothing at all, and over-long text.
 */
const piece = fc.constantFrom(
  '#',
  '##',
  '＃',
  '%',
  '%23',
  '%7C',
  '|',
  ':',
  '-',
  ' ',
  'oversized',
  'OVERSIZED',
  OVERSIZED_KEY,
  UNRESOLVED_IP_KEY,
  '#UNPARSED-BODY',
  'ｏｖｅｒｓｉｚｅｄ',
  'unresolved-ip',
  'unparsed-body',
  'a',
  'B',
  '\ud800',
  '\udc00',
  '\ud83d\ude00',
  `#${'A'.repeat(43)}`,
);
const text = fc.array(piece, { maxLength: 6 }).map((parts) => parts.join(''));
/** A field's value: text, absent (undefined or null), or over MAX_KEY_LENGTH. */
const value = fc.oneof(
  { weight: 8, arbitrary: text },
  { weight: 1, arbitrary: fc.constantFrom(undefined, null, OVERSIZED_VALUE) },
);

/** What a rule keys on for a value: its normalized text, the oversized reserved key, or nothing. */
function meaning(v: string | null | undefined, normalize: boolean): string {
  if (v === undefined || v === null || v === '') return 'absent';
  if (v.length > MAX_KEY_LENGTH) return 'oversized';
  const t = normalize ? normalizeIdentity(v) : v;
  return t === '' ? 'absent' : `text:${t}`;
}

function extractor(spec: KeySpec, normalize: boolean) {
  return createExtractor(spec, { ipv6Subnet: 56, normalize: normalize ? normalizeIdentity : undefined });
}

const req = (body: Record<string, unknown>): RequestInfo => ({
  method: 'POST',
  path: '/',
  headers: {},
  body,
});

describe('Key identities (properties over normalization)', () => {
  for (const normalize of [false, true]) {
    describe(normalize ? 'normalized' : 'as sent', () => {
      it('a single field: no value reaches a reserved key or a digest, and values told apart stay apart', () => {
        const extract = extractor('body.a', normalize);
        fc.assert(
          fc.property(value, value, (x, y) => {
            const [kx, ky] = [extract(req({ a: x })), extract(req({ a: y }))];
            const [mx, my] = [meaning(x, normalize), meaning(y, normalize)];
            for (const [k, m] of [
              [kx, mx],
              [ky, my],
            ] as const) {
              if (m === 'absent') expect(k).to.equal(undefined);
              else if (m === 'oversized') expect(k).to.equal(OVERSIZED_KEY);
              else {
                expect(RESERVED_KEYS.has(k as string), `${k} is a reserved key`).to.equal(false);
                // A digest only for text that cannot be stored as it is (a lone surrogate, over 256).
                if (DIGEST.test(k as string))
                  expect(m.slice(5)).to.satisfy((t: string) => LONE_SURROGATE.test(t) || t.length >= 256);
              }
            }
            expect(kx === ky, `${JSON.stringify([x, y])} -> ${JSON.stringify([kx, ky])}`).to.equal(mx === my);
          }),
          { numRuns: 3000 },
        );
      });

      for (const spec of [
        ['body.a', 'body.b'],
        ['body.a', 'body.b', 'body.c'],
        '{body.a}:{body.b}',
        '#{body.a}|{body.b}-',
        '{body.a}-{body.b}#{body.c}',
        'sms:{body.a}',
        '#{body.a}',
      ] as const) {
        it(`${JSON.stringify(spec)}: two requests share an identity exactly when every part means the same`, () => {
          const extract = extractor(spec as KeySpec, normalize);
          const parts = (typeof spec === 'string' ? spec.match(/\{body\.\w\}/g)?.length : spec.length) ?? 0;
          // The second request differs from the first in one part: what a shift between parts would need.
          const pair = fc
            .tuple(fc.tuple(value, value, value), fc.nat(2), value, fc.boolean())
            .map(([first, at, other, same]) => {
              const second = [...first] as typeof first;
              if (!same) second[at] = other;
              else [second[at], second[(at + 1) % 3]] = [first[(at + 1) % 3], first[at]];
              return [first, second] as const;
            });
          fc.assert(
            fc.property(pair, ([[a1, b1, c1], [a2, b2, c2]]) => {
              const k1 = extract(req({ a: a1, b: b1, c: c1 }));
              const k2 = extract(req({ a: a2, b: b2, c: c2 }));
              const m1 = [a1, b1, c1].slice(0, parts).map((v) => meaning(v, normalize));
              const m2 = [a2, b2, c2].slice(0, parts).map((v) => meaning(v, normalize));
              // One placeholder: absent means no key; several: the rule applies while any part is present.
              const applies = (m: string[]) =>
                parts === 1 ? m[0] !== 'absent' : m.some((p) => p !== 'absent');
              expect(k1 !== undefined).to.equal(applies(m1));
              if (k1 !== undefined) expect(RESERVED_KEYS.has(k1), k1).to.equal(false);
              if (k1 !== undefined && k2 !== undefined)
                expect(k1 === k2, `${JSON.stringify([m1, m2])} -> ${JSON.stringify([k1, k2])}`).to.equal(
                  m1.join('\u0000') === m2.join('\u0000'),
                );
            }),
            { numRuns: 2000 },
          );
        });
      }
    });
  }
});
