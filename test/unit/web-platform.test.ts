// The core needs only the Web platform: bundled for a runtime without Node's modules (esbuild, platform
// 'neutral', nothing external), `ratekeeper`, `ratekeeper/fetch` and `ratekeeper/hono` build, so no `node:`
// module is on their import graph; the Node-only parts (the console, the CLI) stay behind their own entry
// points. And the helpers that replaced node:crypto give Node's very digests: Redis keys and statement
// names stay as they were.
import { createHash } from 'node:crypto';
import { once } from 'node:events';
import { join, resolve } from 'node:path';
import { expect } from 'chai';
import { build, type Metafile } from 'esbuild';
import fc from 'fast-check';
import { digest, sha256Hex } from '../../src/digest.js';
import { EventEmitter } from '../../src/limiter/event-emitter.js';

const ROOT = resolve(import.meta.dirname, '../..');

/** The entry bundled as for workerd without nodejs_compat; rejects naming every module it cannot resolve. */
async function bundle(entry: string): Promise<Metafile> {
  const result = await build({
    entryPoints: [join(ROOT, entry)],
    bundle: true,
    format: 'esm',
    platform: 'neutral',
    conditions: ['workerd', 'worker', 'browser'],
    mainFields: ['module', 'main'],
    target: 'es2022',
    write: false,
    metafile: true,
    logLevel: 'silent',
  });
  return result.metafile;
}

describe('the core on the Web platform alone', function () {
  this.timeout(60_000);

  for (const entry of ['src/index.ts', 'adapters/fetch.ts', 'adapters/hono.ts']) {
    it(`${entry} bundles with no node: module and none of the Node-only parts`, async () => {
      const meta = await bundle(entry);
      const inputs = Object.keys(meta.inputs);
      expect(inputs.filter((path) => path.startsWith('node:'))).to.deep.equal([]);
      expect(inputs.filter((path) => /src\/operators\/(console|cli)\//.test(path))).to.deep.equal([]);
    });
  }

  it('fails, naming the module, when a node: module is on the path (the check can fail)', async () => {
    let error: unknown;
    try {
      await bundle('src/operators/console/index.ts');
    } catch (thrown) {
      error = thrown;
    }
    expect(String((error as Error | undefined)?.message)).to.match(/Could not resolve "node:/);
  });
});

/** Any code point, and lone surrogates, which UTF-8 would turn into U+FFFD. */
const UNIT = fc.oneof(
  fc.string({ unit: 'binary', minLength: 1, maxLength: 1 }),
  fc.constantFrom('\ud800', '\udfff'),
);

describe('digests without node:crypto', () => {
  it("an identity's digest is Node's SHA-256 of its UTF-16 code units, lone surrogates included", () => {
    fc.assert(
      fc.property(fc.string({ unit: UNIT, maxLength: 300 }), (value) => {
        const node = `#${createHash('sha256').update(value, 'utf16le').digest('base64url')}`;
        expect(digest(value)).to.equal(node);
      }),
      { numRuns: 500 },
    );
    expect(digest('')).to.have.length(44);
  });

  it("a text's SHA-256 is Node's over its UTF-8 bytes", () => {
    fc.assert(
      fc.property(fc.string({ unit: UNIT, maxLength: 300 }), (text) => {
        expect(sha256Hex(text)).to.equal(createHash('sha256').update(text).digest('hex'));
      }),
      { numRuns: 500 },
    );
  });
});

interface TestEvents {
  tick: [number];
  other: [string, boolean];
}

describe("the limiter's EventEmitter (Node's surface, no node:events)", () => {
  it('calls listeners in the order added, once listeners once, and counts them', () => {
    const emitter = new EventEmitter<TestEvents>();
    const seen: string[] = [];
    const a = (n: number) => seen.push(`a${n}`);
    emitter.on('tick', a);
    emitter.once('tick', (n) => seen.push(`once${n}`));
    emitter.prependListener('tick', (n) => seen.push(`first${n}`));
    expect(emitter.listenerCount('tick')).to.equal(3);
    expect(emitter.emit('tick', 1)).to.equal(true);
    expect(emitter.emit('tick', 2)).to.equal(true);
    expect(seen).to.deep.equal(['first1', 'a1', 'once1', 'first2', 'a2']);
    expect(emitter.listenerCount('tick')).to.equal(2);
    expect(emitter.emit('other', 'x', true)).to.equal(false);
    expect(emitter.eventNames()).to.deep.equal(['tick']);
  });

  it('off removes the latest registration of a listener only; removeAllListeners clears', () => {
    const emitter = new EventEmitter<TestEvents>();
    let calls = 0;
    const listener = () => calls++;
    emitter.on('tick', listener).on('tick', listener);
    emitter.off('tick', listener);
    emitter.emit('tick', 0);
    expect(calls).to.equal(1);
    emitter.removeAllListeners();
    expect(emitter.emit('tick', 0)).to.equal(false);
  });

  it('a listener added or removed during an emit does not change that emit', () => {
    const emitter = new EventEmitter<TestEvents>();
    const seen: string[] = [];
    const late = () => seen.push('late');
    emitter.on('tick', () => {
      seen.push('first');
      emitter.on('tick', late);
      emitter.off('tick', second);
    });
    const second = () => seen.push('second');
    emitter.on('tick', second);
    emitter.emit('tick', 0);
    expect(seen).to.deep.equal(['first', 'second']);
  });

  it("a listener that throws throws out of emit, as Node's do; a listener must be a function", () => {
    const emitter = new EventEmitter<TestEvents>();
    emitter.on('tick', () => {
      throw new Error('listener failed');
    });
    expect(() => emitter.emit('tick', 0)).to.throw('listener failed');
    expect(() => emitter.on('tick', 'nope' as never)).to.throw(TypeError, /listener/);
    expect(() => emitter.setMaxListeners(-1)).to.throw(RangeError);
  });

  it('works with node:events once(), as code written for an EventEmitter does', async () => {
    const emitter = new EventEmitter<TestEvents>();
    const next = once(emitter as never, 'tick');
    emitter.emit('tick', 7);
    expect(await next).to.deep.equal([7]);
    expect(emitter.listenerCount('tick')).to.equal(0);
  });
});
